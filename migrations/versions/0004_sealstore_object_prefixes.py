"""sealstore: registered object prefixes of every store (scheme, bucket, prefix), replacing the
S3-only ``sealstore_s3_prefixes``; its rows are carried over.

Revision ID: sealstore_0004
Revises: sealstore_0003
Create Date: 2026-12-02

Frozen copy of ``sealstore.migrations.schema.sealstore_object_prefixes`` (tests check they
match).  A downgrade carries the ``s3`` rows back and refuses (before changing anything) while
prefixes of another store are registered: the old table cannot hold them.
"""

import sqlalchemy as sa
from alembic import op

revision = "sealstore_0004"
down_revision = "sealstore_0003"
branch_labels = None
depends_on = None

_old = sa.table(
    "sealstore_s3_prefixes",
    sa.column("url", sa.String(700)),
    sa.column("registered_at", sa.DateTime(timezone=True)),
)


def _split(url):
    """``s3://bucket/prefix`` -> ``(bucket, prefix)`` (as sealstore 0.x registered them)."""
    if not url.startswith("s3://") or not url[5:].partition("/")[0]:
        raise ValueError(f"sealstore_s3_prefixes holds {url!r}, which is not s3://BUCKET[/PREFIX]")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix


def upgrade() -> None:
    new = op.create_table(
        "sealstore_object_prefixes",
        sa.Column("scheme", sa.String(16), primary_key=True),
        sa.Column("bucket", sa.String(222), primary_key=True),
        sa.Column("prefix", sa.String(500), primary_key=True),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
    )
    rows = op.get_bind().execute(sa.select(_old.c.url, _old.c.registered_at)).all()
    carried = []
    for url, registered_at in rows:
        bucket, prefix = _split(url)
        carried.append(
            {"scheme": "s3", "bucket": bucket, "prefix": prefix, "registered_at": registered_at}
        )
    if carried:
        op.bulk_insert(new, carried)
    op.drop_table("sealstore_s3_prefixes")


def downgrade() -> None:
    new = sa.table(
        "sealstore_object_prefixes",
        sa.column("scheme", sa.String(16)),
        sa.column("bucket", sa.String(222)),
        sa.column("prefix", sa.String(500)),
        sa.column("registered_at", sa.DateTime(timezone=True)),
    )
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(new.c.scheme, new.c.bucket, new.c.prefix, new.c.registered_at)
    ).all()
    others = sorted({r.scheme for r in rows if r.scheme != "s3"})
    if others:
        raise ValueError(
            "cannot downgrade below sealstore_0004: prefixes of "
            f"{', '.join(s + '://' for s in others)} are registered, and sealstore_s3_prefixes "
            "holds S3 prefixes only; unregister them first"
        )
    old = op.create_table(
        "sealstore_s3_prefixes",
        sa.Column("url", sa.String(700), primary_key=True),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
    )
    back = [
        {"url": f"s3://{r.bucket}/{r.prefix}" if r.prefix else f"s3://{r.bucket}",
         "registered_at": r.registered_at}
        for r in rows
    ]  # fmt: skip
    if back:
        op.bulk_insert(old, back)
    op.drop_table("sealstore_object_prefixes")
