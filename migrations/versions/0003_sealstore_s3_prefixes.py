"""sealstore: registered S3 prefixes (checked before a key is retired).

Revision ID: sealstore_0003
Revises: sealstore_0002
Create Date: 2026-11-30

Frozen copy of ``sealstore.migrations.schema.sealstore_s3_prefixes`` (tests check they match).
"""

import sqlalchemy as sa
from alembic import op

revision = "sealstore_0003"
down_revision = "sealstore_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealstore_s3_prefixes",
        sa.Column("url", sa.String(700), primary_key=True),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sealstore_s3_prefixes")
