"""Who claimed each piece of queued work (a task id), when a retried row is due, and corpus statistics that end like a job

training_jobs.claimed_by, evaluation_runs.claimed_by, corpora.statistics_claimed_by: the task that
holds the claim, so that a worker whose child was killed at the hard time limit fails the row
that child had claimed (a task message starts whichever row is fair, not only its own).
training_jobs.retry_at, evaluation_runs.retry_at: a row queued again after a transient fault is
not started before then (any message may start any row: without it, an outage would use up
attempts as fast as messages come).
corpora.statistics_attempts and corpora.statistics_error: a corpus's statistics are claimed,
counted and failed with a reason as a job is.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ('training_jobs', 'evaluation_runs'):
        op.add_column(table, sa.Column('claimed_by', sa.String(length=200), nullable=True))
        op.add_column(table, sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('corpora', sa.Column('statistics_claimed_by', sa.String(length=200), nullable=True))
    op.add_column('corpora', sa.Column('statistics_attempts', sa.Integer(), server_default='0', nullable=False))
    op.add_column('corpora', sa.Column('statistics_error', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('corpora') as batch:
        batch.drop_column('statistics_error')
        batch.drop_column('statistics_attempts')
        batch.drop_column('statistics_claimed_by')
    for table in ('evaluation_runs', 'training_jobs'):
        with op.batch_alter_table(table) as batch:
            batch.drop_column('retry_at')
            batch.drop_column('claimed_by')
