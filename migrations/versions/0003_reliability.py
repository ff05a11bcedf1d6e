"""Reliability: the request behind an Idempotency-Key, evaluation-run attempts, server-side web sessions

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 13:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('training_jobs', sa.Column('request_sha256', sa.String(length=64), nullable=True))
    op.add_column('evaluation_runs', sa.Column('attempts', sa.Integer(), nullable=False, server_default='0'))
    op.add_column('evaluation_runs', sa.Column('started_at', sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        'web_sessions',
        sa.Column('id', sa.Uuid(), nullable=False),
        sa.Column('team_id', sa.Uuid(), nullable=False),
        sa.Column('key_hash', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_web_sessions_team_id_teams'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_web_sessions')),
    )
    op.create_index(op.f('ix_web_sessions_team_id'), 'web_sessions', ['team_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_web_sessions_team_id'), table_name='web_sessions')
    op.drop_table('web_sessions')
    with op.batch_alter_table('evaluation_runs') as batch:
        batch.drop_column('started_at')
        batch.drop_column('attempts')
    with op.batch_alter_table('training_jobs') as batch:
        batch.drop_column('request_sha256')
