"""Fair share: the operator's quota figures per team (NULL: the settings' default)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 13:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

QUOTAS = ('storage_bytes', 'corpora', 'queued_jobs', 'running_jobs', 'concurrent_uploads', 'requests_per_minute')


def upgrade() -> None:
    op.create_table(
        'team_quotas',
        sa.Column('team_id', sa.Uuid(), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=True) for name in QUOTAS),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_team_quotas_team_id_teams'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('team_id', name=op.f('pk_team_quotas')),
    )


def downgrade() -> None:
    op.drop_table('team_quotas')
