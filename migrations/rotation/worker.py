"""The worker loop shared by rotation and re-indexing: claim, rewrite, checkpoint, repeat.

A *task* (``reseal.ResealTask``, ``reindex.ReindexTask``) knows one column: the key id values
should end up under, the SQL filter for values that are not there yet, and how to rewrite the
stale values of one primary-key range inside a transaction.  :func:`run` drives a task through
the job tables (see :mod:`sealstore.migrations.rotation.jobs`): each batch is one transaction that
rewrites the range, marks the batch done and adds the counts to the job, so killing a worker
at any point loses at most the batch in flight, which the next worker redoes.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Column, inspect
from sqlalchemy.engine import Connection, Engine

from ...errors import MigrationRequired
from . import jobs
from ..cursor import PrimaryKey
from .progress import Progress
from ..schema import BATCHES_TABLE, DONE, JOBS_TABLE, SUPERSEDED
from ..transient import RetryPolicy, scrubbed

__all__ = [
    "BatchStats",
    "Event",
    "FailedValue",
    "Task",
    "WorkerResult",
    "default_worker_id",
    "run",
    "run_each",
]

log: logging.Logger = logging.getLogger("sealstore.migrations")

#: ``on_event(name, **info)``: see :func:`run`
Event: TypeAlias = Callable[..., None]
#: a value that failed to open: (its primary key, its key id or None, the error's class name)
FailedValue: TypeAlias = tuple[PrimaryKey, int | None, str]


def default_worker_id() -> str:
    """``host:pid``, recorded on the batches a worker commits."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Task(Protocol):
    """One column's rewrite, as :func:`run` drives it (``ResealTask``, ``ReindexTask``)."""

    @property
    def kind(self) -> str: ...  # the job kind: "rotate" or "reindex"

    @property
    def name(self) -> str: ...  # ``[schema.]table.column``, for messages

    @property
    def table_name(self) -> str: ...  # the job's table (with its schema)

    @property
    def column_name(self) -> str: ...

    @property
    def pk_cols(self) -> Sequence[Column[Any]]: ...

    def target_key_id(self) -> int:
        """The key id the values should end up under (the keyring's primary, now)."""
        ...

    def count_stale(self, conn: Connection) -> int:
        """The values not under the target key yet."""
        ...

    def dry_run_counts(self, conn: Connection) -> tuple[int, dict[int | None, int]]:
        """(values a run would rewrite, the same per key id where the task knows it)."""
        ...

    def process(
        self,
        conn: Connection,
        lo: PrimaryKey | None,
        hi: PrimaryKey,
        stats: BatchStats,
        *,
        emit: Event | None = None,
        profile: dict[str, float] | None = None,
    ) -> None:
        """Rewrite the stale values of ``lo < pk <= hi`` in the caller's transaction."""
        ...


@dataclass
class BatchStats:
    """What one batch did (``sealed`` counts seal/index computations, for double-work checks)."""

    resealed: int = 0
    conflicted: int = 0
    failed: int = 0
    sealed: int = 0
    failures: list[FailedValue] = field(default_factory=list)


@dataclass
class WorkerResult:
    """What one worker did on one column (its own batches only; the job row has the totals)."""

    name: str
    job_id: int | None
    target_key_id: int
    status: str
    batches: int = 0
    resealed: int = 0
    conflicted: int = 0
    failed: int = 0
    sealed: int = 0
    failures: list[FailedValue] = field(default_factory=list)
    total_estimate: int | None = None
    remaining: int | None = None  # values still not under the target key after the run
    dry_run: bool = False
    by_key: dict[int | None, int] = field(default_factory=dict)  # dry run: stale values per key id

    def add(self, stats: BatchStats) -> None:
        """Count one batch this worker committed (keeping the first 100 failures)."""
        self.batches += 1
        self.resealed += stats.resealed
        self.conflicted += stats.conflicted
        self.failed += stats.failed
        self.sealed += stats.sealed
        room = 100 - len(self.failures)
        if room > 0:
            self.failures.extend(stats.failures[:room])


def _check_stored(conn: Connection, task: Task) -> None:
    """The task's own check of its column's stored type, when it has one."""
    check = getattr(task, "check_stored", None)
    if check is not None:
        check(conn)


def _check_tables(engine: Engine, task: Task | None = None) -> None:
    with engine.connect() as conn:
        if task is not None:
            _check_stored(conn, task)
        insp = inspect(conn)
        if not (insp.has_table(JOBS_TABLE) and insp.has_table(BATCHES_TABLE)):
            raise MigrationRequired(
                f"the job tables {JOBS_TABLE}/{BATCHES_TABLE} do not exist: run "
                "`alembic upgrade sealstore@head` (or `sealstore db init`, or "
                "sealstore.migrations.create_tables)"
            )


def run(
    engine: Engine,
    task: Task,
    *,
    batch_size: int = 2000,
    worker_id: str | None = None,
    progress: Progress | None = None,
    on_event: Event | None = None,
    poll_interval: float = 0.2,
    profile: dict[str, float] | None = None,
    retry: RetryPolicy | None = None,
    sqlite_yield: float = 1.0,
) -> WorkerResult:
    """Run one worker on ``task`` until its job is done (or superseded).

    ``progress``: an object with ``start(label, total)``, ``update(done)`` and ``finish()``
    (see :mod:`sealstore.migrations.rotation.progress`).  ``on_event(name, **info)`` is called at each
    step (``joined``, ``claimed``, ``taken``, ``rewritten``, ``committed``, ``finished``):
    hooks for tests and monitoring.  ``profile``: a dict that collects seconds per phase.
    ``retry``: how long transient errors (deadlocks, lost connections...) are retried, in
    every phase (default :class:`RetryPolicy()`, 60 s).  ``sqlite_yield``: on SQLite, after
    each commit the worker sleeps this many times as long as it held the write lock, so
    waiting writers get it (0 turns that off).  Database errors of sealstore's statements
    come out as :class:`~sealstore.errors.DatabaseOperationFailed`, without parameters.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if not sqlite_yield >= 0:
        raise ValueError("sqlite_yield must be >= 0")
    w = _Run(engine, task, retry or RetryPolicy(), worker_id or default_worker_id(),
             on_event or (lambda name, **info: None), profile, poll_interval)  # fmt: skip
    w.pause = sqlite_yield if engine.dialect.name == "sqlite" else 0.0
    return scrubbed(f"{task.kind} {task.name}", w.run_all, batch_size, progress)


class _Run:
    """One worker's run of one task (see :func:`run`)."""

    def __init__(self, engine, task, retry, worker_id, emit, profile, poll_interval) -> None:
        self.engine, self.task, self.retry = engine, task, retry
        self.worker_id, self.emit, self.profile = worker_id, emit, profile
        self.poll_interval = poll_interval
        self.pause = 0.0
        self.job: Any = None
        self.result: Any = None
        self.target = task.target_key_id()

    def run_all(self, batch_size: int, progress) -> WorkerResult:
        self.retry.call(
            lambda: _check_tables(self.engine, self.task), f"{self.task.name} start-up checks"
        )
        self.start(batch_size)
        if progress is not None:
            progress.start(f"{self.task.kind} {self.task.name}", self.job.total_estimate)
        try:
            self.loop(progress)
        finally:
            if progress is not None:
                progress.finish()
        return self.finish()

    def _add(self, phase: str, seconds: float) -> None:
        if self.profile is not None:
            self.profile[phase] = self.profile.get(phase, 0.0) + seconds

    def start(self, batch_size: int) -> None:
        task, target = self.task, self.target

        def start_or_join():
            job, created = jobs.start_job(
                self.engine, task.kind, task.table_name, task.column_name, target,
                batch_size, estimate=task.count_stale,
            )  # fmt: skip
            if created and job.total_estimate == 0:  # nothing to do: claim no batch
                with self.engine.begin() as conn:
                    jobs.finish_job(conn, job, DONE, "nothing to rewrite")
                    job = jobs.get_job(conn, job.job_id)
            return job, created

        self.job, created = self.retry.call(start_or_join, f"{task.name} start job")
        job = self.job
        self.result = WorkerResult(
            task.name, job.job_id, target, job.status, total_estimate=job.total_estimate
        )
        self.emit("joined", job=job, created=created)
        log.info(
            "%s %s: job %d (%s), target key %08x, about %s values to rewrite",
            task.kind, task.name, job.job_id, "new" if created else "joined", target,
            job.total_estimate if job.total_estimate is not None else "?",
        )  # fmt: skip

    def step_pending(self):
        task, emit, clock = self.task, self.emit, time.perf_counter
        with self.engine.begin() as conn:
            t0 = clock()
            batch = jobs.take_pending(conn, self.job)
            if batch is None:
                return None
            emit("taken", batch=batch)
            stats = BatchStats()
            task.process(conn, batch.lo, batch.hi, stats, emit=emit, profile=self.profile)
            emit("rewritten", batch=batch, stats=stats)
            message = None
            if stats.failures:
                message = "failed to open: " + ", ".join(
                    f"{pk!r} ({err})" for pk, _, err in stats.failures[:10]
                )
            jobs.finish_batch(
                conn, batch, resealed=stats.resealed, conflicted=stats.conflicted,
                failed=stats.failed, worker=self.worker_id, message=message,
            )  # fmt: skip
            t1 = clock()
        self._add("commit", clock() - t1)
        self._add("batch", clock() - t0)
        if self.pause:  # SQLite: let waiting writers take the lock before the next batch
            time.sleep(min(1.0, self.pause * (clock() - t0)))
        return batch, stats

    def step_claim(self):
        with self.engine.begin() as conn:
            current, batch = jobs.claim_range(conn, self.job, self.task.pk_cols)
            if batch is None and current.status == jobs.RUNNING:
                if jobs.count_pending(conn, current):
                    return current, "wait"
                jobs.finish_job(conn, current, DONE)
                return current, "done"
            return current, batch

    def supersede(self) -> None:
        def close():
            with self.engine.begin() as conn:
                jobs.finish_job(
                    conn, self.job, SUPERSEDED,
                    f"superseded: the primary key changed from {self.target:08x}",
                )  # fmt: skip

        self.retry.call(close, f"{self.task.name} supersede")
        self.result.status = SUPERSEDED

    def loop(self, progress) -> None:
        result, name = self.result, self.task.name
        if self.job.status != jobs.RUNNING:
            return
        while True:
            if self.task.target_key_id() != self.target:
                self.supersede()
                return
            done = self.retry.call(self.step_pending, f"{name} batch")
            if done is not None:
                batch, stats = done
                result.add(stats)
                self.emit("committed", batch=batch, stats=stats)
                continue
            t0 = time.perf_counter()
            current, outcome = self.retry.call(self.step_claim, f"{name} claim")
            self._add("claim", time.perf_counter() - t0)
            if progress is not None:
                progress.update(current.done)
            if outcome == "wait":  # the last batches are held by other workers
                time.sleep(self.poll_interval)
                continue
            if outcome == "done" or outcome is None:
                result.status = DONE if outcome == "done" else current.status
                return
            self.emit("claimed", batch=outcome)

    def finish(self) -> WorkerResult:
        task, result = self.task, self.result

        def final_counts():
            with self.engine.connect() as conn:
                return jobs.get_job(conn, self.job.job_id), task.count_stale(conn)

        final, result.remaining = self.retry.call(final_counts, f"{task.name} final count")
        result.status = final.status if result.status == DONE else result.status
        self.emit("finished", job=final, result=result)
        log.info(
            "%s %s: job %d %s; this worker rewrote %d values in %d batches (%d conflicts, "
            "%d failed); %d values still not under %08x",
            task.kind, task.name, self.job.job_id, result.status, result.resealed,
            result.batches, result.conflicted, result.failed, result.remaining, self.target,
        )  # fmt: skip
        return result


def run_each(
    engine: Engine, tasks: Iterable[Task], *, dry_run: bool = False, **run_kwargs: Any
) -> list[WorkerResult]:
    """:func:`run` each task in turn (``run_kwargs`` as for it); with ``dry_run`` only count,
    through the task's ``dry_run_counts(conn) -> (total, {key id: values})``, what a run would
    rewrite.  One WorkerResult per task."""
    results = []
    for task in tasks:
        if not dry_run:
            results.append(run(engine, task, **run_kwargs))
            continue

        def counts(task=task):
            with engine.connect() as conn:
                _check_stored(conn, task)
                return task.dry_run_counts(conn)

        policy = run_kwargs.get("retry") or RetryPolicy()
        total, by_key = scrubbed(
            f"{task.kind} {task.name} dry run", policy.call, counts, f"{task.name} dry run"
        )
        results.append(
            WorkerResult(
                task.name,
                None,
                task.target_key_id(),
                "dry-run",
                total_estimate=total,
                remaining=total,
                dry_run=True,
                by_key=by_key,
            )  # fmt: skip
        )
    return results
