"""The SQL that makes a column conversion safe beside live writers, per dialect.

While ``encrypt_column`` / ``decrypt_column`` fill the shadow column, a trigger (plain SQL, no
crypto) clears the shadow value of every row whose source column an application writes, so a
converted value never outlives the value it was made from; the batches guard on the source
value they read.  The last pass and the swap run under a lock that blocks writers:
``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`` on PostgreSQL (readers wait too, for the last
pass and the swap: the swap's ``ALTER TABLE`` needs that lock anyway, and taking it at once
rather than upgrading a weaker one means an application transaction that read the table and
then writes it cannot deadlock with the swap), the write lock on SQLite, ``LOCK TABLES ...
WRITE`` on MySQL/MariaDB (whose DDL commits, so there the lock, not a transaction, spans the
swap).  After ``encrypt_column`` a
CHECK on the sealed-value header (version byte, minimum length) refuses a plaintext write into
the encrypted column on PostgreSQL and MySQL/MariaDB; SQLite cannot add a CHECK to an existing
table without rebuilding it, and is left without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...format import HEADER_SIZE, VERSION

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "check_name",
    "create_tracking",
    "drop_tracking",
    "header_check_sql",
    "lock_writers",
    "unlock_writers",
]

_MAX_NAME = 63
_MIN_TAG = 16


def _name(prefix: str, table: str, column: str) -> str:
    return f"{prefix}{table}_{column}"[:_MAX_NAME]


def check_name(table: str, column: str) -> str:
    """The CHECK constraint ``encrypt_column`` adds: ``ck_ss_<table>_<column>``."""
    return _name("ck_ss_", table, column)


def _q(conn, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def _qt(conn, table: str, schema: str | None) -> str:
    return f"{_q(conn, schema)}.{_q(conn, table)}" if schema else _q(conn, table)


def create_tracking(
    conn: Connection, table: str, schema: str | None, column: str, shadow: str, pk: list[str]
) -> None:
    """Install the trigger(s) that clear ``shadow`` when ``column`` is written (idempotent)."""
    drop_tracking(conn, table, schema, column)
    name, t = _name("_ss_trg_", table, column), _qt(conn, table, schema)
    c, s = _q(conn, column), _q(conn, shadow)
    dialect = conn.dialect.name
    if dialect == "postgresql":
        fn = _qt(conn, name, schema)
        conn.exec_driver_sql(
            f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $ss$ BEGIN "
            f"IF TG_OP = 'INSERT' OR NEW.{c} IS DISTINCT FROM OLD.{c} THEN NEW.{s} := NULL; "
            "END IF; RETURN NEW; END $ss$"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {_q(conn, name)} BEFORE INSERT OR UPDATE ON {t} "
            f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
        )
    elif dialect == "sqlite":
        where = " AND ".join(f"{_q(conn, k)} = NEW.{_q(conn, k)}" for k in pk)
        conn.exec_driver_sql(
            f"CREATE TRIGGER {_q(conn, name)} AFTER UPDATE OF {c} ON {t} FOR EACH ROW "
            f"WHEN NEW.{c} IS NOT OLD.{c} BEGIN UPDATE {t} SET {s} = NULL WHERE {where}; END"
        )
    elif dialect in ("mysql", "mariadb"):
        conn.exec_driver_sql(
            f"CREATE TRIGGER {_q(conn, name)} BEFORE UPDATE ON {t} FOR EACH ROW "
            f"SET NEW.{s} = IF(BINARY NEW.{c} <=> BINARY OLD.{c}, NEW.{s}, NULL)"
        )
    else:
        raise NotImplementedError(f"no write tracking for {dialect}: pause writes instead")


def drop_tracking(conn: Connection, table: str, schema: str | None, column: str) -> None:
    """Remove what :func:`create_tracking` installed (if it is there)."""
    name = _name("_ss_trg_", table, column)
    dialect = conn.dialect.name
    if dialect == "postgresql":
        conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {_qt(conn, name, schema)}() CASCADE")
    elif dialect == "sqlite":
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {_q(conn, name)}")
    elif dialect in ("mysql", "mariadb"):
        target = f"{_q(conn, schema)}.{_q(conn, name)}" if schema else _q(conn, name)
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {target}")


def lock_writers(conn: Connection, table: str, schema: str | None, column: str) -> None:
    """Block the application's writes to ``table`` until the transaction ends (MySQL: until
    :func:`unlock_writers`)."""
    t = _qt(conn, table, schema)
    dialect = conn.dialect.name
    if dialect == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")
    elif dialect == "sqlite":  # the first write of a transaction takes the database's lock
        c = _q(conn, column)
        conn.exec_driver_sql(f"UPDATE {t} SET {c} = {c} WHERE 0")
    elif dialect in ("mysql", "mariadb"):
        conn.exec_driver_sql(f"LOCK TABLES {t} WRITE")


def unlock_writers(conn: Connection) -> None:
    """Release :func:`lock_writers`' lock where it outlives the transaction (MySQL)."""
    if conn.dialect.name in ("mysql", "mariadb"):
        conn.exec_driver_sql("UNLOCK TABLES")


def header_check_sql(conn: Connection, column: str) -> str | None:
    """A CHECK condition that only sealed values (or NULL) pass, or None (SQLite)."""
    c = _q(conn, column)
    n = HEADER_SIZE + _MIN_TAG
    dialect = conn.dialect.name
    if dialect == "postgresql":
        return f"{c} IS NULL OR (octet_length({c}) >= {n} AND get_byte({c}, 0) = {VERSION})"
    if dialect in ("mysql", "mariadb"):
        return f"{c} IS NULL OR (LENGTH({c}) >= {n} AND ASCII({c}) = {VERSION})"
    return None
