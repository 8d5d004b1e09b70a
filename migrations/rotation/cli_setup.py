"""What every migrations command starts from: its arguments turned into a configuration, a
keyring, a database engine (connected once) and the column and blind-index specs of the named
models, checked against the database; the arguments those commands share (``--db``,
``--models``, ``--column``, ...); and the guard that turns each failure into one line and an
exit status (2 usage, 1 environment or database, 3 a column not stored as its model declares).

Used by ``rotation/cli.py`` (rotate, reindex, status, verify, db init), ``rotation/retire_cli.py``
(keys retire / destroy), ``alembic/cli.py`` and ``medium_cli.py``.
"""

from __future__ import annotations

import contextlib

from typing import Any, TypeAlias

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager

__all__ = ["DB_ENV", "RuntimeFailure", "Subcommands", "UsageError"]

DB_ENV = "SEALSTORE_DATABASE_URL"

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class UsageError(Exception):
    """Bad arguments discovered after parsing (exit status 2)."""


class RuntimeFailure(Exception):
    """The arguments are fine but the environment is not (exit status 1)."""


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
    from sealstore.redact import mask_url
    from sqlalchemy.exc import SQLAlchemyError

    failure = None
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        where = mask_url(engine.url.render_as_string(hide_password=False))
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
    scope = contextlib.ExitStack()
    try:
        _tenancy(args, scope)
        _connect_check(engine)
        columns, indexes = _specs(args, engine, args.keyring)
        _check_tables(engine, columns, indexes)
        _check_models(args, engine, columns, indexes)
        columns = [s for s in columns if s.keyring == args.keyring]
        yield _Setup(keyring, engine, columns, indexes, extra)
    finally:
        scope.close()
        for name, kr in [(args.keyring, keyring), *extra]:
            forget_keyring(name)
            kr.close()
        engine.dispose()


def _tenancy(args, scope) -> None:
    """Tenant keys from --tenants-dir / $SEALSTORE_TENANTS_DIR, and the --tenant block."""
    from sealstore import tenants

    directory = getattr(args, "tenants_dir", None) or os.environ.get("SEALSTORE_TENANTS_DIR")
    name = getattr(args, "tenant", None)
    if directory:
        keys = tenants.use_tenant_keys(tenants.TenantKeys(tenants.TenantStore(directory)))
        scope.callback(lambda: tenants.use_tenant_keys(tenants.TenantKeys()))
        scope.callback(keys.close)
    elif name:
        raise UsageError(
            "--tenant needs the tenant keys: --tenants-dir PATH or $SEALSTORE_TENANTS_DIR"
        )
    if name:
        scope.enter_context(tenants.tenant(name))


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


# ---- shared arguments ---------------------------------------------------------------------------


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
        "--tenant",
        metavar="NAME",
        help="tenant-aware columns: the tenant whose values to count or re-seal (schema-"
        "qualified models name theirs); keys from --tenants-dir (docs/TENANTS.md)",
    )
    p.add_argument(
        "--tenants-dir",
        metavar="PATH",
        help="tenant key directory (default $SEALSTORE_TENANTS_DIR)",
    )
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
