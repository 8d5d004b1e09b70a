"""Which database errors are worth retrying, the retry loop, and errors without parameters.

A *transient* error is one the same transaction may not meet again: a deadlock or a
serialization failure, a lock wait that timed out, a connection that dropped or a server that
is restarting.  They are recognised whatever layer raised them -- SQLAlchemy's wrappers
(``DBAPIError.connection_invalidated``, ``.orig``) or the driver itself, which is what
:func:`sealstore.migrations.rotation.cas._execute_binary` meets on psycopg 3's raw cursor -- by SQLSTATE
(psycopg 3, psycopg2, asyncpg), MySQL error number (PyMySQL, mysqlclient) or SQLite result
code.  A driver ``OperationalError`` that carries no code at all is a connection failure.

:class:`RetryPolicy` runs one transaction again after a transient error, with exponential
backoff and jitter, until a time budget (60 s by default: enough for a PostgreSQL restart and
its crash recovery) is spent; then :class:`~sealstore.errors.RetryBudgetExhausted`.

:func:`scrubbed` turns every other database error raised by sealstore's own statements into a
:class:`~sealstore.errors.DatabaseOperationFailed` that names the step and the driver's error
class and code, and drops the original: SQLAlchemy's message carries the bound parameters
(plaintext, sealed values), and so does the text of some driver errors.
"""

from __future__ import annotations

from typing import Any, TypeVar

import logging
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import DatabaseOperationFailed, RetryBudgetExhausted, SealstoreError

__all__ = [
    "DEFAULT_BUDGET",
    "RetryPolicy",
    "describe",
    "first_line",
    "is_transient",
    "safe_text",
    "scrubbed",
]

log: logging.Logger = logging.getLogger("sealstore.migrations")

_T = TypeVar("_T")

DEFAULT_BUDGET = 60.0

#: serialization_failure, deadlock_detected, lock_not_available, admin/crash shutdown,
#: cannot_connect_now (recovery), too_many_connections, idle_session_timeout
_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300", "57P05"})
_SQLSTATE_CLASSES = ("08",)  # connection exception
#: lock wait timeout, deadlock, too many connections, server shutdown, connection killed,
#: can't connect, server gone away, lost connection, disconnected for inactivity
_MYSQL_CODES = frozenset({1205, 1213, 1040, 1053, 1927, 2002, 2003, 2006, 2013, 2055, 4031})
_SQLITE_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
#: libpq connection failures carry no SQLSTATE in psycopg; these words mean the server
#: answered and refused (wrong database, role or password), which no retry fixes
_PERMANENT_CONNECT = (
    "does not exist",
    "authentication failed",
    "no pg_hba.conf entry",
    "permission denied",
    "invalid connection option",
    "invalid dsn",
)
_DRIVERS = ("psycopg", "psycopg2", "asyncpg", "pymysql", "MySQLdb", "mysql", "sqlite3")


def _chain(exc: BaseException):
    """``exc``, the driver error SQLAlchemy wraps (``.orig``) and the causes, each once."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo and len(seen) < 8:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [getattr(e, "orig", None), e.__cause__]


def _sqlstate(e) -> str | None:
    for attr in ("sqlstate", "pgcode"):
        code = getattr(e, attr, None)
        if isinstance(code, str) and len(code) == 5:
            return code
    return None


def _mysql_code(e) -> int | None:
    root = type(e).__module__.split(".")[0]
    if root in ("pymysql", "MySQLdb", "mysql") and e.args and isinstance(e.args[0], int):
        return e.args[0]
    return None


def _is_driver_operational(e) -> bool:
    root = type(e).__module__.split(".")[0]
    names = {c.__name__ for c in type(e).__mro__}
    return root in _DRIVERS and "OperationalError" in names


def _one_is_transient(e) -> bool | None:
    """True / False when ``e`` decides, None when it says nothing (look further down)."""
    if getattr(e, "connection_invalidated", False):
        return True
    if isinstance(e, sqlite3.Error):
        code = getattr(e, "sqlite_errorcode", None)
        if code is None:
            return "locked" in str(e)
        return (code & 0xFF) in _SQLITE_CODES
    state = _sqlstate(e)
    if state is not None:
        return state in _SQLSTATES or state.startswith(_SQLSTATE_CLASSES)
    code = _mysql_code(e)
    if code is not None:
        return code in _MYSQL_CODES
    if _is_driver_operational(e):  # no code: the connection failed or dropped...
        text = str(e).lower()  # ...unless the server refused it for good (libpq's text)
        return not any(p in text for p in _PERMANENT_CONNECT)
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True  # asyncpg: the socket itself
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether running the same transaction again may succeed (see the module docstring)."""
    if isinstance(exc, SealstoreError):
        return False
    for e in _chain(exc):
        verdict = _one_is_transient(e)
        if verdict is not None:
            return verdict
    return False


def describe(exc: BaseException) -> str:
    """The driver's error class and code, e.g. ``psycopg.errors.DeadlockDetected (SQLSTATE
    40P01)``; never the message, which may quote a value."""
    errors = list(_chain(exc))
    e = errors[-1] if len(errors) > 1 else exc
    for cand in errors:
        if type(cand).__module__.split(".")[0] in _DRIVERS:
            e = cand
            break
    kind = type(e)
    name = kind.__qualname__
    module = kind.__module__
    out = name if module == "builtins" else f"{module}.{name}"
    state, code = _sqlstate(e), _mysql_code(e)
    if state:
        out += f" (SQLSTATE {state})"
    elif code is not None:
        out += f" (error {code})"
    elif isinstance(e, sqlite3.Error) and getattr(e, "sqlite_errorname", None):
        out += f" ({getattr(e, 'sqlite_errorname')})"
    return out


@dataclass(frozen=True)
class RetryPolicy:
    """Retry one transaction after transient errors for up to ``budget`` seconds.

    Waits ``first_delay`` doubled after each failure up to ``max_delay``, each wait drawn
    uniformly from its upper half (jitter, so workers that failed together do not retry
    together).  ``sleep`` and ``clock`` are for tests.
    """

    budget: float = DEFAULT_BUDGET
    first_delay: float = 0.05
    max_delay: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if not self.budget >= 0 or not self.first_delay > 0 or not self.max_delay > 0:
            raise ValueError("RetryPolicy: budget >= 0, first_delay > 0, max_delay > 0")

    def call(self, fn: Callable[[], _T], what: str) -> _T:
        """``fn()``, run again after each transient error while the budget lasts."""
        start = self.clock()
        attempt = 0
        while True:
            failure = None
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified right here
                if not is_transient(exc):
                    raise
                failure = describe(exc)
            attempt += 1
            elapsed = self.clock() - start
            ceiling = min(self.max_delay, self.first_delay * 2 ** min(attempt - 1, 30))
            delay = random.uniform(ceiling / 2, ceiling)
            if elapsed + delay > self.budget:
                err = RetryBudgetExhausted(
                    f"{what}: {failure} after {attempt} attempts in {elapsed:.1f}s "
                    f"(retry budget {self.budget:g}s)"
                )
                err.attempts, err.elapsed = attempt, elapsed
                raise err
            log.warning("%s: %s; retry %d in %.2fs", what, failure, attempt, delay)
            self.sleep(delay)


def first_line(exc: BaseException) -> str:
    """The first line of the driver's message (SQLAlchemy's own text stripped): for errors of
    statements that carry no values (connecting, a missing table)."""
    e = getattr(exc, "orig", None) or exc
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def safe_text(exc: BaseException) -> str:
    """The driver's first message line for errors that never quote values (missing table,
    lost connection...); nothing for integrity and data errors (duplicate entry 'x',
    invalid input syntax: "x")."""
    for e in _chain(exc):
        if type(e).__module__.split(".")[0] in _DRIVERS:
            names = {c.__name__ for c in type(e).__mro__}
            if names & {"IntegrityError", "DataError"} or "InvalidTextRepresentation" in names:
                return ""
            line = first_line(e)
            return f": {line}" if line and "'" not in line else ""
    return ""


def scrubbed(what: str, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)``; a database error of sealstore's own statements comes out as a
    DatabaseOperationFailed without its parameters (see the module docstring).

    SealstoreError and non-database errors pass through.  The new error has neither
    ``__cause__`` nor ``__context__``: it is raised after the ``except`` block.
    """
    from sqlalchemy.exc import SQLAlchemyError

    err = None
    try:
        return fn(*args, **kwargs)
    except SealstoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - database errors, whatever the driver
        if not isinstance(exc, SQLAlchemyError) and not any(
            type(e).__module__.split(".")[0] in _DRIVERS for e in _chain(exc)
        ):
            raise
        err = DatabaseOperationFailed(f"{what}: {describe(exc)}{safe_text(exc)}")
    raise err
