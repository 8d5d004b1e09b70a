"""Blind indexes the stored rows have not caught up with: lookups that would miss rows, and
UNIQUE indexes during an index-key rotation.

**Completeness.**  A BlindIndex added to a table that already has rows is NULL in all of them
until it is filled (``op.add_blind_index`` in a revision, or ``sealstore reindex``); a lookup
through it would silently miss them.  So the first lookup through an index, per connection pool
(engine), asks the database whether some row has its source set and its index NULL
(``SELECT 1 FROM t WHERE index IS NULL AND source IS NOT NULL LIMIT 1``: the index on the
column answers it), on the lookup's own connection and transaction.  The answer is kept: an
index found complete is checked again after :data:`COMPLETE_TTL` seconds, one found incomplete
after :data:`INCOMPLETE_TTL`; meanwhile each lookup through an incomplete index raises
:class:`~sealstore.errors.IndexIncomplete`, naming the fix.  Between checks a lookup costs a
dictionary look-up.  The execution option ``sealstore_partial_index=True`` (on the statement,
the connection, the engine or ``Session.execute``) accepts partial results: no check, no error.
:func:`forget` drops what is known (a re-index run calls it for its whole process when it
finishes; other processes see the filled index at their next check).

**Uniqueness.**  A UNIQUE constraint on an index column compares stored bytes; during an
index-key rotation a row still under the older key and a new row under the primary key hold
different bytes for the same value, and the constraint lets the duplicate in.  So while the
index keyring has active keys besides the primary, every write of a UNIQUE index value first
looks for the value under each older active key (one indexed ``SELECT`` per value, on the
write's own connection and transaction) and raises :class:`~sealstore.errors.DuplicateIndexValue`
if another row holds it.  A row the re-index moves meanwhile is seen either under the old key
(by this look-up: the re-index has not committed) or under the primary key (by the database's
constraint).  Without active older keys (no rotation under way) nothing is looked up.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from sqlalchemy import UniqueConstraint, case, literal_column, select

from ...errors import DuplicateIndexValue, IndexIncomplete
from ...keyring import KeyState, get_keyring
from .rows import PreSealed

__all__ = [
    "COMPLETE_TTL",
    "INCOMPLETE_TTL",
    "PARTIAL_OPTION",
    "forget",
    "guard_unique",
    "is_unique",
    "require_complete",
]

#: the execution option that accepts partial results from an incomplete index
PARTIAL_OPTION = "sealstore_partial_index"
#: seconds a "complete" answer is kept per engine and index
COMPLETE_TTL = 300.0
#: seconds an "incomplete" answer is kept (lookups raise meanwhile)
INCOMPLETE_TTL = 1.0

# pool -> {(schema, table, index column): (complete, monotonic deadline)}
_known: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], tuple[bool, float]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _index_column(itype: Any) -> Any:
    """The index Column of a bound BlindIndex type (by SQL name)."""
    table = itype._table_obj
    col = table.c.get(itype.column)
    if col is None or col.name != itype.column:
        col = next(c for c in table.c if c.name == itype.column)
    return col


def _where(itype: Any) -> str:
    table = itype._table_obj
    prefix = f"{table.schema}." if table.schema else ""
    return f"{prefix}{table.name}.{itype.column}"


def forget(engine: Any = None) -> None:
    """Forget what is known about every index (of ``engine``'s pool, or of all engines)."""
    with _lock:
        if engine is None:
            _known.clear()
        else:
            _known.pop(engine.pool, None)


def _is_complete(conn: Any, itype: Any) -> bool:
    idx, src = _index_column(itype), itype.source_column
    q: Any = (
        select(literal_column("1"))
        .select_from(itype._table_obj)
        .where(idx.is_(None), src.is_not(None))
        .limit(1)
    )
    return conn.execute(q).first() is None


def require_complete(conn: Any, itypes: Any, options: Any) -> None:
    """Raise IndexIncomplete for the first of ``itypes`` (bound BlindIndex types a statement
    looks up through) that has rows with a source and no index value, unless ``options`` (the
    execution options) accept partial results."""
    if options and options.get(PARTIAL_OPTION):
        return
    pool = conn.engine.pool
    known = _known.get(pool)
    now = time.monotonic()
    for itype in itypes:
        table = itype._table_obj
        key = (table.schema, table.name, itype.column)
        entry = known.get(key) if known is not None else None
        if entry is None or entry[1] <= now:
            complete = _is_complete(conn, itype)
            entry = (complete, now + (COMPLETE_TTL if complete else INCOMPLETE_TTL))
            with _lock:
                known = _known.setdefault(pool, {})
                known[key] = entry
        if not entry[0]:
            raise IndexIncomplete(
                f"the blind index {_where(itype)} is incomplete: some rows have "
                f"{itype.source} set and no index value (an index added to existing rows), so "
                f"this lookup would miss them. Fill it: `sealstore reindex --models <your models> "
                f"--table {table.name}` "
                "(or op.add_blind_index in a revision); to accept partial results meanwhile, "
                f"pass the execution option {PARTIAL_OPTION}=True"
            )


# ---- uniqueness under older index keys ----------------------------------------------------------


def is_unique(itype: Any) -> bool:
    """Whether the index column alone is UNIQUE (``unique=True``, a unique Index or a
    UniqueConstraint on it alone).  Memoized on the bound type."""
    memo = getattr(itype, "_unique_memo", None)
    if memo is not None:
        return bool(memo)
    col = _index_column(itype)
    table = itype._table_obj
    unique = bool(col.unique)
    for ix in table.indexes:
        if ix.unique and [c.name for c in ix.columns] == [col.name]:
            unique = True
    for cons in table.constraints:
        if isinstance(cons, UniqueConstraint) and [c.name for c in cons.columns] == [col.name]:
            unique = True
    itype._unique_memo = unique
    return unique


def _rotating(itype: Any) -> bool:
    """Whether the index keyring has active keys besides the primary (cheap: no sorting)."""
    keyring = get_keyring(itype.keyring)
    return any(k.state is KeyState.ACTIVE for k in keyring._keys.values())


def guard_unique(
    conn: Any,
    itype: Any,
    values: list[Any],
    *,
    exclude: tuple[Any, ...] | None = None,
    where: Any = None,
    params: dict[str, Any] | None = None,
) -> None:
    """Before ``values`` are written to the UNIQUE index ``itype``: raise DuplicateIndexValue
    when another row holds one of them under an older active index key (one ``SELECT`` per 500
    values).  ``exclude``: the primary key of the row being written (an ORM update); ``where``:
    an UPDATE's WHERE clause (the rows it rewrites are not duplicates), bound with ``params``."""
    values = [v.plaintext if type(v) is PreSealed else v for v in values if v is not None]
    if not values or not is_unique(itype) or not _rotating(itype):
        return
    olds = [c for v in values for c in itype.candidates(v)[1:]]  # [0] is the primary's
    table = itype._table_obj
    pk = list(table.primary_key.columns)
    col = _index_column(itype)
    for start in range(0, len(olds), 500):
        q = select(*pk).where(col.in_(olds[start : start + 500]))
        if where is not None:  # rows the UPDATE does not rewrite (NULL counts as "not")
            q = q.where(case((where, 0), else_=1) == 1)
        rows = conn.execute(q.limit(2), params or {}).all()
        if any(exclude is None or tuple(r) != tuple(exclude) for r in rows):
            raise DuplicateIndexValue(
                f"{_where(itype)} is UNIQUE and another row already holds this value under an "
                "older index key (an index-key rotation is under way, so the database's unique "
                "constraint cannot see it); run `sealstore reindex` to finish the rotation"
            )
