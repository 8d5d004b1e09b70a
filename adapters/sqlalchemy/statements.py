"""Statement clauses over encrypted columns that would silently give wrong results, refused
with UnsupportedComparison when the statement is compiled (before anything runs).

The column's comparator cannot see these: a bare ``order_by(col)``, ``group_by(col)``,
``distinct()`` or a UNION never call it, and ``cast(col, String) == x``,
``func.lower(col) == x`` or ``tuple_(col, ...).in_(...)`` compare with another type's
comparator.  So sealstore registers compilers (``sqlalchemy.ext.compiler.compiles``) for
``Select``, ``CompoundSelect``, ``Cast``, ``Tuple``, ``BinaryExpression``, ``UnaryExpression``,
``Over``, ``AggregateOrderBy`` and ``WithinGroup`` that check the clauses that matter, then hand
the element to SQLAlchemy's own ``visit_*`` method:

- ORDER BY an expression computed from a ciphertext (the column, a cast, a function of it),
  in a SELECT, a window (``over(order_by=...)``) or an aggregate: the order is random;
- GROUP BY, DISTINCT, DISTINCT ON and ``over(partition_by=...)`` an encrypted column, unless
  its table's whole primary key is grouped (or selected) too: two rows with one plaintext have
  two ciphertexts, so grouping by value cannot work, while grouping by row can;
- a UNION/INTERSECT/EXCEPT whose column at one position is encrypted in one SELECT and not
  encrypted the same way (table, column, keyring, type) in another: the result opens every
  row with the first SELECT's context;
- CAST of an encrypted column to anything but a binary or encrypted type (``cast(col,
  LargeBinary)`` reads the stored bytes, and stays allowed);
- a tuple holding an encrypted column; a comparison of a function of one (``count`` aside);
  ``distinct(col)`` inside a function (``count(distinct(col))`` counts ciphertexts).

A refused statement raises each time it is compiled; SQLAlchemy caches only what compiled.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import operators
from sqlalchemy.sql.compiler import _CompileLabel
from sqlalchemy.sql import elements as _elements
from sqlalchemy.sql.elements import (
    BinaryExpression,
    Cast,
    ClauseElement,
    ClauseList,
    ColumnElement,
    Grouping,
    Label,
    Over,
    Tuple,
    TypeCoerce,
    UnaryExpression,
    WithinGroup,
    _textual_label_reference,
)
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.selectable import CompoundSelect, Select
from sqlalchemy.types import _Binary

from ...errors import UnsupportedComparison
from .types import EncryptedType

__all__ = ["check_compound", "check_select", "ciphertext_source"]

_ORDERING = frozenset(
    {operators.asc_op, operators.desc_op, operators.nulls_first_op, operators.nulls_last_op}
)
#: functions whose result does not depend on the stored bytes' content
_ROW_FUNCTIONS = frozenset({"count"})


def _refuse(name: str, what: str) -> UnsupportedComparison:
    return UnsupportedComparison(
        f"{name} is encrypted with random nonces: {what} cannot work on its ciphertext; "
        "load the rows and do it in Python (look up values through a BlindIndex)"
    )


def _name(expr) -> str:
    """``table.column`` the encrypted expression reads (the type's binding, aliases aside)."""
    kind = expr.type
    if isinstance(kind, EncryptedType) and kind.bound:
        return f"{kind.table}.{kind.column}"
    return "an encrypted column"


def _unwrap(expr):
    """``expr`` without labels, parentheses, ASC/DESC/NULLS FIRST/LAST and COLLATE."""
    while True:
        if isinstance(expr, (Label, Grouping, _CompileLabel)):
            expr = expr.element
        elif isinstance(expr, UnaryExpression) and expr.modifier in _ORDERING:
            expr = expr.element
        elif isinstance(expr, BinaryExpression) and expr.operator is operators.collate:
            expr = expr.left
        else:
            return expr


def ciphertext_source(expr: ClauseElement) -> ColumnElement[Any] | None:
    """The encrypted expression ``expr`` is computed from (itself, through a cast, a type
    coercion or a function argument), or None."""
    inner = _unwrap(expr)
    if isinstance(getattr(inner, "type", None), EncryptedType):
        return inner
    if isinstance(inner, (Cast, TypeCoerce)):
        return ciphertext_source(inner.clause)
    if isinstance(inner, FunctionElement) and getattr(inner, "name", None) not in _ROW_FUNCTIONS:
        for arg in inner.clauses.clauses:
            found = ciphertext_source(arg)
            if found is not None:
                return found
    return None


def _flat(exprs):
    """``exprs`` with the clause lists SQLAlchemy wraps some GROUP BY entries in opened."""
    for expr in exprs:
        if isinstance(expr, ClauseList) and not isinstance(expr, Tuple):
            yield from _flat(expr.clauses)
        else:
            yield expr


def _resolve(expr, stmt):
    """An ``order_by("name")`` label reference as the selected column it names."""
    inner = _unwrap(expr)
    if stmt is not None and isinstance(inner, _textual_label_reference):
        cols = stmt.selected_columns
        return cols[inner.element] if inner.element in cols else inner
    return expr


def _row_key_in(src, exprs) -> bool:
    """True when ``exprs`` hold the whole primary key of ``src``'s table (one group per row):
    that table's own key columns or proxies of them, not another alias's of the same table."""
    pk = list(getattr(getattr(src, "table", None), "primary_key", None) or ())
    cols = [_unwrap(e) for e in exprs]
    return bool(pk) and all(any(key in getattr(c, "proxy_set", ()) for c in cols) for key in pk)


def _check_order(exprs, what: str = "ORDER BY", stmt=None) -> None:
    for expr in _flat(exprs):
        src = ciphertext_source(_resolve(expr, stmt))
        if src is not None:
            raise _refuse(_name(src), what)


def _check_grouping(exprs, what: str, stmt=None) -> None:
    exprs = [_resolve(e, stmt) for e in _flat(exprs)]
    for expr in exprs:
        src = ciphertext_source(expr)
        if src is not None and not _row_key_in(src, exprs):
            raise _refuse(_name(src), what)


def check_select(stmt: Select[Any]) -> None:
    """Refuse ORDER BY, GROUP BY, DISTINCT (ON) of a SELECT over ciphertext (see above)."""
    _check_order(stmt._order_by_clauses, stmt=stmt)
    if stmt._group_by_clauses:
        _check_grouping(stmt._group_by_clauses, "GROUP BY", stmt)
    if stmt._distinct_on:
        _check_grouping(stmt._distinct_on, "DISTINCT ON", stmt)
    elif stmt._distinct:
        _check_grouping(list(stmt.selected_columns), "SELECT DISTINCT", stmt)


def _same_binding(a, b) -> bool:
    """True when values of type ``b`` open as values of type ``a`` (same context and codec)."""
    return (
        isinstance(a, EncryptedType)
        and type(a) is type(b)
        and (a.table, a.column, a.keyring_name, a.bind_row)
        == (b.table, b.column, b.keyring_name, b.bind_row)
        and repr(a) == repr(b)
    )


def check_compound(stmt: CompoundSelect[Any]) -> None:
    """Refuse a UNION (INTERSECT, EXCEPT) whose SELECTs put differently sealed values in one
    column, and its ORDER BY / GROUP BY over ciphertext."""
    columns = [list(s.selected_columns) for s in stmt.selects]
    for position, first in enumerate(columns[0]):
        for other in columns[1:]:
            if position >= len(other):
                continue  # SQLAlchemy's own error about the column counts
            a, b = first.type, other[position].type
            encrypted = isinstance(a, EncryptedType) or isinstance(b, EncryptedType)
            if encrypted and not _same_binding(a, b):
                enc = first if isinstance(a, EncryptedType) else other[position]
                raise _refuse(_name(enc), f"{stmt.keyword.value} with a column sealed otherwise")
    _check_order(stmt._order_by_clauses, stmt=stmt)
    if stmt._group_by_clauses:
        _check_grouping(stmt._group_by_clauses, "GROUP BY", stmt)


def _check_cast(cast) -> None:
    src = ciphertext_source(cast.clause)
    if src is not None and not isinstance(cast.type, (_Binary, EncryptedType)):
        raise _refuse(_name(src), f"CAST(... AS {type(cast.type).__name__})")


def _check_tuple(element) -> None:
    for expr in element.clauses:
        src = ciphertext_source(expr)
        if src is not None:
            raise _refuse(_name(src), "a tuple comparison")


def _check_window(over) -> None:
    if over.order_by is not None:
        _check_order(over.order_by, "OVER (ORDER BY ...)")
    if over.partition_by is not None:
        _check_grouping(over.partition_by, "OVER (PARTITION BY ...)")


def _check_unary(unary) -> None:
    if unary.operator is operators.distinct_op:  # count(distinct(col)): distinct ciphertexts
        src = ciphertext_source(unary.element)
        if src is not None:
            raise _refuse(_name(src), "DISTINCT")


def _check_binary(binary) -> None:
    if not operators.is_comparison(binary.operator):
        return
    for side in (binary.left, binary.right):
        side = _unwrap(side)
        if isinstance(side, FunctionElement):
            src = ciphertext_source(side)
            if src is not None:
                raise _refuse(_name(src), f"comparing {getattr(side, 'name', 'a function')}(...)")


@compiles(Select)
def _compile_select(element, compiler, **kw):
    check_select(element)
    return compiler.visit_select(element, **kw)


@compiles(CompoundSelect)
def _compile_compound(element, compiler, **kw):
    check_compound(element)
    return compiler.visit_compound_select(element, **kw)


@compiles(Cast)
def _compile_cast(element, compiler, **kw):
    _check_cast(element)
    return compiler.visit_cast(element, **kw)


@compiles(Tuple)
def _compile_tuple(element, compiler, **kw):
    _check_tuple(element)
    return compiler.visit_tuple(element, **kw)


@compiles(BinaryExpression)
def _compile_binary(element, compiler, **kw):
    _check_binary(element)
    return compiler.visit_binary(element, **kw)


@compiles(Over)
def _compile_over(element, compiler, **kw):
    _check_window(element)
    return compiler.visit_over(element, **kw)


def _compile_aggregate_order_by(element, compiler, **kw):
    _check_order(element.order_by, "an aggregate's ORDER BY")
    return compiler.visit_aggregateorderby(element, **kw)


#: ``func.x(...).aggregate_order_by()`` is new in SQLAlchemy 2.1 (2.0 has only PostgreSQL's
#: own ``aggregate_order_by``, not hooked: docs/COLUMNS.md)
AggregateOrderBy: type[ColumnElement[Any]] | None = getattr(_elements, "AggregateOrderBy", None)
if AggregateOrderBy is not None:
    compiles(AggregateOrderBy)(_compile_aggregate_order_by)


@compiles(WithinGroup)
def _compile_within_group(element, compiler, **kw):
    _check_order(element.order_by, "WITHIN GROUP (ORDER BY ...)")
    return compiler.visit_withingroup(element, **kw)


@compiles(UnaryExpression)
def _compile_unary(element, compiler, **kw):
    _check_unary(element)
    return compiler.visit_unary(element, **kw)
