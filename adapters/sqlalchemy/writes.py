"""Write paths: only values sealstore seals reach an encrypted column, and every blind index
follows its source column (docs/COLUMNS.md, *Writes*).

One engine hook, ``before_execute``, sees every INSERT and UPDATE before SQLAlchemy compiles
it: Core statements, ORM flushes, ORM bulk inserts and updates, ORM-enabled ``insert()`` and
``update()`` (the ORM runs them on a Connection), upserts and ``lambda_stmt()`` included.  It
reads what the statement itself assigns (``values()``, multi-row ``values([...])``,
``ordered_values()``, the SET of ``on_conflict_do_update`` / ``on_duplicate_key_update``,
``from_select()``) and sorts each value bound to an encrypted column:

* a Python value, or a bound parameter that SQLAlchemy types as the column (an untyped
  ``bindparam("e")``): the column's type seals it.  Its blind index is computed from the value
  now, or, for a named parameter, from every parameter set at execution: the statement gets
  ``index = :<name>__sealstore_<table>_<index>`` and each parameter set that key;
* the row an upsert proposes for the same column (``excluded.email``, ``inserted.email``,
  MySQL ``VALUES(email)``): sealed already; the index takes the same row's index;
* SQL NULL: the index is NULL too;
* anything else (a function, another column, ``text()``, ``literal_column()``, a subquery, a
  parameter typed otherwise, ``INSERT ... SELECT``): UnsealedExpression, raised before the
  statement is compiled, so nothing is written.

Parameter sets keyed by column (``conn.execute(update(t).where(...), [{"email": ...}])``, ORM
bulk updates) get the index key added per set; INSERTs compute it in the index column's
default (``blind_index.py``).  An index column the statement sets itself is left as given.
Textual SQL (``text("UPDATE ...")``, ``exec_driver_sql``) cannot be inspected and runs as
written.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import Column, Insert, Update, bindparam, event, func, literal, null
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import BindParameter, ClauseElement, Null
from sqlalchemy.sql.functions import Function
from sqlalchemy.sql.lambdas import StatementLambdaElement
from sqlalchemy.util import immutabledict

from ...errors import BlindIndexError, UnsealedExpression
from .blind_index import BlindIndex
from .index_state import guard_unique, is_unique
from .types import EncryptedType

__all__ = ["TablePlan", "table_plan", "forget_table"]

DERIVED = "{name}__sealstore_{table}_{index}"


class TablePlan:
    """The encrypted columns of one table (by key) and its (source, index) column pairs."""

    __slots__ = ("encrypted", "indexes")

    def __init__(
        self,
        encrypted: dict[str, Column[Any]],
        indexes: tuple[tuple[Column[Any], Column[Any]], ...],
    ) -> None:
        self.encrypted: dict[str, Column[Any]] = encrypted
        self.indexes: tuple[tuple[Column[Any], Column[Any]], ...] = indexes

    def index_of(self, source: Column[Any]) -> Column[Any] | None:
        return next((index for src, index in self.indexes if src is source), None)


_PLANS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _base(table):
    return table._deannotate() if hasattr(table, "_deannotate") else table


def table_plan(table: Any) -> TablePlan | None:
    """The plan of a Table (None for tables without encrypted columns), cached per Table."""
    table = _base(table)
    try:
        return _PLANS[table]
    except KeyError:
        pass
    except TypeError:  # not weak-referenceable: not a Table
        return None
    columns = getattr(table, "c", None)
    if columns is None:
        return None
    encrypted = {c.key: c for c in columns if isinstance(c.type, EncryptedType)}
    indexes: list[tuple[Any, Any]] = []
    for c in columns:
        if isinstance(c.type, BlindIndex) and c.type._table_obj is not None:
            src = next((s for s in encrypted.values() if c.type.source in (s.key, s.name)), None)
            if src is not None:
                indexes.append((src, c))
    plan = TablePlan(encrypted, tuple(indexes)) if encrypted else None
    _PLANS[table] = plan
    return plan


def forget_table(table: Any) -> None:
    """Drop the cached plan of ``table`` (a column was attached to it)."""
    _PLANS.pop(_base(table), None)


# ---- reading one assignment -----------------------------------------------------------------


def _column(table, plan: TablePlan | None, key):
    """The Column an assignment key names, or None."""
    if isinstance(key, str):
        return table.c.get(key) if plan is not None else None
    return key if getattr(key, "table", None) is not None else None


def _seals_as(type_, column) -> bool:
    ctype = column.type
    if type_._isnull or type_ is ctype:
        return True
    return type(type_) is type(ctype) and (type_.table, type_.column, type_.keyring_name) == (
        ctype.table,
        ctype.column,
        ctype.keyring_name,
    )


def _refuse(column, value, why: str = "") -> UnsealedExpression:
    return UnsealedExpression(
        f"{column.table.name}.{column.name} is encrypted: only Python values and bound parameters "
        f"are sealed, and this statement assigns it a SQL expression ({type(value).__name__}){why}; "
        "compute the value in Python and pass it as a value"
    )


def _pseudo_row(value, column, pseudo):
    """The upsert pseudo-row ``value`` reads ``column`` from (the excluded/inserted alias, or
    "values" for MySQL's VALUES(column)), or None."""
    if pseudo is None:
        return None
    if isinstance(value, Function):
        args = list(value.clauses)
        if (
            not isinstance(pseudo, str)  # MySQL, MariaDB
            and value.name.lower() == "values"
            and len(args) == 1
            and _base(args[0]) is column
        ):
            return "values"
        return None
    owner = getattr(value, "table", None)
    if owner is None or getattr(value, "name", None) != column.name:
        return None
    if owner is pseudo:
        return owner
    if (
        isinstance(pseudo, str)
        and getattr(owner, "name", None) == pseudo
        and _base(getattr(owner, "element", None)) is column.table
    ):
        return owner
    return None


def classify(
    column: Any, value: Any, *, pseudo: Any = None, multi_row: bool = False
) -> tuple[Any, ...]:
    """How ``value`` reaches ``column``: ("value", v), ("param", bind), ("row", alias), ("null",).

    Raises UnsealedExpression for anything the column's type would not seal."""
    if value is None or isinstance(value, Null):
        return ("null",)
    if not isinstance(value, ClauseElement) and not hasattr(value, "__clause_element__"):
        return ("value", value)
    if isinstance(value, BindParameter) and not multi_row:
        if not _seals_as(value.type, column):
            raise _refuse(column, value, f" typed {type(value.type).__name__}")
        if value.callable is not None:
            return ("callable", value)
        return ("value", value.value) if value.unique else ("param", value)
    row = _pseudo_row(value, column, pseudo)
    if row is not None:
        return ("row", row)
    if multi_row:
        raise _refuse(column, value, " in a multi-row values() list, which takes Python values")
    raise _refuse(column, value)


# ---- the index that follows one assignment ---------------------------------------------------


def _index_value(kind, index, derived: list, guard=None):
    """The SQL value of ``index`` for a source assigned as ``kind`` (see classify); ``guard(itype,
    value)`` checks a UNIQUE index's value under older index keys first (``index_state.py``)."""
    itype = index.type
    if kind[0] == "null":
        return null()
    if kind[0] == "value":
        if guard is not None:
            guard(itype, kind[1])
        return literal(itype.compute(kind[1]), itype)
    if kind[0] == "callable":
        raise BlindIndexError(
            f"{index.table.name}.{itype.source} is set from a bindparam() with a callable, so its "
            f"blind index {index.key} cannot follow it; pass the value"
        )
    if kind[0] == "row":
        row = kind[1]
        if row == "values":
            return func.values(index)
        return row.c[index.key]
    bind = kind[1]
    name = DERIVED.format(name=bind.key, table=index.table.name, index=index.key)
    derived.append((name, bind.key, bind.value, itype))
    return bindparam(name, type_=itype)


def _follow(table, plan, pairs, *, pseudo=None, guard=None):
    """({index column: SQL value}, derived parameters) for the indexed sources that ``pairs``
    assign; every assignment to an encrypted column is checked on the way."""
    resolved, assigned = [], set()
    for key, value in pairs:
        col = _column(table, plan, key)
        if col is None:
            continue
        col = _base(col)
        assigned.add(col)
        if isinstance(col.type, EncryptedType):
            resolved.append((col, classify(col, value, pseudo=pseudo)))
    extra, derived = {}, []
    for col, kind in resolved:
        owner = table_plan(col.table)
        index = owner.index_of(col) if owner is not None else None
        if index is not None and index not in assigned:
            extra[index] = _index_value(kind, index, derived, guard)
    return extra, derived


# ---- statements -------------------------------------------------------------------------------


def _check_multi_rows(table, plan, elem) -> None:
    for rows in elem._multi_values:
        for row in rows:
            for key, value in row.items():
                col = _column(table, plan, key)
                if col is not None and isinstance(col.type, EncryptedType):
                    classify(col, value, multi_row=True)


def _check_from_select(table, plan, elem) -> None:
    for name in getattr(elem, "_select_names", None) or ():
        col = _column(table, plan, name)
        if col is not None and isinstance(col.type, EncryptedType):
            raise UnsealedExpression(
                f"INSERT ... SELECT into {table.name}.{col.name}: the selected values were not "
                "sealed for this column; read, then insert the values"
            )


def _upsert(table, plan, elem):
    """(new statement or None, derived parameters) for an INSERT's ON CONFLICT/DUPLICATE clause."""
    clause = getattr(elem, "_post_values_clause", None)
    if clause is None:
        return None, []
    if hasattr(clause, "update_values_to_set"):  # PostgreSQL, SQLite
        attr, pseudo = "update_values_to_set", "excluded"
    elif hasattr(clause, "inserted_alias") and hasattr(clause, "update"):  # MySQL, MariaDB
        attr, pseudo = "update", clause.inserted_alias
    else:
        return None, []
    current = getattr(clause, attr)
    pairs = list(current.items()) if isinstance(current, dict) else list(current)
    extra, derived = _follow(table, plan, pairs, pseudo=pseudo)
    if not extra:
        return None, derived
    added = [(index.key, value) for index, value in extra.items()]
    new_clause = clause._clone()
    setattr(new_clause, attr, dict(pairs + added) if isinstance(current, dict) else pairs + added)
    if getattr(clause, "_parameter_ordering", None):
        new_clause._parameter_ordering = list(clause._parameter_ordering) + [k for k, _ in added]
    new = elem._clone()
    new._post_values_clause = new_clause
    return new, derived


def _rewrite(elem, guard=None):
    """(statement to run, derived parameters, plan) for one INSERT/UPDATE."""
    table = elem.table
    plan = table_plan(table)
    if isinstance(elem, Insert):
        if elem._multi_values:
            _check_multi_rows(table, plan, elem)
        if getattr(elem, "select", None) is not None:
            _check_from_select(table, plan, elem)
    derived = []
    ordered = getattr(elem, "_ordered_values", None)  # SQLAlchemy 2.0
    if ordered:
        extra, derived = _follow(table, plan, ordered, guard=guard)
        if extra:
            elem = elem._clone()
            elem._ordered_values = list(ordered) + list(extra.items())
    elif elem._values:
        extra, derived = _follow(table, plan, elem._values.items(), guard=guard)
        if extra and getattr(elem, "_maintain_values_ordering", False):  # ordered_values(), 2.1
            elem = elem._clone()
            elem._values = immutabledict({**elem._values, **extra})
        elif extra:
            elem = elem.values(extra)
    if isinstance(elem, Insert):
        upserted, more = _upsert(table, plan, elem)
        elem = upserted if upserted is not None else elem
        derived += more
    return elem, derived, plan


def _fill(rows: list, derived, plan, update: bool, written, guard=None) -> list:
    """Parameter sets with the derived index keys, and, for UPDATEs, the index of every
    source column a set carries (ORM bulk updates, executemany by column key); ``guard(itype,
    value, row)`` checks a UNIQUE index's value under older index keys first."""
    out = []
    for row in rows:
        new = None
        for name, key, default, itype in derived:
            new = new if new is not None else dict(row)
            value = row[key] if key in row else default
            if guard is not None:
                guard(itype, [value], row)
            new[name] = itype.compute(value)
        if update and plan is not None:
            for src, index in plan.indexes:
                if src.key in row and index.key not in row and src.key not in written:
                    new = new if new is not None else dict(row)
                    if guard is not None:
                        guard(index.type, [row[src.key]], row)
                    new[index.key] = index.type.compute(row[src.key])
        out.append(row if new is None else new)
    return out


def _before_execute(conn, elem, multiparams, params, execution_options):
    if isinstance(elem, StatementLambdaElement):
        return _lambda(conn, elem, multiparams, params)
    if not isinstance(elem, (Insert, Update)):
        return elem, multiparams, params
    original = elem
    guard = _guard(conn, elem, multiparams, params)
    elem, derived, plan = _rewrite(elem, lambda itype, value: guard(itype, [value], None))
    if isinstance(elem, Insert) and plan is not None and plan.indexes:
        _guard_inserted(plan, multiparams or [params or {}], guard)
        if elem._multi_values:
            _guard_multi_values(elem.table, plan, elem, guard)
    if not derived and (plan is None or not plan.indexes or isinstance(elem, Insert)):
        return elem, multiparams, params
    written = {
        k if isinstance(k, str) else getattr(k, "key", None) for k in (original._values or ())
    }
    written |= {
        k if isinstance(k, str) else getattr(k, "key", None)
        for k, _ in (getattr(original, "_ordered_values", None) or ())
    }
    update = isinstance(elem, Update)
    if multiparams:
        multiparams = _fill(list(multiparams), derived, plan, update, written, guard)
    else:
        params = _fill([params or {}], derived, plan, update, written, guard)[0]
    return elem, multiparams, params


def _guard_inserted(plan, rows, guard) -> None:
    """The UNIQUE index values an INSERT's column defaults will compute from its parameter
    sets (ORM flushes, executemany, bulk inserts), checked under older index keys first."""
    for src, index in plan.indexes:
        if is_unique(index.type):
            values = [r[src.key] for r in rows if src.key in r and index.key not in r]
            guard(index.type, values, None)


def _guard_multi_values(table, plan, elem, guard) -> None:
    """The same for the rows of a multi-row ``values([...])`` (its plain and bound values)."""
    for rows in elem._multi_values:
        for row in rows:
            given = {}
            for key, value in row.items():
                col = _column(table, plan, key)
                if col is not None:
                    given[col.key] = value.value if isinstance(value, BindParameter) else value
            for src, index in plan.indexes:
                value = given.get(src.key)
                if index.key in given or value is None or isinstance(value, ClauseElement):
                    continue
                if is_unique(index.type):
                    guard(index.type, [value], None)


def _guard(conn, elem, multiparams, params):
    """``guard(itype, values, row)``: a UNIQUE index's values checked under older index keys
    (``index_state.guard_unique``) before ``elem`` runs; an UPDATE's own rows (its WHERE,
    bound with the parameter set ``row``, or each set when ``row`` is None) are not duplicates."""
    where = elem.whereclause if isinstance(elem, Update) else None

    def guard(itype, values, row):
        if not values or not is_unique(itype):
            return
        if where is None:  # an INSERT: the values, once
            guard_unique(conn, itype, values)
            return
        for p in [row] if row is not None else (multiparams or [params or {}]):
            guard_unique(conn, itype, values, where=where, params=p)

    return guard


def _lambda(conn, elem, multiparams, params):
    """lambda_stmt() DML: checked like any statement; indexes cannot follow values that the
    lambda's closure supplies at each call, so those are refused.  (A UNIQUE index's guard
    cannot bind the lambda's WHERE: every row holding the value under an older key counts.)"""
    stmt = getattr(elem, "_resolved", None)
    if not isinstance(stmt, (Insert, Update)):
        return elem, multiparams, params
    rewritten, derived, plan = _rewrite(stmt)
    if rewritten is not stmt or derived:
        raise BlindIndexError(
            f"a lambda_stmt() {type(stmt).__name__.upper()} sets an indexed column of "
            f"{stmt.table.name}; its blind index cannot follow values bound inside the lambda: "
            "use insert()/update() (they can be cached as well)"
        )
    if plan is not None and plan.indexes and isinstance(stmt, Update):
        rows = multiparams or [params or {}]
        guard = _guard(conn, None, multiparams, params)  # no WHERE
        fixed = _fill(list(rows), [], plan, True, set(), guard)
        multiparams, params = (fixed, params) if multiparams else (multiparams, fixed[0])
    return elem, multiparams, params


event.listen(Engine, "before_execute", _before_execute, retval=True)
