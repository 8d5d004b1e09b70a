"""What a column conversion leaves on the medium: the rewrite that removes it, and the check.

A conversion (``op.encrypt_column`` / ``op.decrypt_column``, ``sealstore encrypt-column``)
writes new row versions and drops the old column; the database keeps the old bytes in its
files until the table is rewritten: PostgreSQL keeps dead tuples, the free space of pages and
the values of a dropped column inside every tuple (and ``pg_statistic`` keeps sampled values
of the column), InnoDB keeps deleted records in its pages' free lists and the values of an
instantly dropped column inside its records, SQLite keeps freed cells and pages.

:func:`scrub` rewrites the table after the conversion has committed (the operations call it
by default, ``scrub=False`` opts out):

- PostgreSQL: ``VACUUM (FULL)`` of the table (a new file; the old one is truncated at once and
  unlinked at the next checkpoint).  It holds an ACCESS EXCLUSIVE lock for its duration:
  readers and writers of the table wait.  Then ``VACUUM (FULL) pg_catalog.pg_statistic``
  when the role may (superuser): the column's sampled values (histogram, most common values)
  were deleted with the column but stay in that catalog's pages.
- MariaDB/MySQL (InnoDB): ``ALTER TABLE ... FORCE, ALGORITHM=INPLACE, LOCK=NONE``: an online
  rebuild into a new ``.ibd`` (writers go on; a short exclusive lock at its start and end).
- SQLite: ``PRAGMA secure_delete = ON`` on the converting connection from the start, then
  ``VACUUM`` (the whole file is rewritten; writers wait for it) and, in WAL mode, a
  ``wal_checkpoint(TRUNCATE)``.

:func:`check` says whether a table still holds remnants, ``clean`` only when it can see that
it does not (``unknown``, with the reason, when it cannot look).  :data:`CANNOT_CLEAN` is what
no rewrite reaches: the write-ahead log and its archive, replicas, backups and snapshots, the
file system's free blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import logging
import os
import struct
from dataclasses import dataclass, field

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

__all__ = [
    "CANNOT_CLEAN",
    "CHECKLIST",
    "MediumReport",
    "check",
    "final_notice",
    "leftover_notice",
    "scrub",
    "scrub_sql",
]

log: logging.Logger = logging.getLogger("sealstore.migrations")

CLEAN, NOT_CLEAN, UNKNOWN = "clean", "not clean", "unknown"

#: seconds the rewrite waits for its lock before giving up (and being retried)
LOCK_TIMEOUT = 5

#: what sealstore cannot clean, whatever the database
CANNOT_CLEAN: tuple[str, ...] = (
    "the write-ahead log and its archive (PostgreSQL pg_wal and archive_command's copies, "
    "InnoDB redo and undo logs and the binary log, SQLite's -wal once copied elsewhere)",
    "replicas (each rewrites its own files from the log it received)",
    "backups and snapshots taken before the conversion",
    "the file system's and the storage's free blocks (old file versions, SSD remapping)",
)

#: the operator's checklist after a conversion
CHECKLIST: tuple[str, ...] = (
    "run `sealstore medium-check --db URL --table T` and expect `clean`",
    "PostgreSQL: CHECKPOINT, then let WAL recycle past the conversion; expire archived WAL",
    "MariaDB/MySQL: let purge finish; rotate and purge the binary logs written meanwhile",
    "rebuild or re-seed replicas from a post-conversion backup (or run the rewrite there)",
    "expire or destroy backups and snapshots that hold the plaintext",
    "if the disk must hold no copy at all: move the database to a fresh volume "
    "(or trim/wipe the old one)",
)


def _dialect(conn) -> str:
    name = conn.dialect.name
    return "mysql" if name == "mariadb" else name


def _q(conn, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name)


def _qt(conn, table: str, schema: str | None) -> str:
    return f"{_q(conn, schema)}.{_q(conn, table)}" if schema else _q(conn, table)


def scrub_sql(dialect: str, qualified: str) -> list[str]:
    """The statements :func:`scrub` runs on ``dialect`` for the quoted table name (what the
    opt-out's warning tells the operator to run later)."""
    if dialect == "postgresql":
        return [f"VACUUM (FULL) {qualified}", "VACUUM (FULL) pg_catalog.pg_statistic"]
    if dialect in ("mysql", "mariadb"):
        return [f"ALTER TABLE {qualified} FORCE, ALGORITHM=INPLACE, LOCK=NONE"]
    if dialect == "sqlite":
        return ["PRAGMA secure_delete = ON", "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"]
    return []


def scrub(conn: Connection, table: str, schema: str | None = None) -> list[str]:
    """Rewrite ``table`` so its files hold no old row versions (see the module docstring).
    ``conn`` must be outside a transaction (autocommit); returns the statements run.  Raises
    :class:`~sealstore.errors.MediumScrubFailed` when the rewrite cannot run."""
    from ..errors import MediumScrubFailed

    dialect = _dialect(conn)
    qualified = _qt(conn, table, schema)
    ran: list[str] = []
    if dialect == "postgresql":
        # a lock request that waits queues every other reader behind it: give up after
        # LOCK_TIMEOUT (55P03, retried by the operation's RetryPolicy) instead
        conn.exec_driver_sql(f"SET lock_timeout = '{LOCK_TIMEOUT}s'")
        try:
            conn.exec_driver_sql(f"VACUUM (FULL) {qualified}")
        finally:
            conn.exec_driver_sql("RESET lock_timeout")
        ran.append(f"VACUUM (FULL) {qualified}")
        superuser = conn.exec_driver_sql(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).scalar()
        if superuser:
            conn.exec_driver_sql("VACUUM (FULL) pg_catalog.pg_statistic")
            ran.append("VACUUM (FULL) pg_catalog.pg_statistic")
        else:
            log.warning(
                "%s: pg_catalog.pg_statistic may keep sampled values of the converted column "
                "(histogram, most common values) in its free space; only a superuser can "
                "rewrite it: VACUUM (FULL) pg_catalog.pg_statistic",
                table,
            )
    elif dialect == "mysql":
        stmt = f"ALTER TABLE {qualified} FORCE, ALGORITHM=INPLACE, LOCK=NONE"
        conn.exec_driver_sql(f"SET SESSION lock_wait_timeout = {LOCK_TIMEOUT}")
        try:
            conn.exec_driver_sql(stmt)
        finally:
            conn.exec_driver_sql("SET SESSION lock_wait_timeout = DEFAULT")
        ran.append(stmt)
    elif dialect == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete = ON")
        conn.exec_driver_sql("VACUUM")
        ran += ["PRAGMA secure_delete = ON", "VACUUM"]
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        if str(mode).lower() == "wal":
            busy, _, _ = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
            ran.append("PRAGMA wal_checkpoint(TRUNCATE)")
            if busy:
                raise MediumScrubFailed(
                    f"{table}: the WAL could not be checkpointed and truncated (a reader holds "
                    "it); run PRAGMA wal_checkpoint(TRUNCATE) when no reader is open"
                )
    else:
        raise MediumScrubFailed(
            f"{table}: no table rewrite for {conn.dialect.name}; pass scrub=False and rewrite "
            "the table with the database's own tools"
        )
    return ran


def final_notice(table: str, column: str, dialect: str, ran: list[str]) -> str:
    """The operation's last log line: what was rewritten, what sealstore cannot clean."""
    return (
        f"{table}.{column} converted; the table was rewritten ({'; '.join(ran)}) so its own "
        f"files hold no old row versions. sealstore cannot clean: {'; '.join(CANNOT_CLEAN)}. "
        f"Checklist: {'; '.join(CHECKLIST)}."
    )


def leftover_notice(table: str, column: str, dialect: str, qualified: str) -> str:
    """The opt-out's warning: what stays on disk and how to remove it later."""
    stays = {
        "postgresql": "the old values stay in the table's file (dead tuples, page free space, "
        "and the dropped column inside every row) and sampled values in pg_statistic",
        "mysql": "the old values may stay in the table's .ibd file (deleted records, an "
        "instantly dropped column inside every record; MariaDB's ALGORITHM=COPY for the header "
        "CHECK usually rebuilds it) and stay in the undo and redo logs",
        "sqlite": "the old values stay in the database file (freed cells and pages)",
    }.get(_norm(dialect), "the old values stay in the table's files")
    how = "; ".join(scrub_sql(_norm(dialect), qualified)) or "a rewrite of the table"
    return (
        f"{table}.{column} converted WITHOUT rewriting the table (scrub=False): {stays}. "
        f"Remove them later with: {how}; then `sealstore medium-check --table {table}`. "
        f"Even then sealstore cannot clean: {'; '.join(CANNOT_CLEAN)}."
    )


def _norm(dialect: str) -> str:
    return "mysql" if dialect == "mariadb" else dialect


# ---- the check ---------------------------------------------------------------------------------


@dataclass
class MediumReport:
    """What :func:`check` found: ``status`` is ``clean``, ``not clean`` or ``unknown``;
    ``findings`` say what remains (or why it cannot be known)."""

    table: str
    dialect: str
    status: str = CLEAN
    findings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    def remnant(self, what: str) -> None:
        self.status = NOT_CLEAN
        self.findings.append(what)

    def unknown(self, why: str) -> None:
        if self.status != NOT_CLEAN:
            self.status = UNKNOWN
        self.findings.append(why)

    @property
    def clean(self) -> bool:
        return self.status == CLEAN

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "dialect": self.dialect,
            "status": self.status,
            "findings": list(self.findings),
            "checked": list(self.checked),
            "cannot_clean": list(CANNOT_CLEAN),
        }


def check(
    bind: Engine | Connection,
    table: str,
    *,
    schema: str | None = None,
    columns: list[str] | None = None,
) -> MediumReport:
    """Whether ``table``'s files still hold remnants of old row versions (see the module
    docstring); ``columns`` must be sealed (binary) columns, else they are reported."""
    from sqlalchemy import inspect
    from sqlalchemy.engine import Engine

    if isinstance(bind, Engine):
        with bind.connect() as conn:
            return check(conn, table, schema=schema, columns=columns)
    conn = bind
    dialect = _dialect(conn)
    report = MediumReport(table, dialect)
    insp = inspect(conn)
    if not insp.has_table(table, schema=schema):
        from ..errors import ColumnBindingError

        raise ColumnBindingError(f"the database has no table {table}")
    cols = {c["name"]: c for c in insp.get_columns(table, schema=schema)}

    def shadow_name(column: str) -> str:  # as sealstore.migrations.alembic.ops names it
        return ("_ss_" + column)[:63]

    for name in columns or []:
        if name not in cols:
            if shadow_name(name) in cols:
                report.remnant(f"column {name}: a conversion is under way (its shadow column)")
                continue
            from ..errors import ColumnBindingError

            raise ColumnBindingError(f"table {table} has no column {name}")
        if not _binary(cols[name]["type"]):
            report.remnant(f"column {name} is of a text type: it still holds plaintext")
    for name in cols:
        if name.startswith("_ss_"):
            report.remnant(f"column {name}: an unfinished conversion's shadow column")
    if dialect == "postgresql":
        _check_postgresql(conn, table, schema, report)
    elif dialect == "mysql":
        _check_mysql(conn, table, schema, report)
    elif dialect == "sqlite":
        _check_sqlite(conn, report)
    else:
        report.unknown(f"no medium check for {conn.dialect.name}")
    return report


def _binary(type_) -> bool:
    from sqlalchemy import LargeBinary
    from sqlalchemy.types import _Binary

    return isinstance(type_, (LargeBinary, _Binary))


# PostgreSQL ---------------------------------------------------------------------------------------

_PG_PAGES = """
SELECT count(*) FILTER (WHERE h.upper > h.lower AND
         substring(p.page FROM h.lower + 1 FOR h.upper - h.lower)
           <> decode(repeat('00', h.upper - h.lower), 'hex')),
       count(*) FILTER (WHERE i.dropped_values > 0),
       coalesce(sum(i.dropped_values), 0)
FROM generate_series(0, (pg_relation_size(%(rel)s::text::regclass)
                         / current_setting('block_size')::int)::int - 1) AS b
CROSS JOIN LATERAL (SELECT get_raw_page(%(rel)s::text, b::int) AS page) AS p
CROSS JOIN LATERAL page_header(p.page) AS h
CROSS JOIN LATERAL (
  SELECT count(*) AS dropped_values FROM heap_page_items(p.page) AS t, unnest(%(dropped)s::int[]) AS k
  WHERE t.lp_flags = 1 AND (t.t_infomask2 & 2047) >= k
    AND (t.t_bits IS NULL OR substr(t.t_bits, k, 1) = '1')
) AS i
"""


def _check_postgresql(conn, table: str, schema: str | None, report: MediumReport) -> None:
    from sqlalchemy.exc import DBAPIError

    qualified = _qt(conn, table, schema)
    for ext in ("pageinspect", "pgstattuple"):
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"CREATE EXTENSION IF NOT EXISTS {ext}")
        except DBAPIError as exc:
            from .transient import describe

            report.unknown(
                f"the {ext} extension is not available ({describe(exc)}): a superuser can "
                f"run CREATE EXTENSION {ext} (postgresql-contrib)"
            )
            return
    oid, toast = conn.exec_driver_sql(
        "SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.oid = %(t)s::regclass",
        {"t": qualified},
    ).one()
    rels = [(qualified, oid)]
    if toast:
        rels.append((f"pg_toast.pg_toast_{oid}", toast))
    for name, rel_oid in rels:
        dropped = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT attnum FROM pg_attribute WHERE attrelid = %(o)s AND attisdropped",
                {"o": rel_oid},
            )
        ]
        try:
            with conn.begin_nested():
                dead = conn.exec_driver_sql(
                    "SELECT dead_tuple_count FROM pgstattuple(%(o)s::oid::regclass)",
                    {"o": rel_oid},
                ).scalar_one()
                dirty, rows_pages, values = conn.exec_driver_sql(
                    _PG_PAGES,
                    {
                        "rel": conn.exec_driver_sql(
                            "SELECT %(o)s::oid::regclass::text", {"o": rel_oid}
                        ).scalar_one(),
                        "dropped": dropped,
                    },
                ).one()
        except DBAPIError as exc:
            from .transient import describe

            report.unknown(
                f"{name}: cannot read its pages ({describe(exc)}): pageinspect and pgstattuple "
                "need a superuser (or pg_stat_scan_tables and EXECUTE on get_raw_page)"
            )
            return
        report.checked.append(name)
        if dead:
            report.remnant(f"{name}: {dead} dead tuples (old row versions)")
        if dirty:
            report.remnant(
                f"{name}: {dirty} pages whose free space is not zeroed (may hold old row versions)"
            )
        if values:
            report.remnant(
                f"{name}: {values} values of dropped columns in {rows_pages} pages (they stay "
                "in every row until the table is rewritten)"
            )
    if not _check_pg_statistic(conn, oid, report):
        return
    if report.status != CLEAN:
        report.findings.append(f"rewrite with: VACUUM (FULL) {qualified} (ACCESS EXCLUSIVE lock)")


# pg_statistic is one catalog for every table of the database: ANALYZE of any table leaves dead
# tuples and unzeroed free space in it all the time, so counting those would make every check
# racy.  What belongs to this table is found by its key instead: a tuple's data starts with
# starelid (oid) and staattnum (int2), and the statistics of a dropped column (the plaintext
# column a conversion replaced) are deleted with it and never written again.  Any such tuple,
# dead or in a page's free space, is a remnant.  Both byte orders are tried (the server's is
# not visible through SQL); six bytes do not match by chance in practice.
_PG_STATISTIC = """
SELECT coalesce(sum(i.n), 0),
       count(*) FILTER (WHERE h.upper > h.lower AND EXISTS (
         SELECT 1 FROM unnest(%(needles)s::bytea[]) AS k(x)
         WHERE position(k.x IN substring(p.page FROM h.lower + 1 FOR h.upper - h.lower)) > 0))
FROM generate_series(0, (pg_relation_size('pg_catalog.pg_statistic')
                         / current_setting('block_size')::int)::int - 1) AS b
CROSS JOIN LATERAL (SELECT get_raw_page('pg_catalog.pg_statistic', b::int) AS page) AS p
CROSS JOIN LATERAL page_header(p.page) AS h
CROSS JOIN LATERAL (
  SELECT count(*) AS n FROM heap_page_items(p.page) AS t
  WHERE t.lp_flags = 1 AND substr(t.t_data, 1, 6) = ANY(%(needles)s::bytea[])
) AS i
"""


def _check_pg_statistic(conn, table_oid: int, report: MediumReport) -> bool:
    """Statistics of ``table_oid``'s dropped columns left in ``pg_statistic``'s pages; False
    (with the report ``unknown``) when the pages cannot be read."""
    from sqlalchemy.exc import DBAPIError

    dropped = [
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT attnum FROM pg_attribute WHERE attrelid = %(o)s AND attisdropped",
            {"o": table_oid},
        )
    ]
    report.checked.append("pg_catalog.pg_statistic")
    if not dropped:
        return True
    needles = [struct.pack(order + "Ih", table_oid, k) for k in dropped for order in "<>"]
    try:
        with conn.begin_nested():
            tuples, pages = conn.exec_driver_sql(_PG_STATISTIC, {"needles": needles}).one()
    except DBAPIError as exc:
        from .transient import describe

        report.unknown(
            f"pg_catalog.pg_statistic: cannot read its pages ({describe(exc)}): pageinspect "
            "needs a superuser (or EXECUTE on get_raw_page)"
        )
        return False
    if tuples or pages:
        report.remnant(
            f"pg_catalog.pg_statistic: statistics of this table's dropped columns (sampled "
            f"values) in {tuples} tuples and in the free space of {pages} pages; rewrite it "
            "as a superuser: VACUUM (FULL) pg_catalog.pg_statistic"
        )
    return True


# MariaDB / MySQL ----------------------------------------------------------------------------------

_FIL_PAGE_TYPE = 24
_FIL_PAGE_INDEX = 17855
_FIL_PAGE_TYPE_INSTANT = 18
_PAGE_FREE = 38 + 6
_PAGE_GARBAGE = 38 + 8


def _check_mysql(conn, table: str, schema: str | None, report: MediumReport) -> None:
    datadir, page_size, per_table = conn.exec_driver_sql(
        "SELECT @@datadir, @@innodb_page_size, @@innodb_file_per_table"
    ).one()
    db = schema or conn.exec_driver_sql("SELECT DATABASE()").scalar()
    engine = conn.exec_driver_sql(
        "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (db, table),
    ).scalar()
    if str(engine).lower() != "innodb":
        report.unknown(f"{table} uses the {engine} engine: no medium check for it")
        return
    if not per_table:
        report.unknown("innodb_file_per_table is off: the table lives in the shared ibdata file")
        return
    path = os.path.join(datadir, db, f"{table}.ibd")
    try:
        f = open(path, "rb")
    except OSError as exc:
        report.unknown(
            f"cannot read {path} ({type(exc).__name__}): run the check on the database host "
            "as a user who can read the data directory; SQL shows neither deleted records nor "
            f"instantly dropped columns. A rebuild removes both: ALTER TABLE {table} FORCE"
        )
        return
    report.checked.append(path)
    instant = dirty = garbage = deleted = 0
    with f:
        while True:
            page = f.read(page_size)
            if len(page) < page_size:
                break
            kind = struct.unpack_from(">H", page, _FIL_PAGE_TYPE)[0]
            if kind == _FIL_PAGE_TYPE_INSTANT:
                instant += 1
            if kind in (_FIL_PAGE_INDEX, _FIL_PAGE_TYPE_INSTANT):
                free, gb = struct.unpack_from(">HH", page, _PAGE_FREE)
                marked, tail = _innodb_page(page, page_size)
                if free or gb or marked or tail:
                    dirty += 1
                    garbage += gb
                    deleted += marked
    if instant:
        report.remnant(
            f"{table}: altered instantly since its last rebuild (dropped columns' values stay "
            "in its records)"
        )
    if dirty:
        report.remnant(
            f"{path}: {dirty} pages hold deleted records ({deleted} awaiting purge, {garbage} "
            "bytes purged but not overwritten) or unzeroed free space"
        )
    if report.status != CLEAN:
        report.findings.append(
            f"rewrite with: ALTER TABLE {table} FORCE, ALGORITHM=INPLACE, LOCK=NONE (online)"
        )
    report.findings.append(
        "not checked (cannot be cleaned by sealstore): undo tablespaces, redo log, binary log"
    )


def _innodb_page(page: bytes, page_size: int) -> tuple[int, bool]:
    """(delete-marked records in the page's record list, whether the free space between the
    heap top and the page directory holds bytes) of a COMPACT/DYNAMIC index page."""
    n_slots, heap_top, n_heap = struct.unpack_from(">HHH", page, 38)
    if not n_heap & 0x8000:  # REDUNDANT row format: not walked
        return 0, not _zero(page[heap_top : page_size - 8 - 2 * n_slots])
    marked, origin, seen = 0, 99, 0  # the infimum record
    while seen < page_size // 5:
        nxt = struct.unpack_from(">h", page, origin - 2)[0]
        origin = (origin + nxt) % page_size
        if origin in (0, 112) or origin < 5:  # the supremum, or a broken list
            break
        if page[origin - 5] & 0x20:
            marked += 1
        seen += 1
    return marked, not _zero(page[heap_top : page_size - 8 - 2 * n_slots])


# SQLite -------------------------------------------------------------------------------------------


def _zero(data: bytes) -> bool:
    return not data.strip(b"\0")


def _check_sqlite(conn, report: MediumReport) -> None:
    path = conn.engine.url.database
    if not path or path == ":memory:" or path.startswith("file:"):
        report.unknown("not a database file (in memory or a URI): nothing on a medium to read")
        return
    for suffix, what in (("-wal", "WAL"), ("-journal", "rollback journal")):
        try:
            size = os.path.getsize(path + suffix)
        except OSError:
            continue
        if size:
            report.remnant(
                f"{path}{suffix}: the {what} holds {size} bytes of page images (PRAGMA "
                "wal_checkpoint(TRUNCATE) with no reader open)"
            )
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        report.unknown(f"cannot read {path} ({type(exc).__name__})")
        return
    report.checked.append(path)
    page_size = struct.unpack_from(">H", data, 16)[0]
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]
    pages = len(data) // page_size
    trunk = struct.unpack_from(">I", data, 32)[0]
    free: set[int] = set()
    dirty_free = 0
    while trunk and trunk <= pages and trunk not in free:
        free.add(trunk)
        page = data[(trunk - 1) * page_size : trunk * page_size]
        nxt, n = struct.unpack_from(">II", page, 0)
        leaves = struct.unpack_from(f">{n}I", page, 8) if 8 + 4 * n <= usable else ()
        if not _zero(page[8 + 4 * len(leaves) : usable]):
            dirty_free += 1
        for leaf in leaves:
            free.add(leaf)
            if 0 < leaf <= pages and not _zero(data[(leaf - 1) * page_size : leaf * page_size]):
                dirty_free += 1
        trunk = nxt
    dirty = 0
    for no in range(1, pages + 1):
        if no in free:
            continue
        base = (no - 1) * page_size
        hdr = base + (100 if no == 1 else 0)
        kind = data[hdr]
        if kind not in (2, 5, 10, 13):
            continue  # overflow, pointer-map or lock-byte page
        first_free, cells, start = struct.unpack_from(">HHH", data, hdr + 1)
        start = 65536 if start == 0 else start
        ptrs = hdr + (12 if kind in (2, 5) else 8) + 2 * cells
        bad = not _zero(data[ptrs : base + start])
        seen = 0
        while first_free and not bad and seen < page_size:
            nxt, size = struct.unpack_from(">HH", data, base + first_free)
            bad = not _zero(data[base + first_free + 4 : base + first_free + size])
            first_free, seen = nxt, seen + 1
        dirty += bad
    if dirty_free:
        report.remnant(f"{path}: {dirty_free} of {len(free)} free pages are not zeroed")
    if dirty:
        report.remnant(f"{path}: {dirty} pages hold deleted cells (free space not zeroed)")
    if report.status != CLEAN:
        report.findings.append("rewrite with: PRAGMA secure_delete = ON; VACUUM")
