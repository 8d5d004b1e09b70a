"""Binary result format on psycopg 3 for statements that return encrypted columns.

In PostgreSQL's text protocol a ``bytea`` value travels hex-encoded, twice its size, and psycopg
decodes it on the client: for the benchmark's 100 B + 1 KiB sealed columns that is about 2.8 us
a row, more than opening both values.  In binary format the bytes come as they are.  psycopg
picks the result format per statement (``cursor.format``), for every column at once, so this
module switches a statement to binary only when that changes nothing else it returns:

* the statement is a compiled SQLAlchemy statement whose result columns include an encrypted
  column or a blind index, run through the ``psycopg`` driver (``postgresql+psycopg`` or
  ``postgresql+psycopg_async``), not executemany, on a cursor that binds on the server (not
  ``cursor_factory=psycopg.ClientCursor``, which has no binary results);
* its previous execution (in text format, the default) returned only columns whose PostgreSQL
  types load to the same Python values in both formats (``_SAME_IN_BINARY``: integers, bytea,
  boolean, numeric, float8, text/varchar/char, date/time/timestamp(tz), uuid).  Anything else,
  such as an extension type like ``citext`` (which psycopg would load as bytes in binary),
  float4, json or arrays, keeps the statement in text format.

The decision is learnt from the first execution's ``cursor.description`` and kept on
SQLAlchemy's compiled statement, so it costs two event calls per statement and nothing per row.
(Changing a column's type under a running application invalidates it, as it does SQLAlchemy's
own caches: restart after such a migration.)  Turn it off for an engine or a connection with
``execution_options(sealstore_binary_results=False)``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["BINARY_RESULTS_OPTION"]

BINARY_RESULTS_OPTION = "sealstore_binary_results"

# PostgreSQL type OIDs that psycopg loads to equal Python values from either format
_SAME_IN_BINARY = frozenset({
    16,  # bool
    17,  # bytea
    20, 21, 23, 26,  # int8, int2, int4, oid
    25, 1042, 1043,  # text, bpchar, varchar
    701,  # float8 (float4 is not: text rounds it to its shortest decimal)
    1700,  # numeric
    1082, 1083, 1114, 1184,  # date, time, timestamp, timestamptz
    2950,  # uuid
})  # fmt: skip

_ATTR = "_sealstore_result_format"  # on the compiled statement: None (undecided), True, False
_UNDECIDED = None


def returns_types(compiled: Any, classes: Any) -> bool:
    """Whether a compiled statement's result columns include a type of one of ``classes``."""
    columns = getattr(compiled, "_result_columns", None) or ()
    return any(isinstance(entry[3], classes) for entry in columns)


def _returns_sealed(compiled: Any) -> bool:
    from .blind_index import BlindIndex
    from .types import EncryptedType

    return returns_types(compiled, (EncryptedType, BlindIndex))


def _eligible(conn: Any, context: Any, executemany: Any) -> Any:
    """The compiled statement when this execution may use binary results, else None."""
    if executemany or context is None or context.dialect.driver != "psycopg":
        return None
    compiled = context.compiled
    if compiled is None or not context.execution_options.get(BINARY_RESULTS_OPTION, True):
        return None
    return compiled


@event.listens_for(Engine, "before_cursor_execute")
def _before_cursor_execute(
    conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any, executemany: Any
) -> Any:
    compiled = _eligible(conn, context, executemany)
    if compiled is None:
        return
    decision = getattr(compiled, _ATTR, _UNDECIDED)
    if decision is _UNDECIDED and not _returns_sealed(compiled):
        decision = False
        setattr(compiled, _ATTR, False)
    if decision is True:
        target = _psycopg_cursor(cursor)
        if target is not None:
            from psycopg.pq import Format

            target.format = Format.BINARY


def _psycopg_cursor(cursor: Any) -> Any:
    """The psycopg cursor itself (SQLAlchemy's asyncio adapter wraps it in a slotted object, as
    ``._cursor``, which forwards reads but not writes of attributes), or None when it cannot
    return binary results."""
    import psycopg

    for candidate in (cursor, getattr(cursor, "_cursor", None)):
        if isinstance(candidate, (psycopg.ClientCursor, psycopg.AsyncClientCursor)):
            return None  # client-side binding has no binary results (cursor_factory=ClientCursor)
        if isinstance(candidate, (psycopg.Cursor, psycopg.AsyncCursor)):
            return candidate
    return None


@event.listens_for(Engine, "after_cursor_execute")
def _after_cursor_execute(
    conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any, executemany: Any
) -> Any:
    compiled = _eligible(conn, context, executemany)
    if compiled is None or getattr(compiled, _ATTR, _UNDECIDED) is not _UNDECIDED:
        return
    description = cursor.description
    if not description:
        return  # nothing returned this time: decide on a later execution
    setattr(compiled, _ATTR, all(col.type_code in _SAME_IN_BINARY for col in description))
