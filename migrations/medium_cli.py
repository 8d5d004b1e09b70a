"""``sealstore medium-check``: whether a converted table's files still hold old row versions.

    sealstore medium-check --db URL --table T [--schema S] [--column C ...] [--scrub] [--json]

Prints ``clean``, ``not clean`` or ``unknown`` and what it found
(:func:`sealstore.migrations.medium.check`); ``--scrub`` first rewrites the table
(:func:`sealstore.migrations.medium.scrub`: VACUUM (FULL) on PostgreSQL, with its ACCESS
EXCLUSIVE lock; ALTER TABLE ... FORCE on MariaDB/MySQL; VACUUM on SQLite).  Exit status 0 only
when ``clean``; 1 when ``not clean`` or ``unknown`` (the line says which), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .rotation.cli_setup import DB_ENV, Subcommands, UsageError, _connect_check, _engine, _guard

__all__ = ["add_medium_commands", "cmd_medium_check"]


@_guard
def cmd_medium_check(args: argparse.Namespace) -> int:
    """Report (and with --scrub, first remove) what a table's files keep of old row versions."""
    from sealstore.errors import ColumnBindingError, MediumScrubFailed
    from sealstore.migrations import medium
    from sealstore.migrations.transient import describe
    from sqlalchemy.exc import SQLAlchemyError

    url = args.db or os.environ.get(DB_ENV)
    if not url:
        raise UsageError(f"no database: pass --db URL or set {DB_ENV}")
    engine = _engine(url)
    try:
        _connect_check(engine)
        ran: list[str] = []
        if args.scrub:
            try:
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    ran = medium.scrub(conn, args.table, args.schema)
            except MediumScrubFailed as exc:
                raise UsageError(str(exc)) from None
            except SQLAlchemyError as exc:
                print(f"sealstore: error: rewrite of {args.table} failed: {describe(exc)}",
                      file=sys.stderr)  # fmt: skip
                return 1
        try:
            report = medium.check(engine, args.table, schema=args.schema, columns=args.column)
        except ColumnBindingError as exc:
            raise UsageError(str(exc)) from None
    finally:
        engine.dispose()
    if args.json:
        doc = report.as_dict()
        doc["rewritten"] = ran
        print(json.dumps(doc, indent=2))
    else:
        for stmt in ran:
            print(f"ran: {stmt}")
        print(f"{args.table}: {report.status}")
        for finding in report.findings:
            print(f"  {finding}")
        print("sealstore cannot clean: " + "; ".join(medium.CANNOT_CLEAN))
    return 0 if report.clean else 1


def add_medium_commands(commands: Subcommands) -> None:
    """Add ``medium-check``."""
    p = commands.add_parser(
        "medium-check",
        help="say whether a table's files still hold old row versions (plaintext remnants)",
        description="Look at the pages of a table (PostgreSQL: pageinspect and pgstattuple, "
        "which need a superuser; MariaDB/MySQL: the table's .ibd, on the database host; "
        "SQLite: the database file) and say 'clean' only when no old row version, dropped "
        "column value or unzeroed free space remains; 'unknown' when it cannot look. Exit 0 "
        "only when clean.",
    )
    p.add_argument("--db", metavar="URL", help=f"SQLAlchemy database URL (default ${DB_ENV})")
    p.add_argument("--table", required=True, metavar="T", help="the converted table")
    p.add_argument("--schema", metavar="S", help="its schema (default: the connection's)")
    p.add_argument(
        "--column", action="append", metavar="C",
        help="a converted column that must hold sealed values (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--scrub",
        action="store_true",
        help="rewrite the table first (PostgreSQL: VACUUM FULL, ACCESS EXCLUSIVE lock)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_medium_check)
