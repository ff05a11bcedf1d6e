"""Whole-corpus evaluation spread over workers: the byte ranges of the corpora an evaluation run
measures whole, claimed and measured by any worker

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'measure_parts',
        sa.Column('run_id', sa.Uuid(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('part', sa.Integer(), nullable=False),
        sa.Column('corpus_id', sa.Uuid(), nullable=False),
        sa.Column('start', sa.BigInteger(), nullable=False),
        sa.Column('end', sa.BigInteger(), nullable=False),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('claims', sa.Integer(), nullable=False),
        sa.Column('result_key', sa.String(length=500), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['evaluation_runs.id'], name=op.f('fk_measure_parts_run_id_evaluation_runs'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f('fk_measure_parts_corpus_id_corpora'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('run_id', 'attempt', 'part', name=op.f('pk_measure_parts')),
    )


def downgrade() -> None:
    op.drop_table('measure_parts')
