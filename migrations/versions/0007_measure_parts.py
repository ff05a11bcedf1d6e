"""Whole-corpus evaluation spread over workers: the byte ranges of the corpora an evaluation run
(measure_parts) or a training job evaluating its version (job_measure_parts) measures whole,
claimed and measured by any worker; evaluation_runs.whole, a run that measures every document
of its corpora rather than the seeded sample

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
    op.add_column('evaluation_runs', sa.Column('whole', sa.Boolean(), server_default=sa.false(), nullable=False))
    for table, owner, owners in (('measure_parts', 'run_id', 'evaluation_runs'),
                                 ('job_measure_parts', 'job_id', 'training_jobs')):
        op.create_table(
            table,
            sa.Column(owner, sa.Uuid(), nullable=False),
            sa.Column('attempt', sa.Integer(), nullable=False),
            sa.Column('part', sa.Integer(), nullable=False),
            sa.Column('corpus_id', sa.Uuid(), nullable=False),
            sa.Column('start', sa.BigInteger(), nullable=False),
            sa.Column('end', sa.BigInteger(), nullable=False),
            sa.Column('status', sa.String(length=20), nullable=False),
            sa.Column('claims', sa.Integer(), nullable=False),
            sa.Column('result_key', sa.String(length=500), nullable=True),
            sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint([owner], [f'{owners}.id'], name=op.f(f'fk_{table}_{owner}_{owners}'),
                                    ondelete='CASCADE'),
            sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f(f'fk_{table}_corpus_id_corpora'),
                                    ondelete='CASCADE'),
            sa.PrimaryKeyConstraint(owner, 'attempt', 'part', name=op.f(f'pk_{table}')),
        )


def downgrade() -> None:
    op.drop_table('job_measure_parts')
    op.drop_table('measure_parts')
    op.drop_column('evaluation_runs', 'whole')
