"""The tables sealstore keeps in the user's database, as SQLAlchemy ``Table`` objects.

* ``sealstore_keys``: the key registry, defined once in :mod:`sealstore.keysources.database` and
  re-exported here.
* ``sealstore_object_prefixes``: object-store locations (scheme, bucket, prefix: ``s3://b/p``)
  holding objects sealed with the keyring, so ``sealstore keys retire`` checks them too before
  retiring a key (revision ``sealstore_0004``; it replaced ``sealstore_s3_prefixes``, whose
  rows it carried over).
* ``sealstore_jobs``: one row per re-encryption / re-index job: what it rewrites (table,
  column, target key id), its checkpoint (the last primary key claimed, as JSON), counts,
  status, timestamps and the last worker's heartbeat.
* ``sealstore_job_batches``: the primary-key ranges of a job that have been claimed.  A batch is
  ``pending`` until the transaction that rewrites its rows also marks it ``done``; workers take
  pending batches with ``SELECT ... FOR UPDATE SKIP LOCKED``, so a batch whose worker died is
  picked up again and a live worker's batch is never processed twice.

The shipped Alembic revisions (``sealstore.migrations:versions``) create exactly these tables;
:func:`create_tables` does the same without Alembic (tests, scripts).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Connection, Engine

from ..keysources.database import sealstore_keys, sealstore_keys_columns

__all__ = [
    "BATCHES_TABLE",
    "JOBS_TABLE",
    "OBJECT_PREFIXES_TABLE",
    "RETIRED_TABLES",
    "batches_columns",
    "create_tables",
    "drop_tables",
    "jobs_columns",
    "metadata",
    "sealstore_job_batches",
    "sealstore_jobs",
    "sealstore_keys",
    "sealstore_object_prefixes",
]

JOBS_TABLE = "sealstore_jobs"
BATCHES_TABLE = "sealstore_job_batches"
OBJECT_PREFIXES_TABLE = "sealstore_object_prefixes"
#: tables of earlier revisions, still sealstore's where a database is not upgraded yet
RETIRED_TABLES: frozenset[str] = frozenset({"sealstore_s3_prefixes"})

# Job statuses (sealstore_jobs.status) and batch states (sealstore_job_batches.state).
RUNNING, DONE, FAILED, SUPERSEDED = "running", "done", "failed", "superseded"
PENDING = "pending"


def jobs_columns() -> list[Column[Any]]:
    """Fresh Column objects of ``sealstore_jobs`` (for ``op.create_table``)."""
    return [
        Column("job_id", Integer, primary_key=True, autoincrement=True),
        Column("kind", String(16), nullable=False),  # rotate | reindex
        Column("table_name", String(255), nullable=False),
        Column("column_name", String(255), nullable=False),
        Column("target_key_id", BigInteger, nullable=False),  # 0..2**32-1
        Column("batch_size", Integer, nullable=False),
        Column("checkpoint", Text, nullable=True),  # JSON primary key of the last claimed row
        Column("batches", Integer, nullable=False, default=0),  # batches claimed so far
        Column("total_estimate", BigInteger, nullable=True),  # stale values when it started
        Column("rows_resealed", BigInteger, nullable=False, default=0),
        Column("rows_conflicted", BigInteger, nullable=False, default=0),
        Column("rows_failed", BigInteger, nullable=False, default=0),
        Column("status", String(16), nullable=False),  # running | done | failed | superseded
        # "kind:table:column" while running, NULL afterwards: one running job per column
        Column("active_key", String(530), nullable=True, unique=True),
        Column("started_at", DateTime(timezone=True), nullable=False),
        Column("finished_at", DateTime(timezone=True), nullable=True),
        Column("heartbeat_at", DateTime(timezone=True), nullable=True),
        Column("worker", String(255), nullable=True),  # the worker that last committed a batch
        Column("message", Text, nullable=True),  # failure summary (primary keys, never values)
    ]


def batches_columns() -> list[Column[Any]]:
    """Fresh Column objects of ``sealstore_job_batches`` (for ``op.create_table``)."""
    return [
        Column(
            "job_id",
            Integer,
            ForeignKey(f"{JOBS_TABLE}.job_id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        Column("batch_no", Integer, primary_key=True, autoincrement=False),
        Column("lo", Text, nullable=True),  # exclusive lower bound (JSON key), NULL: from the start
        Column("hi", Text, nullable=False),  # inclusive upper bound (JSON key)
        Column("state", String(16), nullable=False),  # pending | done
        Column("rows_resealed", Integer, nullable=False, default=0),
        Column("rows_conflicted", Integer, nullable=False, default=0),
        Column("rows_failed", Integer, nullable=False, default=0),
        Column("worker", String(255), nullable=True),
        Column("finished_at", DateTime(timezone=True), nullable=True),
    ]


metadata: MetaData = MetaData()
sealstore_jobs: Table = Table(JOBS_TABLE, metadata, *jobs_columns())
sealstore_job_batches: Table = Table(
    BATCHES_TABLE,
    metadata,
    *batches_columns(),
    Index("ix_sealstore_job_batches_state", "job_id", "state"),
)
sealstore_object_prefixes: Table = Table(
    OBJECT_PREFIXES_TABLE,
    metadata,
    # scheme://bucket/prefix; 16 + 222 + 500 characters: within MySQL's 3072-byte key in utf8mb4
    Column("scheme", String(16), primary_key=True),
    Column("bucket", String(222), primary_key=True),
    Column("prefix", String(500), primary_key=True),
    Column("registered_at", DateTime(timezone=True), nullable=False),
)
# the registry table joins this MetaData too, so create_tables() makes all three
_keys = Table(sealstore_keys.name, metadata, *sealstore_keys_columns())


def create_tables(bind: Engine | Connection) -> None:
    """Create the sealstore tables that are missing (what ``alembic upgrade sealstore@head`` does),
    carrying the rows of ``sealstore_s3_prefixes`` (from before revision ``sealstore_0004``)
    over to ``sealstore_object_prefixes`` and dropping it, as that revision does."""
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            create_tables(conn)
        return
    metadata.create_all(bind)
    if "sealstore_s3_prefixes" not in inspect(bind).get_table_names():
        return
    old = Table("sealstore_s3_prefixes", MetaData(), autoload_with=bind)
    rows = bind.execute(select(old.c.url, old.c.registered_at)).all()
    for url, registered_at in rows:
        scheme, sep, rest = url.partition("://")
        bucket, _, prefix = rest.partition("/")
        if (scheme, sep) != ("s3", "://") or not bucket:
            raise ValueError(f"sealstore_s3_prefixes holds {url!r}, not s3://BUCKET[/PREFIX]")
        exists = bind.execute(
            select(sealstore_object_prefixes.c.scheme).where(
                sealstore_object_prefixes.c.scheme == "s3",
                sealstore_object_prefixes.c.bucket == bucket,
                sealstore_object_prefixes.c.prefix == prefix,
            )
        ).first()
        if exists is None:
            bind.execute(
                insert(sealstore_object_prefixes).values(
                    scheme="s3", bucket=bucket, prefix=prefix, registered_at=registered_at
                )
            )
    old.drop(bind)


def drop_tables(bind: Engine | Connection) -> None:
    """Drop the sealstore tables (what ``alembic downgrade sealstore@base`` does)."""
    metadata.drop_all(bind)
