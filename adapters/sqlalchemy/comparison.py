"""How an encrypted column compares: what passes through, what goes to its blind index, and
what is refused (randomized ciphertext cannot be ordered, matched or compared in SQL)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BindParameter, ColumnElement, Null
from sqlalchemy.types import TypeDecorator

from ...errors import UnsupportedComparison
from .blind_index import equality_via_index
from .refused import RefusedComparison

__all__ = ["EncryptedComparator"]


class EncryptedComparator(TypeDecorator.Comparator[Any]):
    """Refuses comparisons that cannot work on randomized ciphertext.

    ``IS NULL`` / ``IS NOT NULL`` pass through.  ``==``, ``!=``, ``in_()`` and ``not_in()``
    with literal values are rewritten to the column's blind index when it has one; ``==`` and
    ``!=`` with another SQL expression raise UnsupportedComparison when compiled (see
    ``refused.py``: SQLAlchemy compares columns internally); everything else (ordering,
    ``LIKE``, arithmetic) raises UnsupportedComparison at once.
    """

    __slots__ = ()

    def operate(self, op: Any, *other: Any, **kwargs: Any) -> Any:
        return _compare(self, op, other, kwargs, reverse=False)

    def reverse_operate(self, op: Any, other: Any, **kwargs: Any) -> Any:
        return _compare(self, op, (other,), kwargs, reverse=True)


_PASS_THROUGH = frozenset({operators.is_, operators.is_not})
_EQUALITY = frozenset({operators.eq, operators.ne, operators.in_op, operators.not_in_op})


def _compare(comparator, op, other, kwargs, reverse):
    expr = comparator.expr
    single = other[0] if len(other) == 1 else None
    if op in _PASS_THROUGH or (
        op in (operators.eq, operators.ne)
        and len(other) == 1
        # NULL checks; and SQLAlchemy itself compares a column with its annotated copy
        # (dictionary look-ups of columns fall back to ==): both build the ordinary expression
        and (single is None or isinstance(single, Null) or _same_column(expr, single))
    ):
        parent = super(EncryptedComparator, comparator)
        if reverse:
            return parent.reverse_operate(op, single, **kwargs)
        return parent.operate(op, *other, **kwargs)
    name = _describe(expr)
    if op in (operators.eq, operators.ne) and _is_sql_expression(single):
        parent = super(EncryptedComparator, comparator)
        binary = (
            parent.reverse_operate(op, single, **kwargs)
            if reverse
            else parent.operate(op, single, **kwargs)
        )
        return RefusedComparison(
            binary,
            f"{name} is encrypted with random nonces: comparing it with another SQL expression "
            "cannot work on its ciphertext; compare with a value (through a BlindIndex)",
        )
    if op in _EQUALITY:
        return equality_via_index(expr, op, single, name)
    raise UnsupportedComparison(
        f"{name} is encrypted with random nonces: the {getattr(op, '__name__', op)!s} operator "
        "cannot work on its ciphertext; compare decrypted values in Python, or add a BlindIndex "
        "for equality lookups"
    )


def _is_sql_expression(other) -> bool:
    """True for a column or other SQL expression (not a bound parameter or a Python value)."""
    if not isinstance(other, ColumnElement) and hasattr(other, "__clause_element__"):
        other = other.__clause_element__()
    return isinstance(other, ColumnElement) and not isinstance(other, BindParameter)


def _same_column(expr, other) -> bool:
    if other is expr:
        return True
    if not isinstance(other, ColumnElement):
        return False
    # an annotated copy hashes like its original; an alias's column does not
    return hash(other) == hash(expr) and expr.shares_lineage(other)


def _describe(expr) -> str:
    table = getattr(getattr(expr, "table", None), "name", None)
    col = getattr(expr, "name", None) or getattr(expr, "key", None) or "column"
    return f"{table}.{col}" if table else str(col)
