"""sealstore: rotation / re-index jobs and their claimed batches.

Revision ID: sealstore_0002
Revises: sealstore_0001
Create Date: 2026-11-30

Frozen copy of ``sealstore.migrations.schema`` (tests check the two match).
"""

import sqlalchemy as sa
from alembic import op

revision = "sealstore_0002"
down_revision = "sealstore_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealstore_jobs",
        sa.Column("job_id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("table_name", sa.String(255), nullable=False),
        sa.Column("column_name", sa.String(255), nullable=False),
        sa.Column("target_key_id", sa.BigInteger(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("checkpoint", sa.Text(), nullable=True),
        sa.Column("batches", sa.Integer(), nullable=False),
        sa.Column("total_estimate", sa.BigInteger(), nullable=True),
        sa.Column("rows_resealed", sa.BigInteger(), nullable=False),
        sa.Column("rows_conflicted", sa.BigInteger(), nullable=False),
        sa.Column("rows_failed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("active_key", sa.String(530), nullable=True, unique=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
    )
    op.create_table(
        "sealstore_job_batches",
        sa.Column(
            "job_id",
            sa.Integer(),
            sa.ForeignKey("sealstore_jobs.job_id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("batch_no", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("lo", sa.Text(), nullable=True),
        sa.Column("hi", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("rows_resealed", sa.Integer(), nullable=False),
        sa.Column("rows_conflicted", sa.Integer(), nullable=False),
        sa.Column("rows_failed", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(255), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_sealstore_job_batches_state", "sealstore_job_batches", ["job_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_sealstore_job_batches_state", table_name="sealstore_job_batches")
    op.drop_table("sealstore_job_batches")
    op.drop_table("sealstore_jobs")
