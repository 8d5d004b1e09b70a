"""The database key registry: the ``sealstore_keys`` table and the key source that uses it.

Every application server reading the same table sees the same keyring.  Material is always
stored wrapped (KMS or a master key); the table holds ids, suites, states, timestamps and the
wrapped blobs, nothing else.  :data:`sealstore_keys` is the single definition of the table:
the migrations import it (or :func:`sealstore_keys_columns` for ``op.create_table``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from datetime import datetime, timezone

from ..extras import require

require("sqlalchemy", "the database key source (sealstore.keysources.database)", ("sqlalchemy",))

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from ..errors import InvalidKeyring, KeySourceError
from ..format import Suite
from ..redact import mask_url
from .metadata import StoreMeta
from ..keyring import KeyState
from .base import KeyRecord, KeySource
from ..wrapping import Wrapper

log: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "TABLE_NAME",
    "DatabaseKeySource",
    "metadata",
    "sealstore_keys",
    "sealstore_keys_columns",
]

TABLE_NAME = "sealstore_keys"
# The row holding the store's authenticated-metadata record (sealstore.keysources.metadata), outside the
# key id range: suite "metadata", state "format-2", wrapped_key = wrapped metadata key || tag.
METADATA_ROW = -1
_TAG_SIZE = 32


def sealstore_keys_columns() -> list[Column[Any]]:
    """Fresh Column objects of the ``sealstore_keys`` table (for ``op.create_table``)."""
    return [
        Column("key_id", BigInteger, primary_key=True, autoincrement=False),  # 0..2**32-1
        Column("suite", String(16), nullable=False),  # "AEGIS-128X4", ...
        Column("state", String(16), nullable=False),  # primary | active | retired | destroyed
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("rotated_at", DateTime(timezone=True), nullable=True),
        Column("wrapped_key", LargeBinary, nullable=True),  # NULL once destroyed
    ]


metadata: MetaData = MetaData()
sealstore_keys: Table = Table(TABLE_NAME, metadata, *sealstore_keys_columns())


class DatabaseKeySource(KeySource):
    """A keyring in the ``sealstore_keys`` table of ``engine`` (an Engine or a URL)."""

    def __init__(self, engine: Engine | str, wrapper: Wrapper | None) -> None:
        if wrapper is None:
            raise ValueError("the database registry stores wrapped keys only: give a wrapper")
        super().__init__(wrapper)
        self.engine: Engine = _engine(engine) if isinstance(engine, str) else engine
        self._tx = threading.local()  # .conn: the locked transaction of this thread, if any

    def __repr__(self) -> str:
        # SQLAlchemy's hide_password masks the user-info password only, not ?password=...
        url = mask_url(self.engine.url.render_as_string(hide_password=False))
        return f"DatabaseKeySource({url!r})"

    __str__ = __repr__

    @contextlib.contextmanager
    def _database_errors(self) -> Iterator[None]:
        """A driver's error (cannot connect, cannot open the SQLite file, a statement refused)
        as a KeySourceError naming its class and code, never the statement's parameters."""
        try:
            yield
        except DBAPIError as exc:
            raise KeySourceError(f"{self}: the database failed: {_driver_error(exc)}") from None

    def create_table(self) -> None:
        """Create ``sealstore_keys`` if missing (applications normally use the migration)."""
        with self._database_errors():
            metadata.create_all(self.engine, tables=[sealstore_keys])

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Connection]:
        """The locked transaction's connection inside :meth:`_exclusive`, else a new one."""
        conn = getattr(self._tx, "conn", None)
        if conn is not None:
            yield conn
        else:
            with self.engine.connect() as conn:
                yield conn

    @contextlib.contextmanager
    def _exclusive(self, *, create: bool = False) -> Iterator[None]:
        """One transaction holding the registry's write lock: ``BEGIN IMMEDIATE`` on SQLite,
        ``LOCK TABLE ... SHARE ROW EXCLUSIVE`` on PostgreSQL (readers are not blocked), a
        ``GET_LOCK`` named lock on MySQL/MariaDB (row locks there deadlock with the inserts),
        ``SELECT ... FOR UPDATE`` of every row elsewhere.  Reads and writes inside it go
        through this transaction; it commits when the block ends, rolls back on an error."""
        with self._database_errors():
            if create:
                self.create_table()
            elif not inspect(self.engine).has_table(TABLE_NAME):
                raise KeySourceError(
                    f"{self}: table {TABLE_NAME} does not exist; run the migration"
                )
            with self.engine.connect() as conn:
                unlock = _lock_registry(conn)
                self._tx.conn = conn
                try:
                    yield
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
                finally:
                    self._tx.conn = None
                    unlock()

    def exists(self) -> bool:
        with self._database_errors():
            if not inspect(self.engine).has_table(TABLE_NAME):
                return False
            with self._connection() as conn:
                return bool(conn.execute(select(func.count()).select_from(sealstore_keys)).scalar())

    def _read(self) -> list[KeyRecord]:
        with self._database_errors():
            in_tx = getattr(self._tx, "conn", None) is not None
            if not in_tx and not inspect(self.engine).has_table(TABLE_NAME):
                raise KeySourceError(
                    f"{self}: table {TABLE_NAME} does not exist; run the migration"
                )
            try:
                with self._connection() as conn:
                    rows = conn.execute(
                        select(sealstore_keys).order_by(sealstore_keys.c.created_at)
                    ).all()
            except _CONVERSION_ERRORS as exc:  # a driver or SQLAlchemy converter refused a value
                raise KeySourceError(
                    f"{self}: a row of {TABLE_NAME} holds a value its column's type cannot hold "
                    f"({type(exc).__name__}); the table was edited outside sealstore"
                ) from None
            if not rows:
                raise KeySourceError(f"{self}: no keys; run `sealstore keys init` first")
            meta = [r for r in rows if _is_int(r.key_id) and r.key_id == METADATA_ROW]
            rows = [r for r in rows if not (_is_int(r.key_id) and r.key_id == METADATA_ROW)]
            if not rows:
                raise KeySourceError(f"{self}: no keys; run `sealstore keys init` first")
            if len(meta) > 1:
                raise KeySourceError(f"{self}: {len(meta)} metadata rows (key_id -1); expected one")
            fmt = 2 if meta else 1
            if meta:
                blob = meta[0].wrapped_key
                if (meta[0].suite, meta[0].state) != ("metadata", "format-2"):
                    raise KeySourceError(
                        f"{self}: the metadata row (key_id -1) is not one sealstore wrote (its suite "
                        "and state must be 'metadata' and 'format-2'); the table was edited outside "
                        "sealstore"
                    )
                if not isinstance(blob, (bytes, bytearray, memoryview)):
                    raise KeySourceError(
                        f"{self}: the metadata row (key_id -1) has no wrapped_key bytes "
                        f"({type(blob).__name__}); the table was edited outside sealstore"
                    )
                blob = bytes(blob)
                self._stored_meta = StoreMeta(2, blob[:-_TAG_SIZE] or None, blob[-_TAG_SIZE:])
            else:
                self._stored_meta = StoreMeta(1)
            out = [self._record(row, fmt) for row in rows]
            log.debug("read %d key rows from %s (store format %d)", len(out), self, fmt)
            return out

    def _record(self, row: Any, fmt: int) -> KeyRecord:
        """One row as a KeyRecord; any value of the wrong type or range is a KeySourceError
        naming the row and the column, never the value of ``wrapped_key``."""
        kid = row.key_id
        where = f"key {kid:08x}" if _is_int(kid) and 0 <= kid <= 0xFFFFFFFF else "a row"
        try:
            if not isinstance(row.suite, str):
                raise ValueError(f"suite: must be text, not {type(row.suite).__name__}")
            if not isinstance(row.state, str):
                raise ValueError(f"state: must be text, not {type(row.state).__name__}")
            wrapped = row.wrapped_key
            if wrapped is not None and not isinstance(wrapped, (bytes, bytearray, memoryview)):
                raise ValueError(f"wrapped_key: must be bytes, not {type(wrapped).__name__}")
            return KeyRecord(
                key_id=kid,
                suite=Suite.parse(row.suite),
                state=KeyState(row.state),
                created_at=row.created_at,
                rotated_at=row.rotated_at,
                wrapped=bytes(wrapped) if wrapped is not None else None,
                wrap_format=fmt,
            )
        except _CONVERSION_ERRORS as exc:
            raise KeySourceError(f"{self}: {where} of {TABLE_NAME}: {_short(exc)}") from None

    def _write(self, records: list[KeyRecord], *, create: bool, meta: StoreMeta) -> None:
        with self._database_errors():
            t = sealstore_keys
            with self._connection() as conn:
                existing = set(conn.execute(select(t.c.key_id)).scalars())
                if create and existing:
                    raise KeySourceError(
                        f"{self} already holds a keyring; refusing to overwrite it"
                    )
                if meta.fmt >= 2:
                    _put_metadata(conn, meta, METADATA_ROW in existing)
                for r in records:
                    values = {
                        "suite": str(r.suite),
                        "state": r.state.value,
                        "created_at": r.created_at,
                        "rotated_at": r.rotated_at,
                        "wrapped_key": r.wrapped,
                    }
                    if r.key_id in existing:
                        conn.execute(t.update().where(t.c.key_id == r.key_id).values(**values))
                    else:
                        conn.execute(t.insert().values(key_id=r.key_id, **values))
                primaries = conn.execute(
                    select(func.count()).select_from(t).where(t.c.state == KeyState.PRIMARY.value)
                ).scalar()
                if primaries != 1:  # a concurrent rotation on another server: roll back
                    raise InvalidKeyring(
                        f"{self}: writing would leave {primaries} primary keys (concurrent rotation?); "
                        "refresh the keyring and retry"
                    )
            log.debug("wrote %d key rows to %s (store format %d)", len(records), self, meta.fmt)


# what converting a stored value can raise when it is not of its column's type (SQLite keeps
# any value in any column): the date parser's ValueError, TypeError on a number, ...
_CONVERSION_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, UnicodeError)


def _driver_error(exc: DBAPIError) -> str:
    """The driver's error class, its SQLSTATE or code, and for a connection-level error
    (OperationalError) the first line of the driver's message, which holds no parameters."""
    orig = exc.orig
    name = type(orig).__name__ if orig is not None else type(exc).__name__
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    args = getattr(orig, "args", ())
    if code is None and args and isinstance(args[0], int):  # MySQL/MariaDB drivers
        code = args[0]
    out = name + (f" [{code}]" if code else "")
    if isinstance(exc, OperationalError) and orig is not None:
        line = (str(orig).strip().splitlines() or [""])[0]
        out += f": {line[:200]}"
    return out


def _is_int(value: object) -> bool:
    return type(value) is int


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."


def _engine(url: str) -> Engine:
    """``create_engine(url)``; a URL that cannot be used is a KeySourceError whose message
    holds no part of the URL (it may carry a password)."""
    try:
        return _created(url)
    except NoSuchModuleError:
        dialect = url.partition("://")[0]
        dialect = dialect if re.fullmatch(r"[A-Za-z0-9_.+-]{1,40}", dialect) else "?"
        raise KeySourceError(
            f"database key source: no SQLAlchemy dialect or driver {dialect!r} is installed"
        ) from None
    except ImportError as exc:
        raise KeySourceError(
            f"database key source: the URL's database driver is not installed (module {exc.name})"
        ) from None
    except (ArgumentError, ValueError, TypeError) as exc:
        raise KeySourceError(
            f"database key source: not a usable SQLAlchemy URL ({type(exc).__name__}; the URL "
            "is not shown, it may hold a password): dialect+driver://user:password@host:port/db"
        ) from None


def _created(url: str) -> Engine:
    """The engine, with secret query values (``?password=``, ``?sslpassword=``) passed to the
    driver as connect arguments rather than kept in ``engine.url``, whose ``repr`` (the
    Engine's, SQLAlchemy's own) masks only the user-info password.  The driver receives the
    same keyword arguments either way (SQLite's driver takes none: its URL is left as is)."""
    from sqlalchemy.engine import make_url

    from ..redact import is_secret_param

    parsed = make_url(url)
    secret = {k: v for k, v in parsed.query.items() if is_secret_param(k) and isinstance(v, str)}
    if not secret or parsed.get_backend_name() == "sqlite":
        return create_engine(parsed)
    return create_engine(parsed.difference_update_query(secret), connect_args=secret)


def _put_metadata(conn: Connection, meta: StoreMeta, exists: bool) -> None:
    t = sealstore_keys
    values = {
        "suite": "metadata",
        "state": f"format-{meta.fmt}",
        "created_at": datetime.now(timezone.utc).replace(microsecond=0),
        "rotated_at": None,
        "wrapped_key": b"".join(meta.key_and_tag()),
    }
    if exists:
        conn.execute(t.update().where(t.c.key_id == METADATA_ROW).values(**values))
    else:
        conn.execute(t.insert().values(key_id=METADATA_ROW, **values))


_LOCK_WAIT = 60  # seconds a MySQL/MariaDB writer waits for the named lock


def _lock_registry(conn: Connection) -> Callable[[], object]:
    """Take the registry's write lock at the start of ``conn``'s transaction; returns the
    function that releases what the transaction's end does not."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        _begin_immediate(conn)
    elif dialect == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {TABLE_NAME} IN SHARE ROW EXCLUSIVE MODE")
    elif dialect in ("mysql", "mariadb"):
        name = f"{TABLE_NAME}:{conn.engine.url.database}"
        got = conn.execute(text("SELECT GET_LOCK(:n, :t)"), {"n": name, "t": _LOCK_WAIT}).scalar()
        if got != 1:
            conn.rollback()
            raise KeySourceError(f"{TABLE_NAME}: another writer held the lock for {_LOCK_WAIT} s")
        conn.commit()  # the named lock outlives it; the next transaction reads after it
        return lambda: conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": name})
    else:
        conn.execute(select(sealstore_keys.c.key_id).with_for_update()).all()
    return lambda: None


def _begin_immediate(conn: Connection) -> None:
    """``BEGIN IMMEDIATE``, tried again while another writer holds the database, for up to
    ``_LOCK_WAIT`` seconds as on MySQL: each try waits the driver's busy timeout (5 s by default),
    which a loaded machine's writers can outlast.  A failed try started no transaction."""
    deadline = time.monotonic() + _LOCK_WAIT
    while True:
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except OperationalError as exc:
            if "locked" not in str(exc.orig) and "busy" not in str(exc.orig):
                raise
        conn.rollback()
        if time.monotonic() >= deadline:
            raise KeySourceError(f"{TABLE_NAME}: another writer held the lock for {_LOCK_WAIT} s")
        time.sleep(0.05)
