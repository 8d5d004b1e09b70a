"""Blind-index lookups whose value arrives at execution: ``bindparam()`` and ``lambda_stmt()``.

``User.email == "a@x.org"`` is rewritten when it is written, to ``email_index IN (<the index
values of "a@x.org" under every lookup key>)``.  With ``User.email == bindparam("e")``, or a
closure variable inside ``lambda_stmt()``, the value is only known when the statement runs, and
SQLAlchemy may run a cached compiled form of it.  So the comparison becomes ``email_index IN
(:lookup)`` where ``:lookup`` is an :class:`IndexLookup`, an expanding parameter named after
its source parameter; an engine ``before_execute`` hook finds it among the statement's bound
parameters (the statement's cache key, which SQLAlchemy computes anyway and memoizes) and
passes the index values of the source's value for this execution.  A ``lambda_stmt()``'s cache
key lists only its closure variables, so its lookups are found in the resolved statement, once
per lambda cache key.

Literal lookups (``User.email == "a@x.org"``) carry their index values in an
:class:`IndexValues` parameter, so the same hook sees every lookup a statement makes through a
blind index and refuses one through an index that is not filled yet (``index_state.py``).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.lambdas import StatementLambdaElement

from ...errors import BlindIndexError
from .index_state import require_complete

__all__ = ["IndexLookup", "IndexValues"]


class IndexLookup(BindParameter[Any]):
    """The index values of the parameter ``source`` (one value, or a list with ``many``)."""

    inherit_cache: bool = True

    def __init__(self, source: BindParameter[Any], index: Any, many: bool) -> None:
        itype = index.type
        tail = re.sub(r"\W+", "_", str(source.key)).strip("_")
        super().__init__(
            f"{tail}__sealstore_{itype.table}_{itype.column}", None, type_=itype, expanding=True,
        )  # fmt: skip
        self.source_key: str = source.key
        self.named: bool = not source.unique
        self.default: Any = source.value  # a named parameter's value when the execution gives none
        self.many = many


class IndexValues(BindParameter[Any]):
    """The index values of literal lookup values (a list with ``expanding``, else one value)."""

    inherit_cache: bool = True

    def __init__(self, values: list[bytes], itype: Any, expanding: bool) -> None:
        super().__init__(
            None, values if expanding else values[0], type_=itype, unique=True,
            expanding=expanding,
        )  # fmt: skip


_MARKS = (IndexLookup, IndexValues)


def _values(lookup: IndexLookup, value: Any) -> list[bytes]:
    index: Any = lookup.type  # a BlindIndex (blind_index.py imports this module)
    items = list(value) if lookup.many else [value]
    if lookup.many and isinstance(value, (str, bytes)):
        raise BlindIndexError(f"{index.table}.{index.source}: in_() takes a list of values")
    if any(item is None for item in items):
        raise BlindIndexError(
            f"a lookup of {index.table}.{index.source} got None: NULL never compares "
            "equal in SQL; use .is_(None)"
        )
    return [c for item in items for c in index.candidates(item)]


_LAMBDA_LOOKUPS: dict[
    Any, list[Any]
] = {}  # lambda cache key -> its IndexLookups and IndexValues (bounded, see _in_lambda)
_LAMBDA_MEMO_SIZE = 512


def _in_lambda(elem: Any, key: Any) -> list[Any]:
    """The IndexLookups and IndexValues of a lambda statement.  Its cache key lists only the closure
    variables' parameters, so the resolved statement is searched, once per lambda cache key."""
    try:
        return _LAMBDA_LOOKUPS[key.key]
    except KeyError:
        pass
    found = [b for b in visitors.iterate(elem._resolved) if type(b) in _MARKS]
    if len(_LAMBDA_LOOKUPS) >= _LAMBDA_MEMO_SIZE:
        _LAMBDA_LOOKUPS.clear()
    _LAMBDA_LOOKUPS[key.key] = found
    return found


def _before_execute(
    conn: Any, elem: Any, multiparams: Any, params: Any, execution_options: Any
) -> Any:
    keyed = getattr(elem, "_generate_cache_key", None)
    key = keyed() if keyed is not None else None
    if key is None:
        return elem, multiparams, params
    marks = [b for b in key.bindparams if type(b) in _MARKS]
    if not marks and isinstance(elem, StatementLambdaElement):
        marks = _in_lambda(elem, key)
    if not marks:
        return elem, multiparams, params
    require_complete(conn, [b.type for b in marks], execution_options)
    lookups = [b for b in marks if type(b) is IndexLookup]
    if not lookups:
        return elem, multiparams, params
    if multiparams:
        raise BlindIndexError("blind-index lookups with bound parameters take one parameter set")
    current = {b.key: b for b in key.bindparams}
    params = dict(params or {})
    for lookup in lookups:
        if lookup.named:
            value = params.get(lookup.source_key, lookup.default)
        else:  # a lambda's closure variable: its parameter carries this execution's value
            value = current[lookup.source_key].value
        params[lookup.key] = _values(lookup, value)
    return elem, multiparams, params


event.listen(Engine, "before_execute", _before_execute, retval=True)
