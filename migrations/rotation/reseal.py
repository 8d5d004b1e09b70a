"""Online re-encryption: move every value of an encrypted column under the primary key.

:func:`rotate` runs one worker per call (start it on several processes or machines for a
parallel run on PostgreSQL; they share the job).  Per batch, in one transaction: read the
range's values whose key id (bytes 2..5 of the value, compared in SQL) is not the primary's,
open and re-seal them with the same context, and write each one back with a compare-and-swap
on the old ciphertext.  Rows a concurrent writer changed meanwhile are re-read, never
overwritten.  Values that fail to open are left as they are and reported by primary key.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Column, Table, and_, func, literal_column, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from ...errors import SealstoreError
from ...format import KEY_ID_OFFSET, KEY_ID_SIZE
from . import worker
from .cas import keys_in, swap_until_settled
from ..cursor import PrimaryKey, in_range
from ..transient import RetryPolicy
from .spec import ColumnSpec, specs_from_metadata
from .stored import check_spec
from .progress import Progress
from .worker import BatchStats, Event, WorkerResult

__all__ = ["ResealTask", "as_column_specs", "key_id_sql", "rotate"]

_KID = struct.Struct(">I")


def key_id_sql(col: ColumnElement[Any], offset: int = KEY_ID_OFFSET) -> ColumnElement[Any]:
    """SQL for the 4 key-id bytes of a stored value: ``substr(col, offset + 1, 4)``."""
    return func.substr(col, literal_column(str(offset + 1)), literal_column(str(KEY_ID_SIZE)))


def key_id_bytes(key_id: int) -> bytes:
    return _KID.pack(key_id)


def _stored_key_id(value: bytes, offset: int = KEY_ID_OFFSET) -> int | None:
    chunk = value[offset : offset + KEY_ID_SIZE]
    return _KID.unpack(chunk)[0] if len(chunk) == KEY_ID_SIZE else None


def as_column_specs(columns: Any) -> list[ColumnSpec]:
    """``columns`` as a list of ColumnSpec: a spec, a list of specs, or models/metadata."""
    if isinstance(columns, ColumnSpec):
        return [columns]
    if isinstance(columns, Iterable) and not isinstance(columns, (str, bytes)):
        items = list(columns)
        if all(isinstance(c, ColumnSpec) for c in items):
            return items
        columns = items
    return specs_from_metadata(columns)[0]


class ResealTask:
    """Rotation of one encrypted column (see the module docstring)."""

    kind: str = "rotate"

    def __init__(self, spec: ColumnSpec) -> None:
        self.spec: ColumnSpec = spec
        self.table: Table = spec.sql_table()
        self.col: Column[Any] = self.table.c[spec.column]
        self.pk_cols: list[Column[Any]] = [self.table.c[n] for n in spec.pk]
        self.name: str = spec.name
        self.table_name: str = f"{spec.schema}.{spec.table}" if spec.schema else spec.table
        self.column_name: str = spec.column

    def target_key_id(self) -> int:
        return self.spec.get_keyring().primary.key_id

    def check_stored(self, conn: Connection) -> None:
        """ColumnNotConverted / ColumnTypeMismatch when the column is not stored as sealed
        bytes (see :mod:`~sealstore.migrations.rotation.stored`)."""
        check_spec(conn, self.spec)

    def _stale(self, key_id: int):
        stale = and_(self.col.is_not(None), key_id_sql(self.col) != key_id_bytes(key_id))
        rows = self.spec.rows_where(self.table)
        return stale if rows is None else and_(rows, stale)

    def count_stale(self, conn: Connection) -> int:
        """Non-NULL values whose key id is not the primary's (computed in SQL)."""
        q = select(func.count()).select_from(self.table).where(self._stale(self.target_key_id()))
        return conn.execute(q).scalar_one()

    def dry_run_counts(self, conn: Connection) -> tuple[int, dict[int | None, int]]:
        """(values a run would rewrite, the same per key id)."""
        by_key = self.stale_by_key(conn)
        return sum(by_key.values()), by_key

    def stale_by_key(self, conn: Connection) -> dict[int | None, int]:
        """{key id: values} for values not under the primary (what a run would rewrite)."""
        kid = key_id_sql(self.col)
        q = (
            select(kid, func.count())
            .select_from(self.table)
            .where(self._stale(self.target_key_id()))
            .group_by(kid)
        )
        out: dict[int | None, int] = {}
        for raw, n in conn.execute(q):
            k = _stored_key_id(bytes(raw), 0) if raw is not None else None
            out[k] = out.get(k, 0) + n
        return out

    # ---- one batch --------------------------------------------------------------------------

    def _reseal(self, todo: list[tuple], stats: BatchStats) -> list[tuple]:
        """[(pk, old)] -> [(pk, (old,), new)]; values that do not open become failures."""
        spec = self.spec
        keyring = spec.get_keyring()
        if not spec.row_bound:
            ctx = spec.context_of(None)
            olds = [v for _, v in todo]
            try:
                opened = keyring.open_many(olds, ctx, allow_retired=True)
            except SealstoreError:
                opened = None
            if opened is not None:
                stats.sealed += len(opened)
                news = [spec.check_sealed(n) for n in keyring.seal_many(opened, ctx)]
                return [(pk, (old,), new) for (pk, old), new in zip(todo, news)]
        out = []
        for pk, old in todo:
            ctx = spec.context_of(pk)
            try:
                plaintext = spec.open_value(keyring, old, pk)
            except SealstoreError as exc:
                stats.failed += 1
                stats.failures.append((pk, _stored_key_id(old), type(exc).__name__))
                continue
            stats.sealed += 1
            out.append((pk, (old,), spec.check_sealed(keyring.seal(plaintext, ctx))))
        return out

    def _read(self, conn: Connection, where, *, lock: bool = False) -> list[tuple]:
        n = len(self.pk_cols)
        q = select(*self.pk_cols, self.col).where(where)
        if lock:  # read the latest committed values (MySQL's REPEATABLE READ would not)
            q = q.with_for_update()
        rows = conn.execute(q).all()
        if n == 1:
            return [((r[0],), r[1] if type(r[1]) is bytes else bytes(r[1])) for r in rows]
        return [(tuple(r[:n]), r[n] if type(r[n]) is bytes else bytes(r[n])) for r in rows]

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
        """Re-seal the stale values of ``lo < pk <= hi`` (inside the caller's transaction)."""
        clock = time.perf_counter
        target = self.target_key_id()
        kb = key_id_bytes(target)
        t0 = clock()
        rng = in_range(self.pk_cols, lo, hi)
        stale = self._stale(target)
        todo = self._read(conn, stale if rng is None else and_(rng, stale))
        t1 = clock()

        def reread(keys):  # what a writer changed meanwhile, unless it is current already
            rows = self._read(
                conn, and_(keys_in(self.pk_cols, keys), self.col.is_not(None)), lock=True
            )
            return [
                (pk, v) for pk, v in rows if v[KEY_ID_OFFSET : KEY_ID_OFFSET + KEY_ID_SIZE] != kb
            ]

        timings: dict = {}
        swap_until_settled(
            conn, self.table, self.pk_cols, self.col, [self.col], todo, stats,
            rewrite=self._reseal, reread=reread, emit=emit, timings=timings,
        )  # fmt: skip
        if profile is not None:
            profile["read"] = profile.get("read", 0.0) + t1 - t0
            profile["crypto"] = profile.get("crypto", 0.0) + timings.get("crypto", 0.0)
            profile["write"] = profile.get("write", 0.0) + timings.get("write", 0.0)


def rotate(
    engine: Engine,
    columns: Iterable[Any],
    *,
    batch_size: int = 2000,
    dry_run: bool = False,
    worker_id: str | None = None,
    progress: Progress | None = None,
    on_event: Event | None = None,
    retry: RetryPolicy | None = None,
    sqlite_yield: float = 1.0,
    profile: dict[str, float] | None = None,
) -> list[WorkerResult]:
    """Re-seal every value of ``columns`` that is not under its keyring's primary key.

    ``columns``: a :class:`ColumnSpec`, a list of them, or models (MetaData, declarative base,
    mapped class, Table) whose encrypted columns are all rotated, one job each, in turn.
    Needs the sealstore tables (``alembic upgrade sealstore@head`` or
    :func:`~sealstore.migrations.schema.create_tables`).  Run the same call in several
    processes to share the work on PostgreSQL.  ``dry_run`` only counts, per key id, the
    values a run would rewrite.  ``retry`` (a :class:`~sealstore.migrations.transient.RetryPolicy`)
    bounds the retries of transient database errors, 60 s by default; ``sqlite_yield``: see
    :func:`~sealstore.migrations.rotation.worker.run`.  Returns one :class:`WorkerResult` per column.
    """
    return worker.run_each(
        engine, [ResealTask(spec) for spec in as_column_specs(columns)], dry_run=dry_run,
        batch_size=batch_size, worker_id=worker_id, progress=progress, on_event=on_event,
        retry=retry, sqlite_yield=sqlite_yield,
        profile=profile,
    )  # fmt: skip
