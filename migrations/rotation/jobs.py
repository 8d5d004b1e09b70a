"""The job tables at work: start or join a job, claim batches, record them, finish.

Coordination is done by the database alone:

* one running job per (kind, table, column): ``active_key`` is unique while a job runs, so
  workers started at the same time on several machines all end up in the same job;
* claiming a new primary-key range locks the job row (``SELECT ... FOR UPDATE``) only for
  the index scan that finds the range's upper bound; the range is stored as a ``pending``
  batch and the checkpoint (the last claimed key) advances in the same transaction;
* a worker takes a pending batch with ``SELECT ... FOR UPDATE SKIP LOCKED`` and keeps that
  lock while it rewrites the rows; the same transaction marks the batch ``done`` and adds its
  counts to the job.  A worker that dies (even by SIGKILL) rolls back, its lock goes with its
  connection, and the batch is pending again for the next worker.

SQLite has no row locks (``FOR UPDATE`` is not rendered): one worker per job there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sealstore.errors import InternalError
from sqlalchemy import Column, func, insert, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from ..cursor import PrimaryKey, after, dump_key, load_key
from ..schema import (
    DONE,
    PENDING,
    RUNNING,
    SUPERSEDED,
)
from ..schema import (
    sealstore_job_batches as batches_t,
)
from ..schema import (
    sealstore_jobs as jobs_t,
)

__all__ = [
    "Batch",
    "Job",
    "begin_write",
    "claim_range",
    "count_pending",
    "finish_batch",
    "finish_job",
    "get_job",
    "is_dead",
    "running_jobs",
    "start_job",
    "take_pending",
]


def now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Job:
    """A snapshot of one ``sealstore_jobs`` row."""

    job_id: int
    kind: str
    table_name: str
    column_name: str
    target_key_id: int
    batch_size: int
    status: str
    checkpoint: str | None
    batches: int
    total_estimate: int | None
    rows_resealed: int
    rows_conflicted: int
    rows_failed: int
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    worker: str | None
    message: str | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> Job:
        """The job of a ``sealstore_jobs`` row (every column selected)."""
        m = row._mapping
        return cls(**{f: m[f] for f in cls.__dataclass_fields__})

    @property
    def done(self) -> int:
        """Values handled so far (re-sealed or re-indexed, plus those that failed)."""
        return self.rows_resealed + self.rows_failed


@dataclass(frozen=True)
class Batch:
    """One claimed primary-key range ``lo < pk <= hi`` of a job."""

    job_id: int
    batch_no: int
    lo: PrimaryKey | None
    hi: PrimaryKey


def _active_key(kind: str, table: str, column: str) -> str:
    return f"{kind}:{table}:{column}"


def get_job(conn: Connection, job_id: int, *, lock: bool = False) -> Job:
    """Job ``job_id`` as it is now (its row locked until the transaction ends with ``lock``)."""
    q = select(jobs_t).where(jobs_t.c.job_id == job_id)
    if lock:
        q = q.with_for_update()
    return Job.from_row(conn.execute(q).one())


def start_job(
    engine: Engine,
    kind: str,
    table: str,
    column: str,
    target_key_id: int,
    batch_size: int,
    estimate: Callable[[Connection], int | None] | None = None,
) -> tuple[Job, bool]:
    """The running job for ``kind`` on ``table.column``, or a new one.  Returns (job, created).

    A running job with another target key (the keyring rotated again since it started) is
    marked ``superseded`` and replaced.  ``estimate(conn)`` counts the values to rewrite; it
    is called only when a job is created.
    """
    active = _active_key(kind, table, column)
    for _ in range(5):
        try:
            with engine.begin() as conn:
                row = conn.execute(select(jobs_t).where(jobs_t.c.active_key == active)).first()
                if row is not None:
                    job = Job.from_row(row)
                    if job.target_key_id == target_key_id:
                        return job, False
                    _supersede(conn, job, target_key_id)
                total = estimate(conn) if estimate is not None else None
                job_id = _insert_job(
                    conn, kind, table, column, target_key_id, batch_size, total, active
                )
                return get_job(conn, job_id), True
        except IntegrityError:  # another worker created it first: join that one
            continue
    raise InternalError(f"could not start or join the {kind} job on {table}.{column}")


def _supersede(conn: Connection, job: Job, target_key_id: int) -> None:
    """End ``job`` (still running, under an older target key) so a new one can take its place."""
    conn.execute(
        update(jobs_t)
        .where(jobs_t.c.job_id == job.job_id, jobs_t.c.status == RUNNING)
        .values(
            status=SUPERSEDED,
            active_key=None,
            finished_at=now(),
            message=f"superseded: the primary key is now {target_key_id:08x}",
        )
    )


def _insert_job(
    conn: Connection,
    kind: str,
    table: str,
    column: str,
    target_key_id: int,
    batch_size: int,
    total: int | None,
    active: str,
) -> int:
    """Insert a running job with nothing done yet; its job id.  ``active`` is unique among
    running jobs: a concurrent insert of the same job raises IntegrityError."""
    return conn.execute(
        insert(jobs_t)
        .values(
            kind=kind,
            table_name=table,
            column_name=column,
            target_key_id=target_key_id,
            batch_size=batch_size,
            checkpoint=None,
            batches=0,
            total_estimate=total,
            rows_resealed=0,
            rows_conflicted=0,
            rows_failed=0,
            status=RUNNING,
            active_key=active,
            started_at=now(),
        )
        .returning(jobs_t.c.job_id)
    ).scalar_one()


def claim_range(
    conn: Connection, job: Job, pk_cols: Sequence[Column[Any]]
) -> tuple[Job, Batch | None]:
    """Lock the job row, find the next ``batch_size`` keys after the checkpoint and store them
    as a pending batch.  Returns the refreshed job and the batch (None when the table has no
    keys left after the checkpoint, or the job is no longer running)."""
    begin_write(conn, job)
    current = get_job(conn, job.job_id, lock=True)
    if current.status != RUNNING:
        return current, None
    cursor = load_key(current.checkpoint)
    cond = after(pk_cols, cursor)
    conds = [] if cond is None else [cond]
    q = select(*pk_cols).where(*conds).order_by(*pk_cols)
    hi = conn.execute(q.offset(current.batch_size - 1).limit(1)).first()
    if hi is None:  # fewer than batch_size keys left: the range ends at the last one
        hi = conn.execute(
            select(*pk_cols).where(*conds).order_by(*[c.desc() for c in pk_cols]).limit(1)
        ).first()
    if hi is None:
        return current, None
    batch = Batch(current.job_id, current.batches, cursor, tuple(hi))
    conn.execute(
        insert(batches_t).values(
            job_id=current.job_id,
            batch_no=batch.batch_no,
            lo=current.checkpoint,
            hi=dump_key(hi),
            state=PENDING,
            rows_resealed=0,
            rows_conflicted=0,
            rows_failed=0,
        )
    )
    conn.execute(
        update(jobs_t)
        .where(jobs_t.c.job_id == current.job_id)
        .values(checkpoint=dump_key(hi), batches=jobs_t.c.batches + 1)
    )
    return current, batch


def begin_write(conn: Connection, job: Job) -> None:
    """SQLite only: make the transaction a write transaction before it reads anything.

    pysqlite starts a transaction at the first INSERT/UPDATE/DELETE, so reads before it would
    run outside the batch's transaction, and a transaction that read first and writes later
    can deadlock with another writer.  Touching the job's heartbeat first takes the write lock
    (waiting for other writers) and puts the reads inside the transaction.  Other databases
    lock rows, not the database: nothing to do.
    """
    if conn.dialect.name == "sqlite":
        conn.execute(update(jobs_t).where(jobs_t.c.job_id == job.job_id).values(heartbeat_at=now()))


def take_pending(conn: Connection, job: Job) -> Batch | None:
    """Lock the oldest pending batch nobody else holds (``FOR UPDATE SKIP LOCKED``)."""
    begin_write(conn, job)
    row = conn.execute(
        select(batches_t.c.batch_no, batches_t.c.lo, batches_t.c.hi)
        .where(batches_t.c.job_id == job.job_id, batches_t.c.state == PENDING)
        .order_by(batches_t.c.batch_no)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).first()
    if row is None:
        return None
    hi = load_key(row.hi)
    if hi is None:  # (every batch row has its upper bound)
        raise InternalError(f"batch {row.batch_no} of job {job.job_id} has no upper bound")
    return Batch(job.job_id, row.batch_no, load_key(row.lo), hi)


def count_pending(conn: Connection, job: Job) -> int:
    return conn.execute(
        select(func.count())
        .select_from(batches_t)
        .where(batches_t.c.job_id == job.job_id, batches_t.c.state == PENDING)
    ).scalar_one()


def finish_batch(
    conn: Connection,
    batch: Batch,
    *,
    resealed: int,
    conflicted: int,
    failed: int,
    worker: str,
    message: str | None = None,
) -> None:
    """Mark ``batch`` done and add its counts to the job (same transaction as the rewrite)."""
    ts = now()
    conn.execute(
        update(batches_t)
        .where(batches_t.c.job_id == batch.job_id, batches_t.c.batch_no == batch.batch_no)
        .values(
            state=DONE,
            rows_resealed=resealed,
            rows_conflicted=conflicted,
            rows_failed=failed,
            worker=worker,
            finished_at=ts,
        )
    )
    values = {
        "rows_resealed": jobs_t.c.rows_resealed + resealed,
        "rows_conflicted": jobs_t.c.rows_conflicted + conflicted,
        "rows_failed": jobs_t.c.rows_failed + failed,
        "heartbeat_at": ts,
        "worker": worker,
    }
    if message:
        values["message"] = message
    conn.execute(update(jobs_t).where(jobs_t.c.job_id == batch.job_id).values(**values))


def finish_job(conn: Connection, job: Job, status: str = DONE, message: str | None = None) -> None:
    """Close a running job (idempotent: a job that is no longer running is left alone)."""
    values = {"status": status, "active_key": None, "finished_at": now()}
    if message is not None:
        values["message"] = message
    conn.execute(
        update(jobs_t)
        .where(jobs_t.c.job_id == job.job_id, jobs_t.c.status == RUNNING)
        .values(**values)
    )


#: A running job whose last heartbeat is older than this has no live worker: longer than a
#: batch can take, and than the retry budget a worker may spend waiting for the database.
LEASE_SECONDS = 120.0


def is_dead(job: Job, *, at: datetime | None = None, lease: float = LEASE_SECONDS) -> bool:
    """Whether a running job's last sign of life (heartbeat, else start) is older than
    ``lease`` seconds.  The next ``rotate``/``reindex`` joins it and carries on (a dead
    worker's batch is pending again once its connection is gone)."""
    if job.status != RUNNING:
        return False
    last = job.heartbeat_at or job.started_at
    if last is None:
        return True
    if last.tzinfo is None:  # SQLite returns naive datetimes: they were written in UTC
        last = last.replace(tzinfo=timezone.utc)
    return ((at or now()) - last).total_seconds() > lease


def running_jobs(conn: Connection) -> list[Job]:
    rows = conn.execute(
        select(jobs_t).where(jobs_t.c.status == RUNNING).order_by(jobs_t.c.job_id)
    ).all()
    return [Job.from_row(r) for r in rows]
