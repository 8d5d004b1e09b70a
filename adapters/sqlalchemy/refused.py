"""A comparison of an encrypted column with another SQL expression, refused when compiled.

``col == other_col`` cannot raise where it is written: SQLAlchemy itself compares columns with
``==`` to test membership (``column in list_of_columns``, e.g. while compiling
``insert(Model).returning(Model)``), and relies on the result's truth value, which for ``==``
and ``!=`` compares the operands' identities.  So the comparison returns a
``RefusedComparison``: its truth value is that of the ordinary ``BinaryExpression``, and it
raises UnsupportedComparison as soon as a statement using it is compiled, so it can never run.
"""

from __future__ import annotations

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import Boolean

from ...errors import UnsupportedComparison

__all__ = ["RefusedComparison"]


class RefusedComparison(ColumnElement):
    """``binary`` (an encrypted column compared with an expression) that must never compile."""

    __visit_name__ = "sealstore_refused_comparison"
    inherit_cache = True
    _traverse_internals = [("binary", InternalTraversal.dp_clauseelement)]
    type = Boolean()

    def __init__(self, binary, message: str) -> None:
        self.binary = binary
        self.message = message

    def __bool__(self) -> bool:
        return bool(self.binary)  # what SQLAlchemy's membership tests expect


@compiles(RefusedComparison)
def _refuse(element, compiler, **kw):
    raise UnsupportedComparison(element.message)
