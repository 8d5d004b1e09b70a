"""Which database objects belong to sealstore, so an application's Alembic autogenerate leaves
them alone.

sealstore's tables (``sealstore_keys``, ``sealstore_jobs``, ``sealstore_job_batches``,
``sealstore_object_prefixes``, listed in :mod:`sealstore.migrations.schema`, and the tables of
earlier revisions, ``RETIRED_TABLES``) are created by
sealstore's own revisions (branch ``sealstore``) or by ``create_tables()``.  An application's
models do not declare them, so its autogenerate sees them in the database only and proposes
``op.drop_table('sealstore_keys')``: running that destroys the key registry.

* :func:`include_name` / :func:`include_object` are Alembic's filter hooks: sealstore's tables,
  and the indexes, constraints and columns of those tables, are neither compared nor rendered.
* :func:`install` registers the same rule on a ``Rewriter`` (sealstore's
  ``process_revision_directives`` rewriter has it): any operation on those tables is removed
  from a generated revision, whatever filters ``env.py`` sets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic.operations import ops as alembic_ops

from ..schema import RETIRED_TABLES, metadata

if TYPE_CHECKING:
    from alembic.autogenerate.rewriter import Rewriter
    from alembic.runtime.environment import NameFilterParentNames, NameFilterType
    from sqlalchemy.sql.schema import SchemaItem

__all__ = ["SEALSTORE_TABLES", "include_name", "include_object", "install", "is_sealstore_table"]

#: The names of the tables sealstore keeps in an application's database.
SEALSTORE_TABLES: frozenset[str] = frozenset(metadata.tables) | RETIRED_TABLES


def is_sealstore_table(name: str | None) -> bool:
    """True for the name of one of sealstore's own tables (in any schema)."""
    return name in SEALSTORE_TABLES


def include_name(
    name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
) -> bool:
    """Alembic ``include_name`` hook: skip sealstore's tables and everything inside them."""
    if type_ == "table":
        return not is_sealstore_table(name)
    return not is_sealstore_table(parent_names.get("table_name"))


def _table_of(obj):
    if obj is None:
        return None
    table = getattr(obj, "table", None)  # Column, Index, constraints
    if table is not None:
        return getattr(table, "name", None)
    return getattr(obj, "name", None)  # Table


def include_object(
    obj: SchemaItem,
    name: str | None,
    type_: NameFilterType,
    reflected: bool,
    compare_to: SchemaItem | None,
) -> bool:
    """Alembic ``include_object`` hook: skip sealstore's tables, their columns, indexes and
    constraints, whether they come from the database or from the application's metadata."""
    if type_ == "table":
        return not is_sealstore_table(name)
    return not (is_sealstore_table(_table_of(obj)) or is_sealstore_table(_table_of(compare_to)))


def _skip_sealstore_table(context, revision, op):
    """Rewriter step: drop a table-level operation on one of sealstore's tables."""
    return [] if is_sealstore_table(op.table_name) else op


_TABLE_OPS = (
    alembic_ops.CreateTableOp,
    alembic_ops.DropTableOp,
    alembic_ops.ModifyTableOps,  # its column, index and constraint operations
    alembic_ops.CreateIndexOp,
    alembic_ops.DropIndexOp,
    alembic_ops.CreateTableCommentOp,
    alembic_ops.DropTableCommentOp,
)


def install(rewriter: Rewriter) -> None:
    """Make ``rewriter`` (an ``alembic.autogenerate.rewriter.Rewriter``) remove every operation
    on sealstore's tables from the revisions it processes."""
    for cls in _TABLE_OPS:
        rewriter.rewrites(cls)(_skip_sealstore_table)
