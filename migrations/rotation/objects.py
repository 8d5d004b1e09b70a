"""Object rotation coordinated by the database: ``sealstore rotate --objects URL...`` on any
number of hosts shares the objects of each prefix through the job tables columns use.

One job per prefix (``kind`` ``objects``, ``table_name`` ``scheme://bucket``, ``column_name``
the prefix, the primary key as target): workers started anywhere join the running job.  The
work is cut into batches of consecutive object keys in listing order:

* claiming a batch locks the job row (``SELECT ... FOR UPDATE``) for one listing request of
  ``batch_size`` keys after the job's checkpoint (the last key claimed), stores the range
  ``lo < key <= hi`` as a ``pending`` batch and advances the checkpoint, in one transaction:
  ranges never overlap, so no object is handed to two workers.  The worker that claimed a
  batch runs it from the keys that listing returned (one listing request per batch); a batch
  taken over from another worker is listed again;
* a worker takes a pending batch with ``SELECT ... FOR UPDATE SKIP LOCKED`` and holds that lock
  while it rotates the batch's objects (``sealstore.adapters.objects.rotation.rotate_object``:
  every write conditional on the version read); the same transaction marks the batch ``done``
  with its counts.  A worker that dies, even by SIGKILL, loses its lock with its connection and
  the batch is pending again: the next worker redoes it, and finds the objects the dead worker
  had finished already under the primary (``current``: nothing written twice);
* the job is done when no range is left to claim and no batch is pending.

SQLite has no row locks: one worker at a time there (each batch's transaction holds the
database's write lock).  Without a database the JSON checkpoint of
:func:`sealstore.adapters.objects.rotation.rotate_objects` is the fallback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.engine import Connection, Engine

from ...adapters.objects.engine import ObjectSealing
from ...adapters.objects.rotation import RotationReport, record_outcome, rotate_object
from ...adapters.objects.store import ObjectStore
from ...adapters.objects.stores import parse_object_url
from ..cursor import dump_key, load_key
from ..schema import PENDING, RUNNING
from ..schema import sealstore_job_batches as batches_t
from ..schema import sealstore_jobs as jobs_t
from .jobs import (
    Batch,
    Job,
    begin_write,
    count_pending,
    finish_batch,
    finish_job,
    get_job,
    start_job,
    take_pending,
)
from .worker import _check_tables, default_worker_id

__all__ = ["KIND", "ObjectJobResult", "rotate_prefix"]

log: logging.Logger = logging.getLogger(__name__)

KIND = "objects"
#: longest prefix a job can name (``sealstore_jobs.column_name``)
MAX_PREFIX = 255


@dataclass
class ObjectJobResult:
    """What one worker did for one prefix."""

    url: str
    job_id: int
    worker: str
    batches: int = 0
    scanned: int = 0
    resealed: int = 0  #: re-sealed, sealed from plaintext or metadata put back
    current: int = 0
    not_sealed: int = 0
    conflicts: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = False  #: the job finished (no batch left anywhere)

    @property
    def ok(self) -> bool:
        return not self.failures


def rotate_prefix(
    engine: Engine,
    sealing: ObjectSealing,
    store: ObjectStore,
    url: str,
    *,
    batch_size: int = 100,
    worker: str | None = None,
    seal_plaintext: bool = False,
    errors: tuple[type[BaseException], ...] | None = None,
    progress: Callable[[RotationReport, str, str], None] | None = None,
    pause: float = 0.0,
    poll: float = 0.5,
) -> ObjectJobResult:
    """Rotate the objects under ``url`` (``scheme://bucket/prefix`` of ``store``) with the other
    workers of its job until the job is done; returns this worker's share.  ``progress(report,
    key, outcome)`` per object; ``pause``: seconds between objects; ``poll``: seconds between
    looks while other workers hold the last batches."""
    _check_tables(engine)
    parsed = parse_object_url(url)
    if parsed.scheme != store.scheme:
        raise ValueError(f"{url} is not a {store.scheme}:// prefix")
    if len(parsed.prefix) > MAX_PREFIX:
        raise ValueError(f"a prefix rotated by the database is at most {MAX_PREFIX} characters")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    worker = worker or default_worker_id()
    if errors is None:
        errors = tuple(getattr(store, "client_errors", ()))
    where = f"{parsed.scheme}://{parsed.bucket}"
    job, _ = start_job(
        engine, KIND, where, parsed.prefix, sealing.keyring.primary.key_id, batch_size
    )
    result = ObjectJobResult(str(parsed), job.job_id, worker)
    log.info("rotate %s: job %d, worker %s", parsed, job.job_id, worker)
    listed: dict[int, list[str]] = {}  # the keys this worker's last claim listed, by batch
    while True:
        with engine.begin() as conn:
            batch = take_pending(conn, job)
            if batch is not None:
                _run_batch(conn, batch, listed.pop(batch.batch_no, None), sealing, store,
                           parsed, result, worker, seal_plaintext, errors, progress, pause)  # fmt: skip
                continue
        with engine.begin() as conn:
            job, claimed, keys = _claim(conn, job, store, parsed.bucket, parsed.prefix)
        if claimed is not None:
            listed = {claimed.batch_no: keys}  # taken next, unless another worker got it first
        if claimed is not None or job.status != RUNNING:
            if job.status != RUNNING:
                break
            continue
        with engine.begin() as conn:
            if count_pending(conn, job) == 0:
                finish_job(conn, job)
                result.complete = True
                break
        time.sleep(poll)  # others hold the last batches: take them over if their worker dies
    log.info(
        "rotate %s: worker %s done, %d batches, %d objects, %d re-sealed, %d failed",
        parsed, worker, result.batches, result.scanned, result.resealed, len(result.failures),
    )  # fmt: skip
    return result


def _claim(
    conn: Connection, job: Job, store: ObjectStore, bucket: str, prefix: str
) -> tuple[Job, Batch | None, list[str]]:
    """Lock the job row, list the next ``batch_size`` keys after its checkpoint and store them
    as a pending batch (None: no key left, or the job is no longer running); the keys listed
    come back with it, so the worker that claimed the batch runs it without a second listing."""
    begin_write(conn, job)
    current = get_job(conn, job.job_id, lock=True)
    if current.status != RUNNING:
        return current, None, []
    lo = load_key(current.checkpoint)
    listing = store.list(bucket, prefix, start_after=None if lo is None else str(lo[0]))
    keys = [o.key for o in islice(listing, current.batch_size)]
    if not keys:
        return current, None, []
    hi = (keys[-1],)
    conn.execute(
        insert(batches_t).values(
            job_id=current.job_id, batch_no=current.batches, lo=current.checkpoint,
            hi=dump_key(hi), state=PENDING, rows_resealed=0, rows_conflicted=0, rows_failed=0,
        )
    )  # fmt: skip
    conn.execute(
        update(jobs_t)
        .where(jobs_t.c.job_id == current.job_id)
        .values(checkpoint=dump_key(hi), batches=jobs_t.c.batches + 1)
    )
    return current, Batch(current.job_id, current.batches, lo, hi), keys


def _batch_keys(store, parsed, batch) -> Iterator[str]:
    """The keys ``lo < key <= hi`` of ``batch``, listed again (a batch another worker claimed,
    or one left pending by a worker that died)."""
    lo = None if batch.lo is None else str(batch.lo[0])
    hi = str(batch.hi[0])
    for item in store.list(parsed.bucket, parsed.prefix, start_after=lo):
        if item.key > hi:
            return
        yield item.key


def _run_batch(conn, batch, keys, sealing, store, parsed, result, worker, seal_plaintext,
               errors, progress, pause) -> None:  # fmt: skip
    """Rotate the objects ``lo < key <= hi`` of ``batch`` and mark it done (the caller's
    transaction holds the batch's lock throughout).  ``keys``: what this worker's claim of the
    batch listed a moment ago (no listing request), else None: listed again."""
    report = RotationReport(parsed.bucket, parsed.prefix, sealing.keyring.primary.id_hex)
    for key in _batch_keys(store, parsed, batch) if keys is None else keys:
        outcome = record_outcome(
            report, key, errors,
            lambda: rotate_object(sealing, store, parsed.bucket, key,
                                  seal_plaintext=seal_plaintext),
        )  # fmt: skip
        report.scanned += 1
        if progress is not None:
            progress(report, key, outcome)
        if pause:
            time.sleep(pause)
    changed = report.resealed + report.repaired + report.sealed_plaintext
    message = None
    if report.failures:
        message = "failed: " + "; ".join(f"{f['key']}: {f['error']}" for f in report.failures)
    finish_batch(
        conn, batch, resealed=changed, conflicted=len(report.conflicts),
        failed=len(report.failures), worker=worker, message=message[:2000] if message else None,
    )  # fmt: skip
    result.batches += 1
    result.scanned += report.scanned
    result.resealed += changed
    result.current += report.current
    result.not_sealed += report.not_sealed
    result.conflicts += report.conflicts
    result.failures += report.failures
