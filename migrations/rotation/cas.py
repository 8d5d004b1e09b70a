"""Compare-and-swap updates: write a new value only where the row still holds what was read.

``UPDATE t SET target = :new WHERE pk = :pk AND guard = :old`` for every row of a batch, in
one statement on PostgreSQL (``UPDATE ... FROM unnest(arrays) ... RETURNING pk``) and as an
``executemany`` elsewhere.  The caller gets back the rows whose guard no longer matched (a
concurrent write won): those are re-read, never overwritten.

Before it writes, :func:`swap_until_settled` locks the batch's rows in ascending primary-key
order (``SELECT pk ... ORDER BY pk FOR UPDATE``), so the rows a batch holds are always taken in
the same order: an application transaction that locks several rows in ascending primary-key
order can wait for a batch but never deadlock with it (an ``UPDATE ... FROM unnest`` alone
locks in the join's order, which met such transactions in a cycle: 40P01 on their side).
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeVar

import time
from collections.abc import Callable, Sequence

from sqlalchemy import (
    Column,
    LargeBinary,
    Table,
    any_,
    bindparam,
    column,
    func,
    select,
    tuple_,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..cursor import PrimaryKey
from .worker import BatchStats, Event

__all__ = [
    "ROUNDS",
    "Rewrite",
    "compare_and_swap",
    "keys_in",
    "lock_in_key_order",
    "swap_until_settled",
]

#: one row's compare-and-swap: (its primary key, the guard columns' values as read, the new
#: value of the target column)
Rewrite: TypeAlias = tuple[PrimaryKey, tuple[Any, ...], bytes | None]
_Read = TypeVar("_Read")  # a row as the caller reads it

#: how many times a batch re-reads and rewrites the rows a concurrent writer changed
ROUNDS = 4


def compare_and_swap(
    conn: Connection,
    table: Table,
    pk_cols: Sequence[Column[Any]],
    target: Column[Any],
    guards: Sequence[Column[Any]],
    rows: Sequence[Rewrite],
) -> list[int]:
    """Apply ``rows`` = [(pk tuple, (old guard values...), new target value)].

    Returns the positions in ``rows`` whose update did not happen because a guard column
    changed since it was read (or the row is gone).  Guards compare NULL-safely.
    """
    if not rows:
        return []
    if conn.dialect.name == "postgresql":
        return _cas_postgresql(conn, table, pk_cols, target, guards, rows)
    return _cas_generic(conn, table, pk_cols, target, guards, rows)


def _cas_postgresql(conn, table, pk_cols, target, guards, rows) -> list[int]:
    from sqlalchemy.dialects.postgresql import ARRAY

    names, arrays = [], []
    for i, col in enumerate(pk_cols):
        names.append(column(f"k{i}", col.type))
        arrays.append(bindparam(f"k{i}", [r[0][i] for r in rows], type_=ARRAY(col.type)))
    for i, col in enumerate(guards):
        names.append(column(f"g{i}", col.type))
        arrays.append(bindparam(f"g{i}", [r[1][i] for r in rows], type_=ARRAY(col.type)))
    names.append(column("v", target.type))
    arrays.append(bindparam("v", [r[2] for r in rows], type_=ARRAY(LargeBinary)))
    src = func.unnest(*arrays).table_valued(*names).render_derived(name="cas_rows")
    cond = [c == src.c[f"k{i}"] for i, c in enumerate(pk_cols)]
    cond += [c.is_not_distinct_from(src.c[f"g{i}"]) for i, c in enumerate(guards)]
    stmt = update(table).values({target: src.c.v}).where(*cond).returning(*pk_cols)
    if conn.dialect.driver == "psycopg":
        done = _execute_binary(conn, stmt)
    else:
        done = {tuple(r) for r in conn.execute(stmt)}
    if len(done) == len(rows):
        return []
    return [i for i, r in enumerate(rows) if tuple(r[0]) not in done]


def _execute_binary(conn, stmt) -> set[tuple]:
    """Run ``stmt`` on psycopg 3 with parameters in binary format, inside the caller's
    transaction.  Text format would ship every ciphertext hex-encoded, twice (old and new):
    that alone cuts the rows per second of a batch by about three."""
    compiled = stmt.compile(dialect=conn.dialect)
    sql = compiled.string
    processors = getattr(compiled, "_bind_processors", {})
    params = {}
    for name, value in compiled.params.items():
        sql = sql.replace(f"%({name})s", f"%({name})b")
        proc = processors.get(name) if name.startswith("k") else None  # keys: SQLAlchemy's
        params[name] = proc(value) if proc is not None else value  # bytes go as they are
    cursor = conn.connection.driver_connection.cursor(binary=True)
    try:
        cursor.execute(sql, params)
        return {tuple(r) for r in cursor.fetchall()}
    finally:
        cursor.close()


def _cas_generic(conn, table, pk_cols, target, guards, rows) -> list[int]:
    cond = [c == bindparam(f"k{i}", type_=c.type) for i, c in enumerate(pk_cols)]
    cond += [c.is_not_distinct_from(bindparam(f"g{i}", type_=c.type)) for i, c in enumerate(guards)]
    stmt = update(table).where(*cond).values({target: bindparam("v", type_=target.type)})
    params = []
    for pk, olds, new in rows:
        p = {f"k{i}": v for i, v in enumerate(pk)}
        p.update({f"g{i}": v for i, v in enumerate(olds)})
        p["v"] = new
        params.append(p)
    result = conn.execute(stmt, params)
    if conn.dialect.supports_sane_multi_rowcount and result.rowcount == len(rows):
        return []
    # find the rows that do not hold what we wrote: inside this transaction nobody else can
    # have changed a row we updated, so "target != new" means our guard did not match
    key = tuple_(*pk_cols) if len(pk_cols) > 1 else pk_cols[0]
    keys = [tuple(r[0]) if len(pk_cols) > 1 else r[0][0] for r in rows]
    current = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        q = select(*pk_cols, target).where(key.in_(chunk)).with_for_update()  # latest values
        for rec in conn.execute(q):
            current[tuple(rec[: len(pk_cols)])] = rec[-1]
    missed = []
    for i, (pk, _, new) in enumerate(rows):
        if tuple(pk) not in current:
            missed.append(i)  # the row is gone
            continue
        value = current[tuple(pk)]
        if (None if value is None else bytes(value)) != new:
            missed.append(i)
    return missed


def lock_in_key_order(
    conn: Connection, table: Table, pk_cols: Sequence[Column[Any]], keys: list[PrimaryKey]
) -> None:
    """Lock the rows of ``keys`` in ascending primary-key order, inside the caller's
    transaction (``SELECT pk ... ORDER BY pk FOR UPDATE``; PostgreSQL locks the rows after the
    sort, InnoDB as it walks the primary key).  SQLite has no row locks: nothing to do."""
    if not keys or conn.dialect.name == "sqlite":
        return
    ordered = sorted(set(keys))
    # chunks keep the order only where Python sorts keys as the database does (numbers);
    # text keys (collations) go in one statement
    step = _LOCK_CHUNK if _numeric(ordered) else len(ordered)
    for start in range(0, len(ordered), step):
        chunk = ordered[start : start + step]
        if len(pk_cols) == 1 and conn.dialect.name == "postgresql":  # one array parameter
            from sqlalchemy.dialects.postgresql import ARRAY

            col = pk_cols[0]
            cond = col == any_(bindparam("keys", [k[0] for k in chunk], type_=ARRAY(col.type)))
        else:
            cond = keys_in(pk_cols, chunk)
        q = select(*pk_cols).where(cond).order_by(*pk_cols).with_for_update()
        conn.execute(q).all()


def _numeric(keys: Sequence[PrimaryKey]) -> bool:
    return all(isinstance(v, (int, float)) for k in keys for v in k)


def _in_key_order(conn, table, pk_cols, rows: list[Rewrite]) -> list[Rewrite]:
    """``rows`` ready to be swapped with their row locks taken in ascending primary-key order:
    PostgreSQL's one-statement UPDATE locks in its join's order, so the rows are locked first
    (:func:`lock_in_key_order`); elsewhere the ``executemany`` locks one row per statement, in
    the order of ``rows``, which is sorted when Python sorts the keys as the database does."""
    keys = [tuple(r[0]) for r in rows]
    if conn.dialect.name == "sqlite":
        return rows
    if conn.dialect.name != "postgresql" and _numeric(keys):
        return sorted(rows, key=lambda r: tuple(r[0]))
    lock_in_key_order(conn, table, pk_cols, keys)
    return rows


#: primary keys per locking statement
_LOCK_CHUNK = 1000


def keys_in(pk_cols: Sequence[Column[Any]], keys: list[PrimaryKey]) -> ColumnElement[bool]:
    """``pk IN keys`` for a one-column or a composite primary key."""
    if len(pk_cols) == 1:
        return pk_cols[0].in_([k[0] for k in keys])
    return tuple_(*pk_cols).in_(keys)


def swap_until_settled(
    conn: Connection,
    table: Table,
    pk_cols: Sequence[Column[Any]],
    target: Column[Any],
    guards: Sequence[Column[Any]],
    todo: list[_Read],
    stats: BatchStats,
    *,
    rewrite: Callable[[list[_Read], BatchStats], list[Rewrite]],
    reread: Callable[[list[PrimaryKey]], list[_Read]],
    emit: Event | None = None,
    timings: dict[str, float] | None = None,
) -> None:
    """The loop rotation and re-indexing share: ``rewrite(todo, stats)`` the rows read stale
    into ``(pk, guards, new value)``, compare-and-swap them, and ``reread(keys)`` the rows a
    concurrent writer changed meanwhile, to rewrite them again, up to ``ROUNDS`` times.
    ``stats.resealed`` and ``stats.conflicted`` count what was written and what was missed;
    ``timings`` (when given) adds the seconds spent in ``rewrite`` ("crypto") and in the
    writes ("write")."""
    clock = time.perf_counter
    for _ in range(ROUNDS):
        if not todo:
            return
        t0 = clock()
        rows = rewrite(todo, stats)
        t1 = clock()
        if emit is not None:
            emit("sealed", count=len(rows))
        rows = _in_key_order(conn, table, pk_cols, rows)
        missed = compare_and_swap(conn, table, pk_cols, target, guards, rows)
        if timings is not None:
            timings["crypto"] = timings.get("crypto", 0.0) + t1 - t0
            timings["write"] = timings.get("write", 0.0) + clock() - t1
        stats.resealed += len(rows) - len(missed)
        stats.conflicted += len(missed)
        if not missed:
            return
        todo = reread([rows[i][0] for i in missed])
