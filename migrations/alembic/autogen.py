"""Alembic autogenerate settings for an application that uses sealstore, in one call.

In the application's ``env.py``::

    from sealstore.migrations.alembic.autogen import alembic_options

    context.configure(connection=connection, target_metadata=target_metadata,
                      **alembic_options())

which sets

* ``include_name`` / ``include_object``: sealstore's tables (the key registry, the job and S3
  prefix tables) and their indexes are left out of the comparison, so a first autogenerate
  never proposes ``op.drop_table('sealstore_keys')`` (:mod:`sealstore.migrations.alembic.ownership`);
* ``process_revision_directives``: sealstore's rewriter (``String`` -> encrypted type becomes
  ``op.encrypt_column``; it also removes any operation on sealstore's tables);
* ``render_item``: a migration that renders a sealstore type imports its module, so the
  generated file runs without editing the template.

Hooks of the application's own are passed as keyword arguments and run as well: the filters
must both include an object, the application's ``render_item`` is asked first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from ...adapters.sqlalchemy import BlindIndex, EncryptedType
from . import ownership
from .ops import rewriter

if TYPE_CHECKING:
    from alembic.autogenerate.api import AutogenContext
    from alembic.runtime.environment import (
        IncludeNameFn,
        IncludeObjectFn,
        ProcessRevisionDirectiveFn,
        RenderItemFn,
    )

__all__ = ["AlembicOptions", "alembic_options", "render_item"]

_TYPES_MODULE = "sealstore.adapters.sqlalchemy"


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Alembic ``render_item`` hook: a sealstore type renders as
    ``sealstore.adapters.sqlalchemy.<repr>`` and adds ``import sealstore.adapters.sqlalchemy``
    to the migration's imports; anything else renders as Alembic's default (``False``)."""
    if type_ != "type" or not isinstance(obj, (EncryptedType, BlindIndex)):
        return False
    if autogen_context.imports is not None:
        autogen_context.imports.add(f"import {_TYPES_MODULE}")
    if getattr(obj, "_variant_mapping", None):
        return False  # Alembic renders each variant (and calls this hook for each)
    return f"{_TYPES_MODULE}.{obj!r}"


def _both(ours, theirs):
    if theirs is None:
        return ours

    def include(*args):
        return ours(*args) and theirs(*args)

    return include


def _render_first(theirs):
    if theirs is None:
        return render_item

    def render(type_, obj, autogen_context):
        rendered = theirs(type_, obj, autogen_context)
        return rendered if rendered is not False else render_item(type_, obj, autogen_context)

    return render


def _directives_then(theirs):
    if theirs is None:
        return rewriter

    def process(context, revision, directives):
        rewriter(context, revision, directives)
        theirs(context, revision, directives)

    return process


class AlembicOptions(TypedDict):
    """The keyword arguments :func:`alembic_options` gives ``context.configure()``."""

    include_name: IncludeNameFn
    include_object: IncludeObjectFn
    render_item: RenderItemFn
    process_revision_directives: ProcessRevisionDirectiveFn


def alembic_options(
    *,
    include_name: IncludeNameFn | None = None,
    include_object: IncludeObjectFn | None = None,
    render_item: RenderItemFn | None = None,
    process_revision_directives: ProcessRevisionDirectiveFn | None = None,
) -> AlembicOptions:
    """Keyword arguments for ``context.configure()`` (see the module docstring); the optional
    arguments are the application's own hooks, combined with sealstore's."""
    return {
        "include_name": _both(ownership.include_name, include_name),
        "include_object": _both(ownership.include_object, include_object),
        "render_item": _render_first(render_item),
        "process_revision_directives": _directives_then(process_revision_directives),
    }
