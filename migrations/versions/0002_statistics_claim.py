"""corpora.statistics_claimed_at: the claim of the worker computing a corpus's statistics

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('corpora', sa.Column('statistics_claimed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('corpora') as batch:
        batch.drop_column('statistics_claimed_at')
