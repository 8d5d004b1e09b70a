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

The commands and their parsers are here; what they share is in ``cli_setup.py`` (arguments to
a configured run, the shared arguments, the failure guard), what they print in
``cli_output.py`` (lines and ``--json``), ``keys retire`` / ``destroy`` in ``retire_cli.py``.
"""

from __future__ import annotations

import argparse
import contextlib

from .cli_output import _report_db_init, _report_status, _report_verify, _report_workers
from .cli_setup import (
    DB_ENV,
    Subcommands,
    UsageError,
    _columns_args,
    _config,
    _connect_check,
    _db_url,
    _engine,
    _guard,
    _index_config_arg,
    _index_hint,
    _index_keyrings,
    _progress,
    _retry,
    _setup,
    _tenancy,
)
from .retire_cli import cmd_destroy, cmd_retire

__all__ = ["add_commands", "add_db_commands", "add_keys_commands"]


# ---- commands ----------------------------------------------------------------------------------


@_guard
def cmd_rotate(args: argparse.Namespace) -> int:
    """Re-seal every value not under the primary key (resumable; run on several machines)."""
    from sealstore.migrations.rotation.reseal import rotate

    if args.objects:
        if args.models or args.column:
            raise UsageError("rotate columns (--models/--column) and --objects in separate runs")
        return _rotate_objects(args)
    with _setup(args) as env:
        if not env.columns:
            raise UsageError(f"no encrypted column uses keyring {args.keyring!r}")
        results = rotate(
            env.engine, env.columns, batch_size=args.batch_size, dry_run=args.dry_run,
            progress=_progress(args), retry=_retry(args),
        )  # fmt: skip
    return _report_workers(args, results, "re-seal", "re-sealed")


def _rotate_objects(args: argparse.Namespace) -> int:
    """``rotate --objects URL...``: each prefix's job shared through the database with the
    other workers; without a database, one process per prefix with a checkpoint file."""
    import json
    from dataclasses import asdict

    from sealstore.adapters.objects.engine import ObjectSealing
    from sealstore.adapters.objects.progress import make_object_progress
    from sealstore.adapters.objects.rotation import default_checkpoint, rotate_objects
    from sealstore.adapters.objects.stores import open_store, parse_object_url
    from sealstore.adapters.objects.tenancy import ObjectTenancy
    from sealstore.migrations.rotation.objects import rotate_prefix

    if args.objects_batch_size < 1:
        raise UsageError("--objects-batch-size must be at least 1")
    if args.dry_run:
        raise UsageError("--dry-run with --objects: count with `sealstore s3 rotate --dry-run`")
    try:
        urls = [parse_object_url(u) for u in args.objects]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    cfg = _config(args)
    try:
        db_url = _db_url(args, cfg)
    except UsageError:
        db_url = None
    engine = None
    if db_url is not None and not args.no_database:
        engine = _engine(db_url)
        _connect_check(engine)
    keyring = cfg.load_keyring()
    mode = "none" if args.json or args.progress == "none" else "lines"
    progress = make_object_progress(mode, verbose=False)
    results: list[dict] = []
    failed = False
    scope = contextlib.ExitStack()
    try:
        _tenancy(args, scope)  # --tenant: re-seal under the tenant's keys, bound to it
        tenancy = ObjectTenancy(tenant=args.tenant) if getattr(args, "tenant", None) else None
        sealing = ObjectSealing(keyring, bind_location=True, tenancy=tenancy)
        for url in urls:
            store = open_store(url, endpoint_url=args.endpoint_url, region=args.region)
            if engine is not None:
                r = rotate_prefix(engine, sealing, store, str(url),
                                  batch_size=args.objects_batch_size, progress=progress,
                                  pause=args.pause)  # fmt: skip
                doc = {"url": str(url), "coordinated": True, **asdict(r)}
                line = (f"{url}: job {r.job_id}, {r.scanned} objects in {r.batches} batches, "
                        f"{r.resealed} re-sealed, {len(r.conflicts)} conflicts, "
                        f"{len(r.failures)} failed{'' if r.complete else ' (job left running)'}")  # fmt: skip
            else:
                rep = rotate_objects(sealing, store, url.bucket, url.prefix,
                                        checkpoint=default_checkpoint(str(url)), progress=progress,
                                        pause=args.pause)  # fmt: skip
                doc = {"url": str(url), "coordinated": False, **asdict(rep)}
                line = (f"{url}: {rep.scanned} objects, {rep.resealed + rep.repaired} "
                        f"re-sealed, {len(rep.conflicts)} conflicts, {len(rep.failures)} "
                        "failed (no database: checkpoint file)")  # fmt: skip
            failed = failed or bool(doc["failures"] or doc["conflicts"])
            results.append(doc)
            if not args.json:
                print(line)
    finally:
        scope.close()
        progress.close()
        keyring.close()
        if engine is not None:
            engine.dispose()
    if args.json:
        print(json.dumps({"objects": results}, default=str))
    return 1 if failed else 0


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
    return _report_status(args, report, states, missing)


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
    return _report_verify(args, results)


@_guard
def cmd_db_init(args: argparse.Namespace) -> int:
    """Create sealstore's tables (jobs, batches, object prefixes, key registry) where missing."""
    from sealstore.migrations.schema import create_tables
    from sealstore.migrations.transient import RetryPolicy, scrubbed
    from sealstore.redact import mask_url

    cfg = _config(args)
    engine = _engine(_db_url(args, cfg), must_exist=False)
    try:
        _connect_check(engine)
        scrubbed("db init", RetryPolicy().call, lambda: create_tables(engine), "db init")
    finally:
        engine.dispose()
    where = mask_url(engine.url.render_as_string(hide_password=False))
    _report_db_init(args, where)
    return 0


# ---- parsers -------------------------------------------------------------------------------------


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
    p.add_argument(
        "--objects",
        action="append",
        metavar="URL",
        help="re-seal the objects under this prefix (s3://BUCKET/PREFIX, or another store's "
        "URL) instead of columns; the work is shared through the database's job tables with "
        "every worker started on it (without a database: a checkpoint file per prefix)",
    )
    p.add_argument("--objects-batch-size", type=int, default=100, metavar="N",
                   help="objects per batch (default 100)")  # fmt: skip
    p.add_argument("--endpoint-url", help="the object store's endpoint (S3-compatible)")
    p.add_argument("--region", help="the object store's region")
    p.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                   help="--objects: wait between objects (throttle)")  # fmt: skip
    p.add_argument("--no-database", action="store_true",
                   help="--objects without the database: one process per prefix, checkpoint file")  # fmt: skip
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
        description="Manage sealstore's own tables (jobs, batches, object prefixes, key registry).",
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
        "--objects",
        "--s3",
        dest="s3",
        action="append",
        metavar="URL",
        help="also check the objects under this prefix (s3://BUCKET/PREFIX, or another "
        "store's URL: sealstore.adapters.objects.stores)",
    )
    p.add_argument(
        "--endpoint-url", help="the object store's endpoint (S3-compatible: default AWS)"
    )
    p.add_argument("--region", help="the object store's region (S3: default from the environment)")
    p.add_argument("--force", action="store_true", help="go ahead even if values still use the key")
    p.set_defaults(func=func)
