"""The ``sealstore`` console script.  This module adds the ``keys`` commands:

    sealstore [--config PATH] keys init [--suite SUITE] [--tag-size 16|32]
    sealstore [--config PATH] keys list [--json]
    sealstore [--config PATH] keys rotate [--suite SUITE]

The key source comes from the configuration (:func:`sealstore.config.load_config`: the file
given with ``--config`` or ``$SEALSTORE_CONFIG``, then ``SEALSTORE_*`` variables).  Nothing
here ever prints key material.  Exit status: 0 ok, 1 sealstore error, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

from .errors import MissingExtra, SealstoreError
from .format import Suite

__all__ = ["build_parser", "main"]

_SUITES = [str(s) for s in Suite]


def _age(since: datetime, now: datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _config(args):
    from .config import load_config

    return load_config(args.config)


def _cmd_init(args) -> int:
    cfg = _config(args)
    source = cfg.key_source_object()
    keyring = source.init(suite=args.suite or cfg.suite, tag_size=args.tag_size or cfg.tag_size)
    key = keyring.primary
    print(f"created keyring in {source} with primary key {key.id_hex} ({key.suite})")
    return 0


def _cmd_list(args) -> int:
    cfg = _config(args)
    keyring = cfg.load_keyring()
    now = datetime.now(timezone.utc)
    rows = [
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
    table = [header] + [
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


def _cmd_rotate(args) -> int:
    cfg = _config(args)
    source = cfg.key_source_object()
    keyring = source.load(suite=cfg.suite, tag_size=cfg.tag_size)
    old = keyring.primary
    key = source.rotate(keyring, suite=args.suite)
    keyring.close()
    print(f"new primary key {key.id_hex} ({key.suite}); {old.id_hex} is now active")
    return 0


def build_parser(programs: dict | None = None) -> argparse.ArgumentParser:
    """The console script's parser; ``programs`` are the ``sealstore.programs`` entry points
    (looked up when not given)."""
    parser = argparse.ArgumentParser(prog="sealstore", description="sealstore administration")
    parser.add_argument(
        "-c",
        "--config",
        metavar="PATH",
        help="config file (.toml/.json); default $SEALSTORE_CONFIG",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    keys = commands.add_parser("keys", help="manage the keyring").add_subparsers(
        dest="keys_command", required=True, metavar="ACTION"
    )

    p = keys.add_parser("init", help="create the keyring with one primary key")
    p.add_argument("--suite", choices=_SUITES, help="suite of the first key (default: config)")
    p.add_argument("--tag-size", type=int, choices=(16, 32), help="tag size (default: config)")
    p.set_defaults(func=_cmd_init)

    p = keys.add_parser("list", help="show ids, suites, states and ages (never material)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_list)

    p = keys.add_parser("rotate", help="create a new primary key; the old one stays active")
    p.add_argument("--suite", choices=_SUITES, help="suite of the new key (default: config)")
    p.set_defaults(func=_cmd_rotate)

    programs = _programs() if programs is None else programs
    for name, program in sorted(programs.items()):  # listed for --help; main() runs them
        commands.add_parser(name, help=program.load().help)
    for register in _registered(COMMANDS):
        register(commands, keys)
    return parser


#: entry-point group of the layers above the core (adapters, migrations): ``register(commands,
#: keys)`` adds their sub-commands to the console script's parsers (``commands``) and to
#: ``keys``; the core CLI imports none of them.
COMMANDS = "sealstore.commands"
#: entry-point group of programs with a parser of their own: ``sealstore NAME ARGS...`` is
#: ``program(ARGS)``, an exit status; ``program.help`` is its line in ``sealstore --help``
#: (``sealstore bench``: sealstore.bench.command)
PROGRAMS = "sealstore.programs"


def _registered(group: str) -> list:
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


def _load(ep):
    """An entry point's object; for sub-commands whose extra is not installed, a register
    function that adds one command, the entry point's name, which says what to install (so
    ``sealstore --help`` lists it and running it is one line naming the extra, exit 1)."""
    try:
        return ep.load()
    except MissingExtra as exc:
        missing = exc

    def register(commands, keys) -> None:
        p = commands.add_parser(ep.name, help=f"not available: {missing}")
        p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=lambda args: _raise(missing))

    return register


def _raise(exc: Exception):
    raise exc


def _programs() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=PROGRAMS)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    programs = _programs()
    if argv[:1] and argv[0] in programs:  # its own parser: every option after the word is its
        return programs[argv[0]].load()(argv[1:])
    try:
        parser = build_parser(programs)
    except SealstoreError as exc:
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 1
    return run_command(parser.parse_args(argv))


def run_command(args) -> int:
    """Run a parsed ``sealstore`` command; a SealstoreError is one line on stderr and exit 1."""
    try:
        return args.func(args)
    except SealstoreError as exc:
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
