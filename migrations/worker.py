"""The worker loop shared by rotation and re-indexing: claim, rewrite, checkpoint, repeat.

A *task* (``rotation.ResealTask``, ``reindexing.ReindexTask``) knows one column: the key id values
should end up under, the SQL filter for values that are not there yet, and how to rewrite the
stale values of one primary-key range inside a transaction.  :func:`run` drives a task through
the job tables (see :mod:`sealstore.migrations.jobs`): each batch is one transaction that
rewrites the range, marks the batch done and adds the counts to the job, so killing a worker
at any point loses at most the batch in flight, which the next worker redoes.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from ..errors import MigrationRequired
from . import jobs
from .schema import BATCHES_TABLE, DONE, JOBS_TABLE, SUPERSEDED

__all__ = ["WorkerResult", "default_worker_id", "run"]

log = logging.getLogger("sealstore.migrations")

Event = Callable[..., None]
_RETRIES = 8


def default_worker_id() -> str:
    """``host:pid``, recorded on the batches a worker commits."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class BatchStats:
    """What one batch did (``sealed`` counts seal/index computations, for double-work checks)."""

    resealed: int = 0
    conflicted: int = 0
    failed: int = 0
    sealed: int = 0
    failures: list = field(
        default_factory=list
    )  # [(primary key, key id or None, error name)]


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
    failures: list = field(default_factory=list)
    total_estimate: int | None = None
    remaining: int | None = None  # values still not under the target key after the run
    dry_run: bool = False
    by_key: dict = field(default_factory=dict)  # dry run: stale values per key id

    def add(self, stats: BatchStats) -> None:
        self.batches += 1
        self.resealed += stats.resealed
        self.conflicted += stats.conflicted
        self.failed += stats.failed
        self.sealed += stats.sealed
        room = 100 - len(self.failures)
        if room > 0:
            self.failures.extend(stats.failures[:room])


def _retrying(fn, what: str):
    """Run ``fn`` (one transaction) again after a lock timeout, deadlock or lost connection."""
    for attempt in range(_RETRIES):
        try:
            return fn()
        except (OperationalError, DBAPIError) as exc:
            transient = isinstance(exc, OperationalError) or exc.connection_invalidated
            if not transient or attempt == _RETRIES - 1:
                raise
            delay = min(2.0, 0.05 * 2**attempt)
            log.warning(
                "%s: %s; retrying in %.2fs", what, type(exc.orig).__name__, delay
            )
            time.sleep(delay)


def run(
    engine: Engine,
    task,
    *,
    batch_size: int = 2000,
    worker_id: str | None = None,
    progress=None,
    on_event: Event | None = None,
    poll_interval: float = 0.2,
    profile: dict | None = None,
) -> WorkerResult:
    """Run one worker on ``task`` until its job is done (or superseded).

    ``progress``: an object with ``start(label, total)``, ``update(done)`` and ``finish()``
    (see :mod:`sealstore.migrations.progress`).  ``on_event(name, **info)`` is called at each
    step (``joined``, ``claimed``, ``taken``, ``rewritten``, ``committed``, ``finished``):
    hooks for tests and monitoring.  ``profile``: a dict that collects seconds per phase.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    with engine.connect() as conn:
        insp = inspect(conn)
        if not (insp.has_table(JOBS_TABLE) and insp.has_table(BATCHES_TABLE)):
            raise MigrationRequired(
                f"the job tables {JOBS_TABLE}/{BATCHES_TABLE} do not exist: run "
                "`alembic upgrade sealstore@head` (or sealstore.migrations.create_tables)"
            )
    worker_id = worker_id or default_worker_id()
    emit = on_event or (lambda name, **info: None)
    target = task.target_key_id()
    job, created = jobs.start_job(
        engine, task.kind, task.table_name, task.column_name, target, batch_size,
        estimate=task.count_stale,
    )  # fmt: skip
    result = WorkerResult(
        task.name, job.job_id, target, job.status, total_estimate=job.total_estimate
    )
    emit("joined", job=job, created=created)
    log.info(
        "%s %s: job %d (%s), target key %08x, about %s values to rewrite",
        task.kind, task.name, job.job_id, "new" if created else "joined", target,
        job.total_estimate if job.total_estimate is not None else "?",
    )  # fmt: skip
    if progress is not None:
        progress.start(f"{task.kind} {task.name}", job.total_estimate)
    clock = time.perf_counter

    def step_pending():
        with engine.begin() as conn:
            t0 = clock()
            batch = jobs.take_pending(conn, job)
            if batch is None:
                return None
            emit("taken", batch=batch)
            stats = BatchStats()
            task.process(conn, batch.lo, batch.hi, stats, emit=emit, profile=profile)
            emit("rewritten", batch=batch, stats=stats)
            message = None
            if stats.failures:
                message = "failed to open: " + ", ".join(
                    f"{pk!r} ({err})" for pk, _, err in stats.failures[:10]
                )
            jobs.finish_batch(
                conn, batch, resealed=stats.resealed, conflicted=stats.conflicted,
                failed=stats.failed, worker=worker_id, message=message,
            )  # fmt: skip
            t1 = clock()
        if profile is not None:
            profile["commit"] = profile.get("commit", 0.0) + clock() - t1
            profile["batch"] = profile.get("batch", 0.0) + clock() - t0
        return batch, stats

    def step_claim():
        with engine.begin() as conn:
            current, batch = jobs.claim_range(conn, job, task.pk_cols)
            if batch is None and current.status == jobs.RUNNING:
                if jobs.count_pending(conn, current):
                    return current, "wait"
                jobs.finish_job(conn, current, DONE)
                return current, "done"
            return current, batch

    try:
        while True:
            if task.target_key_id() != target:
                with engine.begin() as conn:
                    jobs.finish_job(
                        conn, job, SUPERSEDED,
                        f"superseded: the primary key changed from {target:08x}",
                    )  # fmt: skip
                result.status = SUPERSEDED
                break
            done = _retrying(step_pending, f"{task.name} batch")
            if done is not None:
                batch, stats = done
                result.add(stats)
                emit("committed", batch=batch, stats=stats)
                continue
            t0 = clock()
            current, outcome = _retrying(step_claim, f"{task.name} claim")
            if profile is not None:
                profile["claim"] = profile.get("claim", 0.0) + clock() - t0
            if progress is not None:
                progress.update(current.done)
            if outcome == "wait":  # the last batches are held by other workers
                time.sleep(poll_interval)
                continue
            if outcome == "done" or outcome is None:
                result.status = DONE if outcome == "done" else current.status
                break
            emit("claimed", batch=outcome)
    finally:
        if progress is not None:
            progress.finish()
    with engine.connect() as conn:
        final = jobs.get_job(conn, job.job_id)
        result.remaining = task.count_stale(conn)
    result.status = final.status if result.status == DONE else result.status
    emit("finished", job=final, result=result)
    log.info(
        "%s %s: job %d %s; this worker rewrote %d values in %d batches (%d conflicts, %d failed); "
        "%d values still not under %08x",
        task.kind, task.name, job.job_id, result.status, result.resealed, result.batches,
        result.conflicted, result.failed, result.remaining, target,
    )  # fmt: skip
    return result


def run_each(engine: Engine, tasks, *, dry_run: bool = False, **run_kwargs) -> list[WorkerResult]:
    """:func:`run` each task in turn (``run_kwargs`` as for it); with ``dry_run`` only count,
    through the task's ``dry_run_counts(conn) -> (total, {key id: values})``, what a run would
    rewrite.  One WorkerResult per task."""
    results = []
    for task in tasks:
        if not dry_run:
            results.append(run(engine, task, **run_kwargs))
            continue
        with engine.connect() as conn:
            total, by_key = task.dry_run_counts(conn)
        results.append(
            WorkerResult(
                task.name, None, task.target_key_id(), "dry-run", total_estimate=total,
                remaining=total, dry_run=True, by_key=by_key,
            )  # fmt: skip
        )
    return results
