"""Distributed counting: the byte ranges of a job's corpora, claimed and counted by any worker

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 17:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'count_parts',
        sa.Column('job_id', sa.Uuid(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('part', sa.Integer(), nullable=False),
        sa.Column('corpus_id', sa.Uuid(), nullable=False),
        sa.Column('start', sa.BigInteger(), nullable=False),
        sa.Column('end', sa.BigInteger(), nullable=False),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('claims', sa.Integer(), nullable=False),
        sa.Column('counts_key', sa.String(length=500), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['job_id'], ['training_jobs.id'], name=op.f('fk_count_parts_job_id_training_jobs'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f('fk_count_parts_corpus_id_corpora'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('job_id', 'attempt', 'part', name=op.f('pk_count_parts')),
    )


def downgrade() -> None:
    op.drop_table('count_parts')
