"""Re-indexing: recompute blind-index columns with the index keyring's primary key.

The same job machinery as rotation (kind ``reindex``): batches by primary key, one transaction
per batch, checkpoint and counts in the job table, several workers on PostgreSQL.  A row is
stale when its index value does not start with the primary index key id (or is missing while
the source is set).  Each source value is opened with its own context, the index recomputed
(``BlindIndex.compute``), and written with a compare-and-swap on both the source ciphertext
and the old index value, so a concurrent write of either is never overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import time

from sqlalchemy import Column, Table, and_, func, or_, select
from sqlalchemy.engine import Connection, Engine

from ...errors import SealstoreError
from . import worker
from .cas import keys_in, swap_until_settled
from ..cursor import PrimaryKey, in_range
from ..transient import RetryPolicy
from .reseal import key_id_bytes, key_id_sql
from .spec import ColumnSpec, IndexSpec, specs_from_metadata
from .stored import check_spec
from .progress import Progress
from .worker import BatchStats, Event, WorkerResult

__all__ = ["ReindexTask", "reindex"]


class ReindexTask:
    """Re-indexing of one blind-index column (see the module docstring)."""

    kind: str = "reindex"

    def __init__(self, spec: IndexSpec) -> None:
        if spec.source.type is None:
            raise TypeError("re-indexing needs the source column's sealstore type (use models)")
        self.spec: IndexSpec = spec
        self.source: ColumnSpec = spec.source
        self.table: Table = spec.source.sql_table(spec.column)
        self.src: Column[Any] = self.table.c[spec.source.column]
        self.idx: Column[Any] = self.table.c[spec.column]
        self.pk_cols: list[Column[Any]] = [self.table.c[n] for n in spec.source.pk]
        self.name: str = spec.name
        s = spec.source
        self.table_name: str = f"{s.schema}.{s.table}" if s.schema else s.table
        self.column_name: str = spec.column

    def target_key_id(self) -> int:
        return self.spec.get_keyring().primary.key_id

    def check_stored(self, conn: Connection) -> None:
        """ColumnNotConverted / ColumnTypeMismatch when the source or the index column is not
        stored as bytes (see :mod:`~sealstore.migrations.rotation.stored`)."""
        check_spec(conn, self.spec)

    def _stale(self, key_id: int):
        rows = self.source.rows_where(self.table)
        stale = self._stale_values(key_id)
        return stale if rows is None else and_(rows, stale)

    def _stale_values(self, key_id: int):
        src, idx = self.src, self.idx
        return or_(
            and_(
                src.is_not(None),
                or_(idx.is_(None), key_id_sql(idx, 0) != key_id_bytes(key_id)),
            ),
            and_(src.is_(None), idx.is_not(None)),
        )

    def dry_run_counts(self, conn: Connection) -> tuple[int, dict[int | None, int]]:
        """(indexes a run would recompute, {}: index key ids are not broken down)."""
        return self.count_stale(conn), {}

    def count_stale(self, conn: Connection) -> int:
        q = select(func.count()).select_from(self.table).where(self._stale(self.target_key_id()))
        return conn.execute(q).scalar_one()

    def _read(self, conn, where, *, lock: bool = False) -> list[tuple]:
        n = len(self.pk_cols)
        q = select(*self.pk_cols, self.src, self.idx).where(where)
        if lock:  # latest committed values, also under MySQL's REPEATABLE READ
            q = q.with_for_update()
        rows = conn.execute(q).all()
        return [
            (
                tuple(r[:n]),
                None if r[n] is None else bytes(r[n]),
                None if r[n + 1] is None else bytes(r[n + 1]),
            )
            for r in rows
        ]

    def _compute(self, todo, stats: BatchStats) -> list[tuple]:
        source = self.source
        keyring = source.get_keyring()
        decode = source.type.codec.decoded  # UndecodableValue: counted as a failure below
        index_type = self.spec.type
        out = []
        for pk, src, idx in todo:
            if src is None:
                out.append((pk, (src, idx), None))
                continue
            try:
                value = decode(source.open_value(keyring, src, pk))
            except SealstoreError as exc:
                stats.failed += 1
                key_id = int.from_bytes(src[2:6], "big") if len(src) >= 6 else None
                stats.failures.append((pk, key_id, type(exc).__name__))
                continue
            stats.sealed += 1
            if source.tenant is not None:  # the spec's tenant, not whatever is active
                new = index_type.compute_for_tenant(value, source.tenant, source.schema)
            else:
                new = index_type.compute(value)
            out.append((pk, (src, idx), new))
        return out

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
        """Recompute the stale indexes of ``lo < pk <= hi`` (inside the caller's transaction)."""
        clock = time.perf_counter
        t0 = clock()
        target = self.target_key_id()
        rng = in_range(self.pk_cols, lo, hi)
        stale = self._stale(target)
        todo = self._read(conn, stale if rng is None else and_(rng, stale))
        if profile is not None:
            profile["read"] = profile.get("read", 0.0) + clock() - t0
        swap_until_settled(
            conn, self.table, self.pk_cols, self.idx, [self.src, self.idx], todo, stats,
            rewrite=self._compute, emit=emit,
            reread=lambda keys: self._read(conn, and_(keys_in(self.pk_cols, keys), stale), lock=True),
        )  # fmt: skip


def as_index_specs(indexes: Any) -> list[IndexSpec]:
    """``indexes`` as a list of IndexSpec: a spec, a list of specs, or models/metadata."""
    if isinstance(indexes, IndexSpec):
        return [indexes]
    if isinstance(indexes, (list, tuple)) and all(isinstance(i, IndexSpec) for i in indexes):
        return list(indexes)
    return specs_from_metadata(indexes)[1]


def reindex(
    engine: Engine,
    indexes: Iterable[Any],
    *,
    batch_size: int = 2000,
    dry_run: bool = False,
    worker_id: str | None = None,
    progress: Progress | None = None,
    on_event: Event | None = None,
    retry: RetryPolicy | None = None,
    sqlite_yield: float = 1.0,
) -> list[WorkerResult]:
    """Recompute every blind index of ``indexes`` (IndexSpecs or models) that is not under the
    index keyring's primary key.  Same contract as :func:`~sealstore.migrations.rotation.reseal.rotate`."""
    from ...adapters.sqlalchemy.index_state import forget

    results = worker.run_each(
        engine, [ReindexTask(spec) for spec in as_index_specs(indexes)], dry_run=dry_run,
        batch_size=batch_size, worker_id=worker_id, progress=progress, on_event=on_event,
        retry=retry, sqlite_yield=sqlite_yield,
    )  # fmt: skip
    forget()  # this process's lookups (every engine) ask again whether the indexes are complete
    return results
