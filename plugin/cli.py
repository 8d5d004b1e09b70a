"""The ``sealstore`` console script.  This module adds the ``keys`` commands:

    sealstore --version
    sealstore [--log-level debug|info|warning] COMMAND ...
    sealstore [--config PATH] keys init [--suite SUITE] [--tag-size 16|32] [--json]
    sealstore [--config PATH] keys list [--json]
    sealstore [--config PATH] keys rotate [--suite SUITE] [--json]

The key source comes from the configuration (:func:`sealstore.config.load_config`: the file
given with ``--config`` or ``$SEALSTORE_CONFIG``, then ``SEALSTORE_*`` variables;
``--config-name index`` loads the blind-index keyring's: ``--config`` or
``$SEALSTORE_INDEX_CONFIG``, then ``SEALSTORE_INDEX_*`` variables only).  Nothing
here ever prints key material.  ``--json`` prints one JSON document on stdout and nothing else
there (warnings and errors go to stderr).  ``keys init`` warns loudly on stderr (and in the
JSON ``warning`` field) when it writes plain, unwrapped keys.  Exit status: 0 ok, 1 sealstore
error, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from .errors import MissingExtra, SealstoreError
from .format import Suite

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from .config import SealstoreConfig
    from .keysources.base import KeySource

__all__ = ["build_parser", "main", "version"]

_SUITES = [str(s) for s in Suite]


def _age(since: datetime, now: datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _config(args: argparse.Namespace) -> SealstoreConfig:
    from .config import load_config

    return load_config(args.config, name=getattr(args, "config_name", None))


def version() -> str:
    """The installed distribution's version (``importlib.metadata``), or a note saying why
    there is none (run from a source tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("sealstore")
    except PackageNotFoundError:
        return "unknown (no installed sealstore distribution: pip install sealstore)"


def _plaintext_warning(source: KeySource) -> str:
    return (
        f"WARNING: {source} holds PLAIN, UNWRAPPED keys: anyone who can read it can decrypt "
        "every value sealed with them. For anything but local development configure a "
        "wrapping (key_source.wrapping: master-key or aws-kms; docs/KEYS.md)"
    )


def _cmd_init(args: argparse.Namespace) -> int:
    cfg = _config(args)
    source = cfg.key_source_object()
    keyring = source.init(suite=args.suite or cfg.suite, tag_size=args.tag_size or cfg.tag_size)
    key = keyring.primary
    keyring.close()
    wrapping = source.wrapper.kind if source.wrapper is not None else "none"
    warning = _plaintext_warning(source) if source.wrapper is None else None
    if warning:
        print(f"sealstore: {warning}", file=sys.stderr)
    if args.json:
        doc = {
            "key_source": str(source),
            "wrapping": wrapping,
            "wrapped": source.wrapper is not None,
            "primary": {"id": key.id_hex, "suite": str(key.suite)},
            "warning": warning,
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"created keyring in {source} with primary key {key.id_hex} ({key.suite}), "
        f"wrapping: {wrapping}"
    )
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    cfg = _config(args)
    keyring = cfg.load_keyring()
    now = datetime.now(timezone.utc)
    rows: list[dict[str, Any]] = [
        {
            "id": k.id_hex,
            "suite": str(k.suite),
            "state": k.state.value,
            "created_at": k.created_at.isoformat(),
            "age_seconds": int((now - k.created_at).total_seconds()),
            "rotated_at": k.rotated_at.isoformat() if k.rotated_at else None,
        }
        for k in keyring.keys
    ]
    keyring.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("ID", "SUITE", "STATE", "CREATED", "AGE", "ROTATED")
    table: list[tuple[str, ...]] = [header] + [
        (
            r["id"],
            r["suite"],
            r["state"],
            r["created_at"],
            _age(datetime.fromisoformat(r["created_at"]), now),
            r["rotated_at"] or "-",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _cmd_rotate(args: argparse.Namespace) -> int:
    cfg = _config(args)
    source = cfg.key_source_object()
    keyring = source.load(suite=cfg.suite, tag_size=cfg.tag_size)
    old = keyring.primary
    key = source.rotate(keyring, suite=args.suite)
    keyring.close()
    if args.json:
        doc = {
            "primary": {"id": key.id_hex, "suite": str(key.suite)},
            "previous": {"id": old.id_hex, "state": old.state.value},
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(f"new primary key {key.id_hex} ({key.suite}); {old.id_hex} is now {old.state.value}")
    return 0


def build_parser(programs: dict[str, EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The console script's parser; ``programs`` are the ``sealstore.programs`` entry points
    (looked up when not given)."""
    parser = argparse.ArgumentParser(
        prog="sealstore",
        description="sealstore administration: keys, column and object rotation, checks",
    )
    parser.add_argument("--version", action="version", version=f"sealstore {version()}")
    parser.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        help="print sealstore's log records from this level on to stderr (docs/LOGGING.md)",
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="PATH",
        help="config file (.toml/.json); default $SEALSTORE_CONFIG",
    )
    parser.add_argument(
        "--config-name",
        metavar="NAME",
        help="whose configuration: 'default' (the column keyring: $SEALSTORE_CONFIG and "
        "SEALSTORE_* variables) or 'index' (the blind-index keyring: $SEALSTORE_INDEX_CONFIG "
        "and SEALSTORE_INDEX_* variables only)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    keys = _add_keys_commands(commands)
    programs = _programs() if programs is None else programs
    for name, program in sorted(programs.items()):  # listed for --help; main() runs them
        text = program.load().help
        commands.add_parser(name, help=text, description=text)
    for register in _registered(COMMANDS):
        register(commands, keys)
    return parser


def _add_keys_commands(commands: Any) -> Any:
    """``sealstore keys init | list | rotate``; returns the ``keys`` sub-parsers, where the
    layers above add ``retire`` and ``destroy``."""
    keys = commands.add_parser(
        "keys",
        help="manage the keyring",
        description="Create, list, rotate (and, with the migrations commands, retire or "
        "destroy) the keys of the configured key source; never prints key material.",
    ).add_subparsers(dest="keys_command", required=True, metavar="ACTION")

    p = keys.add_parser(
        "init",
        help="create the keyring with one primary key",
        description="Create the configured key source's keyring with one primary key. Keys "
        "are wrapped when a wrapping (master-key, aws-kms) is configured; plain keys get a "
        "loud warning on stderr.",
    )
    p.add_argument("--suite", choices=_SUITES, help="suite of the first key (default: config)")
    p.add_argument("--tag-size", type=int, choices=(16, 32), help="tag size (default: config)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_init)

    p = keys.add_parser(
        "list",
        help="show ids, suites, states and ages (never material)",
        description="Show each key's id, suite, state, creation time, age and rotation time.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_list)

    p = keys.add_parser(
        "rotate",
        help="create a new primary key; the old one stays active",
        description="Create a new primary key; the old primary stays active, so values "
        "sealed under it still open (sealstore rotate re-seals them).",
    )
    p.add_argument("--suite", choices=_SUITES, help="suite of the new key (default: config)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_rotate)
    return keys


#: entry-point group of the layers above the core (adapters, migrations): ``register(commands,
#: keys)`` adds their sub-commands to the console script's parsers (``commands``) and to
#: ``keys``; the core CLI imports none of them.
COMMANDS = "sealstore.commands"
#: entry-point group of programs with a parser of their own: ``sealstore NAME ARGS...`` is
#: ``program(ARGS)``, an exit status; ``program.help`` is its line in ``sealstore --help``
#: (``sealstore bench``: sealstore.bench.command)
PROGRAMS = "sealstore.programs"


def _registered(group: str) -> list[Any]:
    """The objects of the entry points of ``group``, ordered by entry-point name.  A missing
    one is an error, not a command that silently vanishes: the package's own metadata names
    them, so an install that lacks them is broken."""
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=group), key=lambda ep: ep.name)
    if not found:
        raise SealstoreError(
            f"no {group} entry points: sealstore's install is incomplete (reinstall it)"
        )
    return [_load(ep) for ep in found]


def _load(ep: EntryPoint) -> Any:
    """An entry point's object; for sub-commands whose extra is not installed, a register
    function that adds one command, the entry point's name, which says what to install (so
    ``sealstore --help`` lists it and running it is one line naming the extra, exit 1)."""
    try:
        return ep.load()
    except MissingExtra as exc:
        missing = exc

    def register(commands: Any, keys: Any) -> None:
        p = commands.add_parser(ep.name, help=f"not available: {missing}")
        p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=lambda args: _raise(missing))

    return register


def _raise(exc: Exception) -> NoReturn:
    raise exc


def _programs() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=PROGRAMS)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    programs = _programs()
    if argv[:1] and argv[0] in programs:  # its own parser: every option after the word is its
        status: int = programs[argv[0]].load()(argv[1:])
        return status
    try:
        parser = build_parser(programs)
    except SealstoreError as exc:
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 1
    return run_command(parser.parse_args(argv))


_LOG_LEVELS = ("debug", "info", "warning")


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed ``sealstore`` command; a SealstoreError is one line on stderr and exit 1.
    ``--log-level``: the ``sealstore`` loggers' records go to stderr meanwhile (never stdout,
    which ``--json`` keeps for its document)."""
    logger = logging.getLogger("sealstore")
    level = getattr(args, "log_level", None)
    handler, before = None, logger.level
    if level is not None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level.upper())
    try:
        status: int = args.func(args)
        return status
    except SealstoreError as exc:
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if handler is not None:
            logger.removeHandler(handler)
            logger.setLevel(before)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
