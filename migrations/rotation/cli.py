"""``sealstore rotate | status | verify | reindex`` and ``sealstore keys retire``.

    sealstore [--config PATH] rotate  --db URL (--models MODULE[:ATTR] | --column TABLE.COLUMN)...
              [--table T] [--keyring NAME] [--batch-size N] [--dry-run] [--progress MODE] [--json]
    sealstore [--config PATH] status  --db URL (--models ... | --column ...) [--index-config PATH]
              [--json]
    sealstore [--config PATH] verify  --db URL (--models ... | --column ...) [--batch-size N]
    sealstore [--config PATH] reindex --db URL --models MODULE [--index-config PATH] [...]
    sealstore [--config PATH] keys retire KEY_ID --db URL (--models ... | --column ...)
              [--s3 s3://BUCKET/PREFIX]... [--endpoint-url URL] [--force] [--json]
    sealstore [--config PATH] db init [--db URL] [--json]

The keyring comes from the sealstore configuration (``--config`` / ``$SEALSTORE_CONFIG``) and is
registered under ``--keyring`` (default ``default``); the columns are the encrypted columns of
the models (``--models app.models`` imports the module and uses its MetaData / declarative
bases; ``app.models:Base`` names one) that use that keyring, or ``--column table.column`` for a
column-bound column known only by name.  The database is ``--db`` or ``$SEALSTORE_DATABASE_URL``
(or the registry's URL when the key source is a database).  Nothing prints plaintext or key
material.  ``--json`` prints one JSON document on stdout and nothing else there (progress,
warnings and errors go to stderr).  Exit status: 0 ok, 1 something is left (failures, values
not under the primary -- ``status`` too, with blind-index values never filled and blind indexes
whose keyring is not configured -- references), 2 usage error, 3 a column is not stored as its
model declares (``ColumnNotConverted``/``ColumnTypeMismatch``: an encrypted column still
plaintext, a plain model column holding sealed values; the line names the fix).

Blind indexes use their own keyring: ``--index-config PATH`` (``status``, ``reindex``) loads it
as the named configuration ``index`` (``sealstore.config.load_config(path, name="index")``:
only ``SEALSTORE_INDEX_*`` variables apply); without it, ``$SEALSTORE_INDEX_CONFIG`` /
``SEALSTORE_INDEX_*`` are used when set.  It must share no key with the column keyring
(``SharedIndexKey``).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager

from sealstore.extras import require

__all__ = ["add_commands", "add_db_commands", "add_keys_commands"]

DB_ENV = "SEALSTORE_DATABASE_URL"

#: the sub-commands of an ``argparse`` parser (``parser.add_subparsers()``)
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class UsageError(Exception):
    """Bad arguments discovered after parsing (exit status 2)."""


class RuntimeFailure(Exception):
    """The arguments are fine but the environment is not (exit status 1)."""


# ---- shared helpers ------------------------------------------------------------------------------


def _config(args):
    from sealstore.config import load_config

    return load_config(getattr(args, "config", None), name=getattr(args, "config_name", None))


def _index_keyrings(args, env) -> list[str]:
    """Register the keyring of every blind index of ``env`` under its name: from
    ``--index-config`` (``name="index"``: only ``SEALSTORE_INDEX_*`` variables apply), else
    from the named configuration of that keyring when the environment has one
    (``$SEALSTORE_INDEX_CONFIG`` or ``SEALSTORE_INDEX_*`` for "index").  Each is checked to
    share no key with the column keyring (SharedIndexKey).  Returns the names left without a
    keyring."""
    from sealstore.blind_index import check_separate
    from sealstore.config import config_present, load_config
    from sealstore.errors import ConfigError

    missing = []
    for name in sorted({spec.type.keyring for spec in env.indexes}):
        if args.index_config:
            cfg = load_config(args.index_config, name="index")
        else:
            try:
                present = config_present(name)
            except ConfigError:  # a keyring name that cannot name a configuration
                present = False
            if not present:
                missing.append(name)
                continue
            cfg = load_config(None, name=name)
        keyring = env.register(cfg.load_keyring(), name)
        check_separate(keyring, env.keyring, index_name=name, other_name=args.keyring,
                       what="the blind indexes' keyring")  # fmt: skip
    return missing


def _index_hint(name: str) -> str:
    from sealstore.config import env_prefix
    from sealstore.errors import ConfigError

    try:
        prefix = env_prefix(name)
    except ConfigError:
        return "pass --index-config PATH"
    return f"pass --index-config PATH or set {prefix}CONFIG"


def _db_url(args, cfg) -> str:
    if args.db:
        return args.db
    if os.environ.get(DB_ENV):
        return os.environ[DB_ENV]
    url = getattr(cfg.key_source, "url", None)
    if url:
        return url
    raise UsageError(f"no database: pass --db URL or set {DB_ENV}")


def _load_models(spec: str):
    """``module`` or ``module:attr`` -> MetaData / declarative base / list of them."""
    from sqlalchemy import MetaData

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like alembic: models of the project in this directory
    module_name, _, attr = spec.partition(":")
    module, failure = None, None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        failure = f"cannot import {module_name} ({exc})"
    except SyntaxError as exc:
        failure = f"{module_name} has a syntax error ({exc.filename}, line {exc.lineno}: {exc.msg})"
    except Exception as exc:  # noqa: BLE001 - the user's module raised: name it, no traceback
        failure = f"importing {module_name} raised {type(exc).__name__}: {exc}"
    if failure is not None:
        raise UsageError(f"--models {spec}: {failure}")
    if attr:
        try:
            return getattr(module, attr)
        except AttributeError:
            raise UsageError(f"--models {spec}: {module_name} has no attribute {attr}") from None
    found: list[Any] = []
    for value in vars(module).values():
        meta = value if isinstance(value, MetaData) else getattr(value, "metadata", None)
        if isinstance(meta, MetaData) and not any(meta is m for m in found):
            found.append(meta)
    if not found:
        raise UsageError(f"--models {spec}: no MetaData or declarative base in {module_name}")
    return found


def _specs(args, engine, keyring_name: str):
    """(column specs, index specs) selected by --models/--column/--table."""
    from sealstore.migrations.rotation.spec import ColumnSpec, specs_from_metadata

    columns, indexes = [], []
    for m in args.models or ():
        c, i = specs_from_metadata(_load_models(m))
        columns += c
        indexes += i
    for name in args.column or ():
        table, sep, column = name.rpartition(".")
        if not sep or not table:
            raise UsageError(f"--column {name}: expected TABLE.COLUMN")
        schema, _, table = table.rpartition(".")
        columns.append(
            ColumnSpec.reflect(engine, table, column, keyring=keyring_name, schema=schema or None)
        )
    if not args.models and not args.column:
        raise UsageError("name the columns: --models MODULE[:ATTR] or --column TABLE.COLUMN")
    if args.table:
        tables = sorted({s.table for s in columns} | {s.table for s in indexes})
        columns = [s for s in columns if s.table == args.table]
        indexes = [s for s in indexes if s.table == args.table]
        if not columns and not indexes:
            raise UsageError(
                f"--table {args.table}: no encrypted column or blind index in that table "
                f"(tables with some: {', '.join(tables) or 'none'})"
            )
    return columns, indexes


def _engine(url: str, *, must_exist: bool = True):
    """An Engine on ``url`` that keeps parameters out of its errors; a bad URL, an unknown
    dialect or a missing driver is a UsageError, an unreachable database a RuntimeFailure."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(
            "--db: not a database URL; expected dialect[+driver]://user:password@host/database "
            "(e.g. postgresql+psycopg://app@localhost/app, sqlite:///app.db)"
        ) from None
    if must_exist and parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if (
            path
            and path != ":memory:"
            and not path.startswith("file:")
            and not os.path.exists(path)
        ):
            raise RuntimeFailure(f"--db: no SQLite database at {path}")
    failure: Exception
    try:
        return create_engine(parsed, hide_parameters=True)
    except NoSuchModuleError:
        failure = UsageError(
            f"--db: unknown database dialect or driver {parsed.drivername!r} "
            "(postgresql+psycopg, mysql+pymysql, sqlite, ...)"
        )
    except ImportError as exc:
        failure = RuntimeFailure(
            f"--db: the driver for {parsed.drivername!r} is not installed "
            f"({type(exc).__name__}: {exc}); install that driver, or name an installed one "
            "(postgresql+psycopg, mysql+pymysql, ...)"
        )
    raise failure


def _connect_check(engine) -> None:
    """Connect once, without retrying: a wrong host, port, database or password is reported
    at once rather than retried for the whole budget."""
    from sealstore.migrations.transient import describe, first_line
    from sqlalchemy.exc import SQLAlchemyError

    failure = None
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        where = engine.url.render_as_string(hide_password=True)
        failure = RuntimeFailure(
            f"cannot connect to {where}: {describe(exc)}: {first_line(exc)}; check the host, "
            "port, database name and credentials in --db"
        )
    if failure is not None:
        engine.dispose()
        raise failure


def _check_tables(engine, columns, indexes) -> None:
    from sqlalchemy import inspect

    with engine.connect() as conn:
        insp = inspect(conn)
        names = {(getattr(s, "schema", None), s.table) for s in [*columns, *indexes]}
        missing = sorted(
            f"{schema}.{table}" if schema else table
            for schema, table in names if not insp.has_table(table, schema=schema)
        )  # fmt: skip
    if missing:
        raise RuntimeFailure(
            f"the database has no table {', '.join(missing)}: create the application's "
            "tables first (alembic upgrade head, or metadata.create_all)"
        )


def _check_models(args, engine, columns, indexes) -> None:
    """ColumnNotConverted / ColumnTypeMismatch (exit 3) when a column of the tables the
    command works on is not stored as its model declares: an encrypted column still plaintext
    or of another type, or a plain model column that holds sealed values."""
    from sealstore.migrations.rotation.spec import _tables
    from sealstore.migrations.rotation.stored import check_plain_columns, check_specs

    names = {(s.schema, s.table) for s in columns} | {(s.source.schema, s.table) for s in indexes}
    tables = [
        t for m in args.models or () for t in _tables(_load_models(m))
        if (t.schema, t.name) in names
    ]  # fmt: skip
    with engine.connect() as conn:
        check_specs(conn, [*columns, *indexes])
        check_plain_columns(conn, tables)


@contextmanager
def _setup(args):
    """(keyring, engine, column specs using that keyring, index specs); closes and disposes
    them afterwards (and every keyring registered on the way, see ``_extra``)."""
    from sealstore.keyring import forget_keyring, use_keyring

    _check_batch_size(args)
    cfg = _config(args)
    engine = _engine(_db_url(args, cfg))
    keyring = use_keyring(cfg.load_keyring(), args.keyring)
    extra: list = []
    try:
        _connect_check(engine)
        columns, indexes = _specs(args, engine, args.keyring)
        _check_tables(engine, columns, indexes)
        _check_models(args, engine, columns, indexes)
        columns = [s for s in columns if s.keyring == args.keyring]
        yield _Setup(keyring, engine, columns, indexes, extra)
    finally:
        for name, kr in [(args.keyring, keyring), *extra]:
            forget_keyring(name)
            kr.close()
        engine.dispose()


class _Setup:
    def __init__(self, keyring, engine, columns, indexes, extra) -> None:
        self.keyring, self.engine, self.columns, self.indexes = (
            keyring,
            engine,
            columns,
            indexes,
        )
        self._extra = extra

    def register(self, keyring, name: str):
        """Register another keyring (closed and forgotten with the rest)."""
        from sealstore.keyring import use_keyring

        self._extra.append((name, keyring))
        return use_keyring(keyring, name)


def _progress(args):
    from sealstore.migrations.rotation.progress import make_progress

    return make_progress("none" if args.json else args.progress)


def _pk(pk: tuple) -> str:
    return ", ".join(map(str, pk)) if len(pk) > 1 else str(pk[0])


def _fail(message: str, code: int) -> int:
    print(f"sealstore: error: {message}", file=sys.stderr)
    return code


def _check_batch_size(args) -> None:
    if getattr(args, "batch_size", 1) < 1:
        raise UsageError(f"--batch-size must be at least 1, not {args.batch_size}")
    if getattr(args, "retry_budget", 0) < 0:
        raise UsageError(f"--retry-budget must be >= 0 seconds, not {args.retry_budget:g}")


def _retry(args):
    from sealstore.migrations.transient import RetryPolicy

    return RetryPolicy(budget=args.retry_budget)


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Usage errors exit 2; environment and database failures exit 1; one line each."""

    def wrapper(args: argparse.Namespace) -> int:
        from sealstore.errors import ColumnTypeMismatch
        from sealstore.migrations.transient import describe, safe_text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return fn(args)
        except UsageError as exc:
            return _fail(str(exc), 2)
        except RuntimeFailure as exc:
            return _fail(str(exc), 1)
        except ColumnTypeMismatch as exc:  # the models and the database disagree: exit 3
            return _fail(str(exc), 3)
        except SQLAlchemyError as exc:  # no parameters, no text that may quote a value
            return _fail(f"database error: {describe(exc)}{safe_text(exc)}", 1)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _report_workers(args, results, verb: str, done: str) -> int:
    """Print a rotate/reindex run (lines, or JSON with --json); the exit code: 0 when clean."""
    lines, clean = [], True
    for r in results:
        if r.dry_run:
            per_key = ", ".join(
                f"{'-' if k is None else f'{k:08x}'}: {n}"
                for k, n in sorted(r.by_key.items(), key=str)
            )
            lines.append(
                f"{r.name}: would {verb} {r.total_estimate} values"
                + (f" ({per_key})" if per_key else "")
            )
            continue
        lines.append(
            f"{r.name}: job {r.job_id} {r.status}; this worker {done} {r.resealed} values in "
            f"{r.batches} batches ({r.conflicted} changed meanwhile, re-read; {r.failed} failed); "
            f"{r.remaining} values not under {r.target_key_id:08x}"
        )
        for pk, key_id, error in r.failures:
            kid = "-" if key_id is None else f"{key_id:08x}"
            lines.append(f"  failed: {r.name} row {_pk(pk)} (key {kid}): {error}")
        if r.status != "done" or r.failed or r.remaining:
            clean = False
    print(_results_json(results) if args.json else "\n".join(lines))
    return 0 if clean or args.dry_run else 1


def _results_json(results) -> str:
    out = []
    for r in results:
        out.append({
            "column": r.name, "job_id": r.job_id, "status": r.status, "target_key_id": f"{r.target_key_id:08x}",
            "batches": r.batches, "rewritten": r.resealed, "conflicted": r.conflicted, "failed": r.failed,
            "remaining": r.remaining, "total_estimate": r.total_estimate, "dry_run": r.dry_run,
            "by_key": {("-" if k is None else f"{k:08x}"): n for k, n in r.by_key.items()},
            "failures": [{"pk": list(map(str, pk)), "key_id": None if k is None else f"{k:08x}", "error": e}
                         for pk, k, e in r.failures],
        })  # fmt: skip
    return json.dumps(out, indent=2)


# ---- commands ----------------------------------------------------------------------------------


@_guard
def cmd_rotate(args: argparse.Namespace) -> int:
    """Re-seal every value not under the primary key (resumable; run on several machines)."""
    from sealstore.migrations.rotation.reseal import rotate

    with _setup(args) as env:
        if not env.columns:
            raise UsageError(f"no encrypted column uses keyring {args.keyring!r}")
        results = rotate(
            env.engine, env.columns, batch_size=args.batch_size, dry_run=args.dry_run,
            progress=_progress(args), retry=_retry(args),
        )  # fmt: skip
    return _report_workers(args, results, "re-seal", "re-sealed")


@_guard
def cmd_reindex(args: argparse.Namespace) -> int:
    """Recompute blind indexes that are not under the index keyring's primary key."""
    from sealstore.migrations.rotation.reindex import reindex

    with _setup(args) as env:
        if not env.indexes:
            raise UsageError("no blind index found in --models")
        missing = _index_keyrings(args, env)
        if missing:
            raise UsageError(
                f"no configuration for the index keyring {missing[0]!r}: {_index_hint(missing[0])}"
            )
        results = reindex(
            env.engine, env.indexes, batch_size=args.batch_size, dry_run=args.dry_run,
            progress=_progress(args), retry=_retry(args),
        )  # fmt: skip
    return _report_workers(args, results, "re-index", "re-indexed")


@_guard
def cmd_status(args: argparse.Namespace) -> int:
    """Rows per key id for each column (SQL only, nothing decrypted), NULLs, running jobs;
    exit 1 while values remain under keys other than the primary (or hold no key id)."""
    from sealstore.migrations.rotation.status import status

    with _setup(args) as env:
        missing = _index_keyrings(args, env) if env.indexes else []
        report = status(env.engine, env.columns, env.indexes)
        states = {k.key_id: k.state.value for k in env.keyring.keys}
    if args.json:
        print(_status_json(report))
    else:
        _print_key_table(report, states)
        _print_jobs(report.jobs)
    # exit 1 while anything is left: values under old keys (or holding no key id), index
    # values never filled, blind indexes whose keyring is unknown
    for name in missing:
        print(
            f"sealstore: the keyring {name!r} of the blind indexes is not configured, so their "
            f"primary key is unknown: {_index_hint(name)}",
            file=sys.stderr,
        )
    columns = [c for c in report.columns if c.kind == "encrypted"]
    indexes = [c for c in report.columns if c.kind != "encrypted"]
    old_values = sum(c.not_primary for c in columns)
    old_index = sum(c.not_primary for c in indexes if c.primary_key_id is not None)
    unfilled = sum(c.unfilled for c in indexes)
    if old_values:
        print(
            f"sealstore: {old_values} values are not under their primary key (run sealstore rotate)",
            file=sys.stderr,
        )
    if old_index:
        print(
            f"sealstore: {old_index} blind-index values are not under the index keyring's primary "
            "key (run sealstore reindex)",
            file=sys.stderr,
        )
    if unfilled:
        print(
            f"sealstore: {unfilled} blind-index values are NULL while their source is set (an "
            "index added to existing rows; lookups through it raise IndexIncomplete: run "
            "sealstore reindex)",
            file=sys.stderr,
        )
    return 1 if old_values or old_index or unfilled or missing else 0


def _status_json(report) -> str:
    from sealstore.migrations.rotation.jobs import is_dead

    return json.dumps({
        "columns": [{
            "column": c.name, "kind": c.kind, "rows": c.rows, "nulls": c.nulls,
            "primary": None if c.primary_key_id is None else f"{c.primary_key_id:08x}",
            "by_key": {("-" if k is None else f"{k:08x}"): n for k, n in c.by_key.items()},
            "not_primary": c.not_primary, "keyring": c.keyring,
            **({"unfilled": c.unfilled} if c.kind == "blind index" else {}),
        } for c in report.columns],
        "jobs": [{
            "job_id": j.job_id, "kind": j.kind, "column": f"{j.table_name}.{j.column_name}",
            "target_key_id": f"{j.target_key_id:08x}", "done": j.done, "total_estimate": j.total_estimate,
            "heartbeat_at": j.heartbeat_at.isoformat() if j.heartbeat_at else None, "worker": j.worker,
            "dead": is_dead(j),
        } for j in report.jobs],
    }, indent=2)  # fmt: skip


def _print_key_table(report, states: dict) -> None:
    """COLUMN / KEY ID / STATE / ROWS, most used key first, then each column's NULLs."""
    table = [("COLUMN", "KEY ID", "STATE", "ROWS")]
    for c in report.columns:
        for k, n in sorted(c.by_key.items(), key=lambda kv: -kv[1]):
            if k is None:
                state = "malformed"
            elif c.kind == "blind index":
                if c.primary_key_id is None:
                    state = "unknown-keyring"
                else:
                    state = "primary" if k == c.primary_key_id else "index key"
            else:
                state = states.get(k, "unknown")
            table.append((c.name, "-" if k is None else f"{k:08x}", state, str(n)))
        if c.kind == "blind index" and c.unfilled:
            table.append((c.name, "NULL", "unfilled", str(c.unfilled)))  # source set
            if c.nulls - c.unfilled:
                table.append((c.name, "NULL", "-", str(c.nulls - c.unfilled)))
        else:
            table.append((c.name, "NULL", "-", str(c.nulls)))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _print_jobs(jobs) -> None:
    """One line per running job: progress, last heartbeat, and whether its lease ran out."""
    from datetime import datetime, timezone

    from sealstore.migrations.rotation.jobs import LEASE_SECONDS, is_dead

    now = datetime.now(timezone.utc)
    for j in jobs:
        total = f"/{j.total_estimate}" if j.total_estimate is not None else ""
        beat = "never"
        if j.heartbeat_at is not None:
            hb = (
                j.heartbeat_at
                if j.heartbeat_at.tzinfo
                else j.heartbeat_at.replace(tzinfo=timezone.utc)
            )
            beat = f"{int((now - hb).total_seconds())}s ago by {j.worker}"
        dead = (
            f" -- DEAD (no heartbeat for over {LEASE_SECONDS:g}s; the next run takes it over)"
            if is_dead(j, at=now) else ""
        )  # fmt: skip
        print(
            f"job {j.job_id}: {j.kind} {j.table_name}.{j.column_name} to {j.target_key_id:08x}: "
            f"{j.done}{total} done, heartbeat {beat}{dead}"
        )
    if not jobs:
        print("no running jobs")


@_guard
def cmd_verify(args: argparse.Namespace) -> int:
    """Open every value; list the rows that fail by primary key and key id (no plaintext)."""
    from sealstore.migrations.rotation.verify import verify

    with _setup(args) as env:
        results = verify(
            env.engine,
            env.columns,
            batch_size=args.batch_size,
            progress=_progress(args),
        )
    bad = 0
    for r in results:
        bad += r.failed
        if args.json:
            continue
        print(f"{r.name}: {r.checked} values checked, {r.failed} failed")
        for f in r.failures:
            print(f"  failed: {r.name} row {_pk(f.pk)} (key {f.key_id_hex}): {f.error}")
    if args.json:
        print(json.dumps([{
            "column": r.name, "checked": r.checked, "failed": r.failed,
            "failures": [{"pk": list(map(str, f.pk)), "key_id": f.key_id_hex, "error": f.error} for f in r.failures],
        } for r in results], indent=2))  # fmt: skip
    return 1 if bad else 0


@_guard
def cmd_retire(args: argparse.Namespace) -> int:
    """Retire a key once nothing references it (``--force``: retire anyway, saying what breaks)."""
    return _retire_or_destroy(args, "retire")


@_guard
def cmd_destroy(args: argparse.Namespace) -> int:
    """Destroy a key (its material is gone for good) once nothing references it; the same
    checks and ``--force`` as ``keys retire``."""
    return _retire_or_destroy(args, "destroy")


_DONE = {"retire": "retired", "destroy": "destroyed"}
_DOING = {"retire": "retiring", "destroy": "destroying"}
_AFTER = {
    "retire": "they will fail to open (KeyNotUsable: retired) until the key is reactivated, "
    "and never again once it is destroyed",
    "destroy": "they will never open again (KeyNotUsable: destroyed); nothing can bring them back",
}


def _retire_or_destroy(args, action: str) -> int:
    key_id = _parse_key_id(args.key_id)
    cfg = _config(args)
    engine = _optional_engine(args, cfg)
    specs = _reference_specs(args, engine)
    urls = _s3_urls(args, engine)
    checked = [s.name for s in specs] + urls
    if not checked and not args.force:
        raise UsageError(
            "nothing to check: name the columns (--models/--column) and S3 prefixes (--s3)"
        )
    source = cfg.key_source_object()
    keyring = source.load(suite=cfg.suite, tag_size=cfg.tag_size)
    try:
        key = keyring.get(key_id)  # UnknownKeyId -> exit 1
        refs = _references(args, engine if specs or urls else None, specs, key_id, urls)
        if _refused(action, key, refs, checked, args.force):
            if args.json:
                print(_retire_json(key, action, refs, checked, done=False))
            return 1
        getattr(keyring, action)(key_id)
        source.save(keyring)
    finally:
        keyring.close()
        if engine is not None:
            engine.dispose()
    if args.json:
        print(_retire_json(key, action, refs, checked, done=True))
    elif refs:
        print(f"key {key.id_hex} {_DONE[action]} (forced)")
    else:
        print(f"key {key.id_hex} {_DONE[action]}; checked {', '.join(checked) or 'nothing'}")
    return 0


def _retire_json(key, action: str, refs, checked: list[str], *, done: bool) -> str:
    return json.dumps({
        "key_id": key.id_hex, "action": action, "done": done, "state": key.state.value,
        "forced": bool(refs) and done, "checked": checked,
        "references": [{"name": r.name, "count": r.count, "kind": r.kind} for r in refs],
    }, indent=2)  # fmt: skip


def _parse_key_id(text: str) -> int:
    try:
        return int(text, 16)
    except ValueError:
        raise UsageError(
            f"KEY_ID must be 8 hex digits (sealstore keys list), not {text!r}"
        ) from None


def _optional_engine(args, cfg):
    """An engine on the database of ``--db`` / the environment / the key source, connected
    once; None when no database is named."""
    try:
        url = _db_url(args, cfg)
    except UsageError:
        return None
    engine = _engine(url)
    _connect_check(engine)
    return engine


def _reference_specs(args, engine) -> list:
    """The specs of every column and blind index named by --models/--column (any keyring: a
    key id names one key whatever its keyring); [] when none is named."""
    if not (args.models or args.column):
        return []
    if engine is None:
        raise UsageError(f"--models/--column need a database: pass --db URL or set {DB_ENV}")
    columns, indexes = _specs(args, engine, args.keyring)
    return columns + indexes


def _s3_urls(args, engine) -> list[str]:
    """The --s3 prefixes, then those registered in the database that are not among them."""
    from sealstore.migrations.rotation.retire import registered_s3_prefixes

    urls = list(args.s3 or ())
    if engine is not None:
        urls += [u for u in registered_s3_prefixes(engine) if u not in urls]
    return urls


def _references(args, engine, specs, key_id: int, urls: list[str]):
    """The columns and S3 prefixes whose values still use ``key_id``."""
    from sealstore.migrations.rotation.retire import find_references

    client = None
    if urls:
        require("s3", "checking S3 prefixes for a key's objects", ("boto3",))
        import boto3

        client = boto3.client("s3", endpoint_url=args.endpoint_url, region_name=args.region)
    return find_references(engine, specs, key_id, s3_client=client, s3_urls=urls)


def _refused(action: str, key, refs, checked: list[str], force: bool) -> bool:
    """Say why ``action`` must not go ahead (True), or what ``--force`` goes ahead with."""
    from sealstore.migrations.rotation.retire import describe, remedy

    if refs and not force:
        print(
            f"sealstore: refusing to {action} key {key.id_hex}: {sum(r.count for r in refs)} values "
            f"still use it ({describe(refs)}); run {remedy(refs)} first, or pass --force",
            file=sys.stderr,
        )
        return True
    if refs:
        print(
            f"--force: {_DOING[action]} key {key.id_hex} while {sum(r.count for r in refs)} values "
            f"still use it ({describe(refs)}): {_AFTER[action]}",
            file=sys.stderr,
        )
    elif not checked:
        print(
            f"--force: {_DOING[action]} key {key.id_hex} without checking any column or S3 prefix",
            file=sys.stderr,
        )
    return False


@_guard
def cmd_db_init(args: argparse.Namespace) -> int:
    """Create sealstore's tables (jobs, batches, S3 prefixes, key registry) where missing."""
    from sealstore.migrations.schema import create_tables
    from sealstore.migrations.transient import RetryPolicy, scrubbed

    cfg = _config(args)
    engine = _engine(_db_url(args, cfg), must_exist=False)
    try:
        _connect_check(engine)
        scrubbed("db init", RetryPolicy().call, lambda: create_tables(engine), "db init")
    finally:
        engine.dispose()
    where = engine.url.render_as_string(hide_password=True)
    if args.json:
        print(json.dumps({"database": where, "tables": "ready"}, indent=2))
    else:
        print(f"sealstore tables ready in {where}")
    return 0


# ---- parsers -------------------------------------------------------------------------------------


def _columns_args(p, *, progress: bool = True, json_output: bool = True) -> None:
    p.add_argument("--db", metavar="URL", help=f"SQLAlchemy database URL (default ${DB_ENV})")
    p.add_argument(
        "--models",
        action="append",
        metavar="MODULE[:ATTR]",
        help="models whose encrypted columns to use",
    )
    p.add_argument(
        "--column",
        action="append",
        metavar="TABLE.COLUMN",
        help="a column-bound column by name",
    )
    p.add_argument("--table", help="only this table")
    p.add_argument(
        "--keyring",
        default="default",
        help="keyring name the columns use (default: default)",
    )
    if json_output:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    if progress:
        p.add_argument(
            "--batch-size",
            type=int,
            default=2000,
            metavar="N",
            help="rows per batch and transaction (default 2000)",
        )
        p.add_argument("--retry-budget", type=float, default=60.0, metavar="SECONDS",
                       help="how long to retry deadlocks and lost connections (default 60)")  # fmt: skip
        p.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto",
                       help="progress bar on a terminal, log lines otherwise (default auto)")  # fmt: skip


def _index_config_arg(p) -> None:
    p.add_argument(
        "--index-config",
        metavar="PATH",
        help="sealstore config of the blind indexes' keyring, loaded as the 'index' "
        "configuration (only SEALSTORE_INDEX_* variables apply); default: "
        "$SEALSTORE_INDEX_CONFIG / SEALSTORE_INDEX_* when set",
    )


def add_commands(commands: Subcommands) -> None:
    """Add rotate, reindex, status and verify to the console script's sub-commands."""
    p = commands.add_parser(
        "rotate",
        help="re-seal column values under the primary key (online, resumable)",
        description="Re-seal every value of the named encrypted columns that is not under "
        "the keyring's primary key, in batches, online and resumable; exit 1 when values "
        "are left (failures, rows changed meanwhile).",
    )
    _columns_args(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="only count, per key id, what would change",
    )
    p.set_defaults(func=cmd_rotate)

    p = commands.add_parser(
        "reindex",
        help="recompute blind indexes with the index keyring's primary key",
        description="Recompute the blind indexes that are not under the index keyring's "
        "primary key (online, resumable).",
    )
    _columns_args(p)
    _index_config_arg(p)
    p.add_argument("--dry-run", action="store_true", help="only count what would change")
    p.set_defaults(func=cmd_reindex)

    p = commands.add_parser(
        "status",
        help="rows per key id per column (SQL only), running jobs",
        description="Count the rows of each encrypted column and blind index per key id "
        "(SQL only, nothing decrypted), the blind-index values never filled (NULL while the "
        "source is set), and list running jobs. Exit status 1 while anything is left: values "
        "under keys other than their keyring's primary (rotate / reindex not finished), "
        "unfilled index values (reindex), blind indexes whose keyring is not configured; "
        "else 0.",
    )
    _columns_args(p, progress=False)
    _index_config_arg(p)
    p.set_defaults(func=cmd_status)

    p = commands.add_parser(
        "verify",
        help="open every value; report failing rows by primary key",
        description="Open every value of the named columns (nothing printed but row keys "
        "and key ids); exit 1 when some fail.",
    )
    _columns_args(p)
    p.set_defaults(func=cmd_verify)


def add_db_commands(commands: Subcommands) -> None:
    """Add ``db init``."""
    db = commands.add_parser(
        "db",
        help="sealstore's own tables",
        description="Manage sealstore's own tables (jobs, batches, S3 prefixes, key registry).",
    ).add_subparsers(dest="db_command", required=True, metavar="ACTION")
    p = db.add_parser(
        "init",
        help="create sealstore's tables (for applications without Alembic)",
        description="Create sealstore's tables where missing (applications with Alembic run "
        "its sealstore migrations instead).",
    )
    p.add_argument("--db", metavar="URL", help=f"SQLAlchemy database URL (default ${DB_ENV})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_db_init)


def add_keys_commands(keys: Subcommands) -> None:
    """Add ``keys retire`` and ``keys destroy`` to the ``keys`` sub-commands."""
    for action, func, what in (
        ("retire", cmd_retire, "retire a key once no value uses it (--force: anyway)"),
        ("destroy", cmd_destroy, "destroy a key for good once no value uses it (--force: anyway)"),
    ):
        _retire_parser(keys.add_parser(action, help=what, description=_DESCRIBE[action]), func)


_DESCRIBE = {
    "retire": "Retire a key once no column value, blind index or S3 object uses it (values "
    "under a retired key no longer open until it is reactivated); --force retires it anyway.",
    "destroy": "Destroy a key's material for good once no value uses it; --force destroys it "
    "anyway (values under it never open again).",
}


def _retire_parser(p, func) -> None:
    p.add_argument("key_id", metavar="KEY_ID", help="8 hex digits (sealstore keys list)")
    _columns_args(p, progress=False)
    p.add_argument(
        "--s3",
        action="append",
        metavar="s3://BUCKET/PREFIX",
        help="also check these objects",
    )
    p.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS)")
    p.add_argument("--region", help="S3 region (default: boto3's)")
    p.add_argument("--force", action="store_true", help="go ahead even if values still use the key")
    p.set_defaults(func=func)
