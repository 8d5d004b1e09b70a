"""SQL over encrypted columns that cannot work, refused when the statement is compiled.

A comparison of an encrypted column with another SQL expression:

``col == other_col`` cannot raise where it is written: SQLAlchemy itself compares columns with
``==`` to test membership (``column in list_of_columns``, e.g. while compiling
``insert(Model).returning(Model)``), and relies on the result's truth value, which for ``==``
and ``!=`` compares the operands' identities.  So the comparison returns a
``RefusedComparison``: its truth value is that of the ordinary ``BinaryExpression``, and it
raises UnsupportedComparison as soon as a statement using it is compiled, so it can never run.

An encrypted type in a SELECT list that is not one stored value (``func.max(col)``,
``coalesce(a, b)``, ``case(...)``, ``distinct(col)``): ``check_selected``, the types'
``column_expression``, which SQLAlchemy calls while compiling each selected expression.
"""

from __future__ import annotations

from typing import Any, NoReturn

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import _CompileLabel
from sqlalchemy.sql.elements import (
    BindParameter,
    Cast,
    ColumnClause,
    ColumnElement,
    Grouping,
    Label,
    Null,
    TypeCoerce,
)
from sqlalchemy.sql.selectable import ScalarSelect
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import Boolean

from ...errors import UnsupportedComparison

__all__ = ["RefusedComparison", "check_selected"]

#: what may stand in a SELECT list with an encrypted type: one stored value, opened as such
_ONE_VALUE = (ColumnClause, TypeCoerce, Cast, BindParameter, Null, ScalarSelect)


class RefusedComparison(ColumnElement[Any]):
    """``binary`` (an encrypted column compared with an expression) that must never compile."""

    __visit_name__ = "sealstore_refused_comparison"
    inherit_cache: bool = True
    _traverse_internals = [("binary", InternalTraversal.dp_clauseelement)]
    type: Boolean = Boolean()

    def __init__(self, binary: Any, message: str) -> None:
        self.binary = binary
        self.message = message

    def __bool__(self) -> bool:
        return bool(self.binary)  # what SQLAlchemy's membership tests expect


@compiles(RefusedComparison)
def _refuse(element: Any, compiler: Any, **kw: Any) -> NoReturn:
    raise UnsupportedComparison(element.message)


def check_selected(expr: Any, name: str) -> Any:
    """``expr`` as selected (``TypeDecorator.column_expression``), or UnsupportedComparison when
    it computes over ciphertexts: ``func.max/min(col)`` would return an arbitrary row's value,
    ``coalesce``/``case`` over two columns open one column's values with the other's context,
    ``distinct(col)`` treats every ciphertext as distinct."""
    inner = expr
    while isinstance(inner, (Label, Grouping, _CompileLabel)):
        inner = inner.element
    if isinstance(inner, _ONE_VALUE):
        return expr
    raise UnsupportedComparison(
        f"{name} is encrypted with random nonces: SELECT {type(inner).__name__.lower()}(...) "
        "cannot work on its ciphertext; select the column and compute in Python"
    )
