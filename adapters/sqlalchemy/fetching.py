"""Encrypted columns opened as the rows are fetched, chunk by chunk.

SQLAlchemy applies a type's result processor to each value after the driver's ``fetchall()``
has returned the whole result.  For an encrypted column that means every sealed buffer of the
result and every plaintext opened from it are in memory at once: the ciphertexts have gone cold
in the cache by the time they are opened, and the plaintexts land on freshly faulted pages.  On
SQLite, 100,000 rows of 100 B + 1 KiB, that cost about as much as the opening itself.

For compiled ``SELECT`` statements that return encrypted columns, this module opens those
columns inside the fetch instead: rows are fetched from the driver 256 at a time and the
columns' processors applied to them in one native loop (``sealstore.rowmap.map_columns``); each
chunk's ciphertexts are freed before the next chunk arrives.  The processors are exactly those
SQLAlchemy would have called (the type's result processor for the dialect and column type):
only the moment changes, so results, errors and every other column are the same.

How.  The first execution of a compiled statement decides, once, from the statement and the
dialect (SQLite, PostgreSQL, MySQL/MariaDB: their execution contexts leave the fetch strategy
to SQLAlchemy for a ``SELECT``).  On every execution of a statement decided yes, two things
are set on SQLAlchemy's execution context, in the ``after_cursor_execute`` event: its
``cursor_fetch_strategy`` (a wrapper around the one SQLAlchemy would use, buffered server-side
cursors and ``yield_per`` included) and its ``get_result_processor`` (the dialect hook for
context-sensitive result processing), which answers None for encrypted columns while SQLAlchemy
builds the result's metadata and hands their processors to the wrapper instead.  SQLAlchemy
caches that metadata on the compiled statement; the processors are kept there too, for the
executions that reuse it.  DML ``RETURNING`` and ``text()`` statements keep SQLAlchemy's own
processing.

Turn it off with ``execution_options(sealstore_open_on_fetch=False)`` on the engine, before the
statements it should not apply to are first run (the decision is kept per compiled statement).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, event
from sqlalchemy.engine import Engine
from sqlalchemy.engine.cursor import (
    _DEFAULT_FETCH,
    BufferedRowCursorFetchStrategy,
    ResultFetchStrategy,
)

from ...errors import InternalError, SealstoreError
from ...rowmap import map_columns
from .blind_index import BlindIndex
from .read_errors import with_primary_key
from .results import returns_types
from .tenancy import for_execution, snapshot
from .types import EncryptedType

__all__ = ["OPEN_ON_FETCH_OPTION"]

OPEN_ON_FETCH_OPTION = "sealstore_open_on_fetch"
CHUNK_ROWS = 256  # rows per driver fetch: a few hundred KiB of ciphertext stays in the cache

_DIALECTS = frozenset({"sqlite", "postgresql", "mysql", "mariadb"})
_ATTR = "_sealstore_fetch_plan"  # on the compiled statement: False, or _Plan
_NOT_YET = None  # _Plan.columns before SQLAlchemy has built the result metadata


class _Plan:
    """Which columns of a compiled statement's rows are opened at fetch, and with what.

    ``columns`` is a tuple of (index, processor) pairs once SQLAlchemy has built the result
    metadata under the collecting hook; executions that reuse the cached metadata read it."""

    __slots__ = ("columns",)

    def __init__(self):
        self.columns = _NOT_YET


def _decide(context, executemany) -> object:
    """The compiled statement's plan, or False (decided here on its first execution)."""
    compiled = context.compiled
    plan = getattr(compiled, _ATTR, None)
    if plan is not None:
        return plan
    plan = (
        _Plan()
        if not executemany
        and not context.is_crud
        and not context.is_text
        and context.dialect.name in _DIALECTS
        and getattr(compiled, "_cached_metadata", None) is None  # else built without us
        and context.execution_options.get(OPEN_ON_FETCH_OPTION, True)
        and returns_types(compiled, EncryptedType)
        else False
    )
    # setdefault: threads running a new statement at once all get the first thread's plan
    return vars(compiled).setdefault(_ATTR, plan)


@event.listens_for(Engine, "after_cursor_execute")
def _after_cursor_execute(conn, cursor, statement, parameters, context, executemany):
    if context is None or context.compiled is None:
        return
    plan = _decide(context, executemany)
    if plan is False:
        return
    # Every execution of a statement decided yes gets both, whatever it looks like now: its
    # cached metadata has no processors for the encrypted columns.  (A server-side cursor may
    # not even have a description before its first fetch.)
    fetch = _OpeningFetch(_inner_strategy(context), plan, state=snapshot(context.execution_options))
    context.cursor_fetch_strategy = fetch
    context.get_result_processor = _collector(context.get_result_processor, fetch, context)


def _inner_strategy(context) -> ResultFetchStrategy:
    """The strategy SQLAlchemy's ``_setup_result_proxy`` would pick for a SELECT."""
    strategy = context.cursor_fetch_strategy
    if strategy is _DEFAULT_FETCH and (
        context._is_server_side or context.execution_options.get("stream_results", False)
    ):
        strategy = BufferedRowCursorFetchStrategy(context.cursor, context.execution_options)
    return strategy


def _collector(get_result_processor, fetch, context):
    """The context's ``get_result_processor`` while SQLAlchemy builds the result metadata: it is
    called once per column of the cursor's description, in order."""
    index, width, columns = 0, None, []

    def collect(type_, colname, coltype):
        nonlocal index, width
        if width is None:  # the description SQLAlchemy builds from (there is one by now)
            width = len(fetch.inner.alternate_cursor_description or context.cursor.description)
        processor = get_result_processor(type_, colname, coltype)
        if processor is not None and isinstance(type_, EncryptedType):
            columns.append((index, processor))
            processor = None
        index += 1
        if index == width:  # the metadata is complete: this execution and later ones use it
            fetch.columns = fetch.plan.columns = tuple(columns)
        return processor

    return collect


class _OpeningFetch(ResultFetchStrategy):
    """SQLAlchemy's fetch strategy for one result, with the plan's columns opened on the way."""

    __slots__ = ("columns", "inner", "plan", "tenancy")

    def __init__(self, inner, plan, columns=_NOT_YET, state=None):
        self.inner, self.plan, self.columns = inner, plan, columns
        # the tenant state of the execution (tenancy.py): tenant-aware columns open under the
        # tenant the statement ran for, however late the rows are fetched
        self.tenancy = state

    @property
    def alternate_cursor_description(self):
        return self.inner.alternate_cursor_description

    def _opened(self, rows, result=None):
        if not rows:
            return rows
        columns = self.columns
        if columns is _NOT_YET:  # metadata reused from the compiled statement's cache
            columns = self.columns = self.plan.columns
            if columns is _NOT_YET:
                raise InternalError("sealstore: result metadata was built without the fetch hook")
        if not columns:
            return rows
        if self.tenancy is not None:
            columns = self.columns = for_execution(columns, self.tenancy)
            self.tenancy = None
        try:
            return map_columns(rows, columns)
        except SealstoreError:
            pass  # raised again below, outside the handler, with the failing row's primary key
        return _reopened(rows, columns, result)

    def soft_close(self, result, dbapi_cursor):
        self.inner.soft_close(result, dbapi_cursor)

    def hard_close(self, result, dbapi_cursor):
        self.inner.hard_close(result, dbapi_cursor)

    def handle_exception(self, result, dbapi_cursor, err):
        self.inner.handle_exception(result, dbapi_cursor, err)

    def yield_per(self, result, dbapi_cursor, num):
        self.inner.yield_per(result, dbapi_cursor, num)
        if result.cursor_strategy is not self:  # the inner strategy handed over to a buffered one
            result.cursor_strategy = _OpeningFetch(
                result.cursor_strategy, self.plan, self.columns, self.tenancy
            )

    def fetchone(self, result, dbapi_cursor, hard_close=False):
        row = self.inner.fetchone(result, dbapi_cursor, hard_close)
        return None if row is None else self._opened((row,), result)[0]

    def fetchmany(self, result, dbapi_cursor, size=None):
        return self._opened(self.inner.fetchmany(result, dbapi_cursor, size), result)

    def fetchall(self, result, dbapi_cursor):
        rows, fetchmany = [], self.inner.fetchmany
        while True:
            # the inner strategy soft-closes the result at the end, which replaces this strategy
            # (a buffered one does so while it still returns its last rows)
            chunk = fetchmany(result, dbapi_cursor, CHUNK_ROWS)
            try:
                rows += self._opened(chunk, result)
            except BaseException:  # as after a fetchall: the cursor is done with
                result._soft_close()
                raise
            if not chunk or result.cursor_strategy is not self:
                return rows


def _reopened(rows, columns, result) -> list:
    """``rows`` opened one at a time (the failure path): the first value that fails raises its
    error again, naming its row's primary key when the result holds it."""
    out = []
    for row in rows:
        try:
            out.append(map_columns((row,), columns)[0])
            continue
        except SealstoreError:
            pass
        for index, process in columns:  # which column of the row it is
            try:
                process(row[index])
            except SealstoreError as exc:
                failure = exc
                break
        else:  # the row opened this time (a keyring registered meanwhile)
            out.append(map_columns((row,), columns)[0])
            continue
        key = _primary_key(row, index, result)
        raise failure if key is None else with_primary_key(failure, key)
    return out


def _primary_key(row, index, result) -> tuple | None:
    """The primary key of the table (or alias) that result column ``index`` comes from, when
    each of its columns is in the raw ``row`` (and none is itself encrypted), converted as the
    result would convert it; else None."""
    context = getattr(result, "context", None)
    entries = getattr(getattr(context, "compiled", None), "_result_columns", None)
    if not entries or len(entries) != len(row):
        return None
    source = next((o.table for o in entries[index][2] if isinstance(o, Column)), None)
    names = [c.name for c in getattr(source, "primary_key", ())]
    found: dict[str, tuple[int, Any]] = {}
    for position, entry in enumerate(entries):
        for obj in entry[2]:
            if isinstance(obj, Column) and obj.table is source and obj.name in names:
                found.setdefault(obj.name, (position, obj))
    if not names or len(found) != len(names):
        return None
    dialect = getattr(context, "dialect", None)
    values = []
    for name in names:
        position, obj = found[name]
        if isinstance(obj.type, (EncryptedType, BlindIndex)):
            return None
        process = obj.type.dialect_impl(dialect).result_processor(dialect, None)
        values.append(process(row[position]) if process is not None else row[position])
    return tuple(values)
