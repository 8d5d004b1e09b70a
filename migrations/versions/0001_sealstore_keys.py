"""sealstore: the key registry table ``sealstore_keys``.

Revision ID: sealstore_0001
Revises:
Create Date: 2026-11-30

Frozen copy of ``sealstore.keysources.database.sealstore_keys`` (tests check the two match).
"""

import sqlalchemy as sa
from alembic import op

revision = "sealstore_0001"
down_revision = None
branch_labels: tuple[str, ...] = ("sealstore",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealstore_keys",
        sa.Column("key_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("suite", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("sealstore_keys")
