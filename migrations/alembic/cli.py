"""``sealstore encrypt-column`` / ``decrypt-column``: the Alembic operations, from the shell.

    sealstore encrypt-column --db URL TABLE.COLUMN (--models MODULE[:ATTR] | --type T)
              [--plain-type P] [--keyring NAME] [--batch-size N] [--progress MODE]
    sealstore decrypt-column --db URL TABLE.COLUMN (--models ... | --type T) --plain-type P

The encrypted type is the column's type in ``--models`` (the models as they are *after*
encrypting: row-bound columns need them), or ``--type string:N | text | binary[:N]`` for a
column-bound one.  ``--plain-type string:N | text | binary[:N]`` is the plaintext column type
(required to decrypt; to encrypt it only says how to read the values, default the reflected
type).  Both run exactly :func:`sealstore.migrations.alembic.ops` (each batch committed, live writes
kept, the swap under a short lock) and resume where they stopped when run again.  A column
whose contents fit neither side (values sealed under keys the keyring does not have, sealed
values beside plaintext ones, sealed bytes in a text column) is refused before anything is
written: one line, exit status 3 (``ColumnTypeMismatch``).
"""

from __future__ import annotations

import argparse
import json

from ..rotation.cli_setup import (
    UsageError,
    _check_batch_size,
    _config,
    _connect_check,
    _db_url,
    _engine,
    Subcommands,
    _guard,
    _load_models,
    _progress,
    _retry,
)

__all__ = ["add_convert_commands"]


def _simple_type(text: str, *, encrypted: bool):
    """``string:N``, ``text``, ``binary`` or ``binary:N`` as a SQLAlchemy or sealstore type."""
    import sqlalchemy as sa
    from sealstore.adapters.sqlalchemy import EncryptedBinary, EncryptedString, EncryptedText

    name, _, size = text.partition(":")
    try:
        length = int(size) if size else None
    except ValueError:
        length = -1
    kinds = {
        "string": (EncryptedString, sa.String),
        "text": (EncryptedText, sa.Text),
        "binary": (EncryptedBinary, sa.LargeBinary),
    }
    if (
        name not in kinds
        or (length is not None and length < 1)
        or (name == "string" and not length)
    ):
        raise UsageError(f"type {text!r}: expected string:N, text, binary or binary:N")
    cls = kinds[name][0 if encrypted else 1]
    return cls(length) if length is not None else cls()


def _encrypted_type(args, table: str, column: str):
    from sealstore.adapters.sqlalchemy import EncryptedType
    from sqlalchemy import MetaData

    if args.type:
        base = _simple_type(args.type, encrypted=True)
        return type(base)(base.length, keyring=args.keyring)
    if not args.models:
        raise UsageError("name the encrypted type: --models MODULE[:ATTR] or --type T")
    found = _load_models(args.models)
    metas = found if isinstance(found, list) else [getattr(found, "metadata", found)]
    for meta in metas:
        if isinstance(meta, MetaData) and table in meta.tables:
            col = meta.tables[table].c.get(column)
            if col is not None and isinstance(col.type, EncryptedType):
                return col.type
            raise UsageError(f"--models {args.models}: {table}.{column} is not an encrypted column")
    raise UsageError(f"--models {args.models}: no table {table}")


def _state(engine, table: str, column: str, keyring, direction: str) -> tuple[int, bool | None]:
    """(non-NULL values, whether they are all sealed values of this keyring, None while a
    conversion is under way): how the CLI, which has no Alembic version table, knows that a
    conversion already finished.  ColumnTypeMismatch when the column's contents fit neither
    side: sealed values of keys this keyring does not hold, a half-sealed column, sealed bytes
    in a text column."""
    import sqlalchemy as sa
    from sealstore.migrations.alembic.ops import shadow_name
    from sealstore.migrations.rotation.reseal import key_id_bytes, key_id_sql
    from sealstore.migrations.rotation.stored import sealed_in_sample

    with engine.connect() as conn:
        insp = sa.inspect(conn)
        if not insp.has_table(table):
            raise UsageError(f"{table}.{column}: the database has no table {table}")
        cols = {c["name"]: c["type"] for c in insp.get_columns(table)}
        if column not in cols:
            if shadow_name(column) in cols:
                return 0, None  # interrupted inside the swap: the operation finishes it
            raise UsageError(f"{table}.{column}: table {table} has no column {column}")
        t = sa.table(table, sa.column(column, sa.LargeBinary))
        c = t.c[column]
        total = conn.execute(sa.select(sa.func.count(c))).scalar_one()
        if shadow_name(column) in cols:
            return total, None
        text_type = isinstance(cols[column], sa.String)
        if not total:
            return total, False
        ours = sa.or_(*[key_id_sql(c) == key_id_bytes(k.key_id) for k in keyring.keys])
        if text_type:  # on SQLite a text column keeps the BLOBs it is given
            sealed = sealed_in_sample(conn, t, c)[0] if conn.dialect.name == "sqlite" else 0
            if sealed:
                _mismatch(
                    table, column, cols[column], conn.dialect,
                    f"is a text column holding sealed values ({sealed} read)",
                    "change its type to a binary one, copying the values as they are; "
                    f"{direction}ing it would treat sealed bytes as plaintext",
                )  # fmt: skip
            return total, False
        sealed = conn.execute(
            sa.select(sa.func.count()).select_from(t).where(c.is_not(None), ours)
        ).scalar_one()
        foreign = sealed_in_sample(conn, t, c, sa.not_(ours))[0]
    if sealed and sealed != total and direction == "encrypt":
        _mismatch(
            table, column, cols[column], engine.dialect,
            f"holds {sealed} values sealed under this keyring and {total - sealed} that are not "
            "(written through an encrypted model before the conversion ran?)",
            "the operation would seal the sealed ones again; fix the rows, or restore the "
            "column from a backup, then run it",
        )  # fmt: skip
    if foreign:
        _mismatch(
            table, column, cols[column], engine.dialect,
            f"holds values sealed under keys this keyring does not have ({foreign} read)",
            "it was encrypted with another keyring: check --config and --keyring",
        )  # fmt: skip
    return total, sealed == total


def _mismatch(table: str, column: str, stored, dialect, what: str, fix: str) -> None:
    from sealstore.errors import ColumnTypeMismatch

    shown = str(stored.compile(dialect=dialect))
    raise ColumnTypeMismatch(
        f"{table}.{column} ({shown}) {what}: {fix}",
        column=f"{table}.{column}", stored=shown, expected="plaintext or sealed by this keyring",
    )  # fmt: skip


def _check_model_table(args, engine, table: str) -> None:
    """With --models: ColumnTypeMismatch when another column of ``table`` that the models
    declare plaintext holds sealed values (see ``stored.check_plain_columns``)."""
    from sealstore.migrations.rotation.spec import _tables
    from sealstore.migrations.rotation.stored import check_plain_columns

    if not args.models:
        return
    tables = [t for t in _tables(_load_models(args.models)) if t.name == table]
    with engine.connect() as conn:
        check_plain_columns(conn, tables)


def _plain_text_column(engine, table: str, column: str) -> bool:
    """Whether the column is of a text type (never holds sealed values)."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        for c in sa.inspect(conn).get_columns(table):
            if c["name"] == column:
                return isinstance(c["type"], sa.String)
    return False


def _convert(args, direction: str) -> int:
    import sealstore.migrations.alembic.ops  # noqa: F401  (registers the operations)
    from alembic.migration import MigrationContext
    from alembic.operations import Operations
    from sealstore.keyring import forget_keyring, use_keyring

    _check_batch_size(args)
    table, sep, column = args.target.partition(".")
    if not sep or not table or not column:
        raise UsageError(f"{args.target}: expected TABLE.COLUMN")
    type_ = _encrypted_type(args, table, column)
    if direction == "decrypt" and not args.plain_type:
        raise UsageError("decrypt-column needs --plain-type (the column's new type)")
    plain = _simple_type(args.plain_type, encrypted=False) if args.plain_type else None
    cfg = _config(args)
    engine = _engine(_db_url(args, cfg))
    name = type_.keyring_name
    keyring = use_keyring(cfg.load_keyring(), name)
    try:
        _connect_check(engine)
        _check_model_table(args, engine, table)
        total, sealed = _state(engine, table, column, keyring, direction)
        if sealed is None:
            done = False
        elif direction == "encrypt":
            done = sealed or (not total and not _plain_text_column(engine, table, column))
        else:
            done = (total and not sealed) or _plain_text_column(engine, table, column)
        if done:
            _report(args, table, column, direction, total, already=True)
            return 0
        progress = _progress(args)
        progress.start(f"{direction} {table}.{column}", total)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"transaction_per_migration": True})
            op = Operations(ctx)
            kw = dict(plain_type=plain, batch_size=args.batch_size, progress=progress,
                      retry=_retry(args))  # fmt: skip
            if getattr(args, "no_scrub", False):
                kw["scrub"] = False
            with ctx.begin_transaction(_per_migration=True):
                notice = getattr(op, f"{direction}_column")(table, column, type_, **kw)
        progress.finish()
        _medium_notice(args, notice)
    finally:
        forget_keyring(name)
        keyring.close()
        engine.dispose()
    _report(args, table, column, direction, total, already=False)
    return 0


def _medium_notice(args, notice: str | None) -> None:
    """What the conversion left on the medium (the operation's last log record, a WARNING
    that Python prints on stderr even with no handler set): printed here only when warnings
    of ``sealstore.migrations`` are switched off; always in --json's document."""
    import logging
    import sys

    args.medium_notice = notice
    logger = logging.getLogger("sealstore.migrations")
    if notice and not args.json and not logger.isEnabledFor(logging.WARNING):
        print(f"sealstore: {notice}", file=sys.stderr)


def _report(args, table: str, column: str, direction: str, total: int, *, already: bool) -> None:
    if args.json:
        doc = {"column": f"{table}.{column}", "operation": f"{direction}-column",
               "values": total, "already_done": already,
               "medium": getattr(args, "medium_notice", None)}  # fmt: skip
        print(json.dumps(doc, indent=2))
    elif already:
        print(f"{table}.{column}: already {direction}ed ({total} values); nothing to do")
    else:
        print(f"{table}.{column}: {direction}ed ({total} values)")


@_guard
def cmd_encrypt_column(args: argparse.Namespace) -> int:
    """Seal a plaintext column in place (online, resumable)."""
    return _convert(args, "encrypt")


@_guard
def cmd_decrypt_column(args: argparse.Namespace) -> int:
    """Open an encrypted column in place into a plaintext column (online, resumable)."""
    return _convert(args, "decrypt")


def add_convert_commands(commands: Subcommands) -> None:
    """Add ``encrypt-column`` and ``decrypt-column``."""
    for name, func, what, more in (
        (
            "encrypt-column",
            cmd_encrypt_column,
            "seal a plaintext column in place (online, resumable)",
            "Seal a plaintext column in place, as the Alembic encrypt_column operation does "
            "(shadow column, batches, live writes kept, swap under a short lock); run it again "
            "to resume.",
        ),
        (
            "decrypt-column",
            cmd_decrypt_column,
            "open an encrypted column in place (online, resumable)",
            "Open an encrypted column in place into a plaintext column of --plain-type, as the "
            "Alembic decrypt_column operation does; run it again to resume.",
        ),
    ):
        p = commands.add_parser(name, help=what, description=more)
        p.add_argument("target", metavar="TABLE.COLUMN")
        p.add_argument(
            "--db", metavar="URL", help="SQLAlchemy database URL (default $SEALSTORE_DATABASE_URL)"
        )
        p.add_argument(
            "--models", metavar="MODULE[:ATTR]", help="models declaring the encrypted column"
        )
        p.add_argument(
            "--type", metavar="T", help="encrypted type without models: string:N, text, binary[:N]"
        )
        p.add_argument(
            "--plain-type", metavar="P", help="plaintext type: string:N, text, binary[:N]"
        )
        p.add_argument(
            "--keyring", default="default", help="keyring name of --type (default: default)"
        )
        p.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            metavar="N",
            help="rows per batch (default 1000)",
        )
        p.add_argument(
            "--retry-budget",
            type=float,
            default=60.0,
            metavar="SECONDS",
            help="how long to retry deadlocks and lost connections (default 60)",
        )
        p.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "encrypt-column":
            p.add_argument(
                "--no-scrub",
                action="store_true",
                help="do not rewrite the table afterwards: the old plaintext stays in the "
                "database's files (a warning says what stays and how to remove it; "
                "docs/MEDIUM.md)",
            )
        p.set_defaults(func=func)
