"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30 02:29:18.806912
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('teams',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_teams')),
    sa.UniqueConstraint('name', name=op.f('uq_teams_name'))
    )
    op.create_table('api_keys',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_api_keys_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_keys_team_id'), ['team_id'], unique=False)

    op.create_table('corpora',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('domain', sa.String(length=100), nullable=False),
    sa.Column('language', sa.String(length=50), nullable=False),
    sa.Column('format', sa.String(length=10), nullable=False),
    sa.Column('text_field', sa.String(length=100), nullable=True),
    sa.Column('parallel_group', sa.String(length=100), nullable=True),
    sa.Column('storage_key', sa.String(length=500), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.Column('lines', sa.BigInteger(), nullable=False),
    sa.Column('words', sa.BigInteger(), nullable=False),
    sa.Column('characters', sa.BigInteger(), nullable=False),
    sa.Column('statistics', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_corpora_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_corpora'))
    )
    with op.batch_alter_table('corpora', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_corpora_team_id'), ['team_id'], unique=False)

    op.create_table('training_jobs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('tokenizer', sa.String(length=200), nullable=False),
    sa.Column('spec', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('train_corpus_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('eval_corpus_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('stage', sa.String(length=50), nullable=False),
    sa.Column('progress', sa.Double(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.String(length=200), nullable=True),
    sa.Column('version', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f('ck_training_jobs_status')),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_training_jobs_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_training_jobs')),
    sa.UniqueConstraint('team_id', 'idempotency_key', name=op.f('uq_training_jobs_team_id_idempotency_key'))
    )
    with op.batch_alter_table('training_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_training_jobs_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_training_jobs_team_id'), ['team_id'], unique=False)

    op.create_table('tokenizer_versions',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=True),
    sa.Column('spec', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('vocab_size', sa.Integer(), nullable=False),
    sa.Column('files', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('lineage', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('train_seconds', sa.Double(), nullable=False),
    sa.Column('peak_memory_bytes', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['training_jobs.id'], name=op.f('fk_tokenizer_versions_job_id_training_jobs'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_tokenizer_versions_team_id_teams'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tokenizer_versions')),
    sa.UniqueConstraint('team_id', 'name', 'version', name=op.f('uq_tokenizer_versions_team_id_name_version'))
    )
    with op.batch_alter_table('tokenizer_versions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tokenizer_versions_team_id'), ['team_id'], unique=False)

    op.create_table('evaluation_runs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('version_id', sa.Uuid(), nullable=True),
    sa.Column('reference', sa.String(length=50), nullable=True),
    sa.Column('corpus_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f('ck_evaluation_runs_status')),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_evaluation_runs_team_id_teams'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['tokenizer_versions.id'], name=op.f('fk_evaluation_runs_version_id_tokenizer_versions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluation_runs'))
    )
    with op.batch_alter_table('evaluation_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_evaluation_runs_team_id'), ['team_id'], unique=False)

    op.create_table('evaluations',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('team_id', sa.Uuid(), nullable=False),
    sa.Column('version_id', sa.Uuid(), nullable=True),
    sa.Column('reference', sa.String(length=50), nullable=True),
    sa.Column('corpus_id', sa.Uuid(), nullable=False),
    sa.Column('run_id', sa.Uuid(), nullable=True),
    sa.Column('word_rule', sa.String(length=50), nullable=False),
    sa.Column('metrics', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('(version_id IS NULL) <> (reference IS NULL)', name=op.f('ck_evaluations_subject')),
    sa.ForeignKeyConstraint(['corpus_id'], ['corpora.id'], name=op.f('fk_evaluations_corpus_id_corpora'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['evaluation_runs.id'], name=op.f('fk_evaluations_run_id_evaluation_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['teams.id'], name=op.f('fk_evaluations_team_id_teams'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['tokenizer_versions.id'], name=op.f('fk_evaluations_version_id_tokenizer_versions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluations'))
    )
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_evaluations_corpus_id'), ['corpus_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_evaluations_team_id'), ['team_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_evaluations_version_id'), ['version_id'], unique=False)




def downgrade() -> None:

    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_evaluations_version_id'))
        batch_op.drop_index(batch_op.f('ix_evaluations_team_id'))
        batch_op.drop_index(batch_op.f('ix_evaluations_corpus_id'))

    op.drop_table('evaluations')
    with op.batch_alter_table('evaluation_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_evaluation_runs_team_id'))

    op.drop_table('evaluation_runs')
    with op.batch_alter_table('tokenizer_versions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tokenizer_versions_team_id'))

    op.drop_table('tokenizer_versions')
    with op.batch_alter_table('training_jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_training_jobs_team_id'))
        batch_op.drop_index(batch_op.f('ix_training_jobs_status'))

    op.drop_table('training_jobs')
    with op.batch_alter_table('corpora', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_corpora_team_id'))

    op.drop_table('corpora')
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_keys_team_id'))

    op.drop_table('api_keys')
    op.drop_table('teams')

