"""``sealstore keys retire`` and ``keys destroy``: a key is retired (or destroyed) only once no
column value, blind index or S3 object uses it, or with ``--force``, saying what breaks.  The
references are counted by ``rotation/retire.py`` over the columns named by ``--models`` /
``--column`` and the object prefixes of ``--objects``/``--s3`` plus those registered in the database; the
parsers are in ``rotation/cli.py``.
"""

from __future__ import annotations

import argparse
import sys


from .cli_output import _retire_json
from .cli_setup import (
    DB_ENV,
    UsageError,
    _config,
    _connect_check,
    _db_url,
    _engine,
    _guard,
    _specs,
)

__all__ = ["cmd_destroy", "cmd_retire"]


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
            "nothing to check: name the columns (--models/--column) and object prefixes (--objects)"
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
    from sealstore.migrations.rotation.retire import registered_object_prefixes

    urls = list(args.s3 or ())
    if engine is not None:
        urls += [u for u in registered_object_prefixes(engine) if u not in urls]
    return urls


def _references(args, engine, specs, key_id: int, urls: list[str]):
    """The columns and object prefixes whose values still use ``key_id`` (each prefix's store
    from the store registry, with --endpoint-url/--region)."""
    from sealstore.adapters.objects.stores import parse_object_url
    from sealstore.migrations.rotation.retire import find_references

    for url in urls:  # a URL of no known store is a usage error, before anything is read
        try:
            parse_object_url(url)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    # (no broader except here: a column error, e.g. ColumnNotConverted, keeps its exit status)
    return find_references(
        engine, specs, key_id, urls=urls, endpoint_url=args.endpoint_url, region=args.region
    )


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
            f"--force: {_DOING[action]} key {key.id_hex} without checking any column or object prefix",
            file=sys.stderr,
        )
    return False
