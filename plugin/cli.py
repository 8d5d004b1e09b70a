"""The ``sealstore`` console script.  This module adds the ``keys`` commands:

    sealstore --version
    sealstore [--log-level debug|info|warning] [--debug] COMMAND ...
    sealstore [--config PATH] keys init [--suite SUITE] [--tag-size 16|32] [--json]
    sealstore [--config PATH] keys list [--json]
    sealstore [--config PATH] keys rotate [--suite SUITE] [--json]
    sealstore tenants create|rotate|shred NAME [--dir PATH] [--kms-alias-prefix P] [--json]
    sealstore tenants list [--dir PATH] [--json]

The key source comes from the configuration (:func:`sealstore.config.load_config`: the file
given with ``--config`` or ``$SEALSTORE_CONFIG``, then ``SEALSTORE_*`` variables;
``--config-name index`` loads the blind-index keyring's: ``--config`` or
``$SEALSTORE_INDEX_CONFIG``, then ``SEALSTORE_INDEX_*`` variables only).  Nothing
here ever prints key material.  ``--json`` prints one JSON document on stdout and nothing else
there (warnings and errors go to stderr).  ``keys init`` warns loudly on stderr (and in the
JSON ``warning`` field) when it writes plain, unwrapped keys.

Every command of every layer runs through :func:`main`, which answers anything that goes wrong
with one line on stderr and an exit status (:data:`EXIT_STATUSES`, also at the end of
``sealstore --help``): 0 ok; 1 the command failed (a sealstore error, a missing extra, a file,
network or database failure); 2 usage error; 3 a column not stored as its model declares (the
migrations commands: ``ColumnNotConverted``, ``ColumnTypeMismatch``); 70 an unexpected
exception, a bug (its type and its message's first line, URL passwords masked; ``--debug`` or
``SEALSTORE_DEBUG=1`` prints the traceback too; sysexits' ``EX_SOFTWARE``); 130 interrupted.
A command whose extra is not installed is not listed among the commands; the end of ``--help``
names it and the extra, and running it is one line naming ``pip install 'sealstore[EXTRA]'``,
exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from .errors import MissingExtra, SealstoreError
from .format import Suite
from .redact import mask_text

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


# ---- sealstore tenants (docs/TENANTS.md) -----------------------------------------------------

TENANTS_DIR_VARIABLE = "SEALSTORE_TENANTS_DIR"


def _tenant_store(args: argparse.Namespace) -> Any:
    from .errors import ConfigError
    from .tenants import KmsTenantWrapping, TenantStore

    directory = args.dir or os.environ.get(TENANTS_DIR_VARIABLE)
    if not directory:
        raise ConfigError(
            f"no tenant key directory: give --dir PATH or set ${TENANTS_DIR_VARIABLE}"
        )
    kms = None
    if args.kms_alias_prefix:
        from .extras import require

        require("kms", "sealstore tenants with per-tenant KMS keys", ("boto3",))
        import boto3

        client = boto3.client("kms", endpoint_url=args.kms_endpoint_url or None)
        kms = KmsTenantWrapping(client, alias_prefix=args.kms_alias_prefix)
    return TenantStore(directory, kms=kms)


def _cmd_tenants_create(args: argparse.Namespace) -> int:
    store = _tenant_store(args)
    data, index = store.create(args.name, suite=args.suite)
    doc = {"tenant": args.name, "key": data.primary.id_hex, "index_key": index.primary.id_hex}
    data.close()
    index.close()
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"tenant {args.name} created: key {doc['key']}, index key {doc['index_key']}")
    if store.kms is None:
        print(
            f"sealstore: warning: tenant {args.name}'s keys are stored unwrapped in "
            f"{store.directory}: shredding then holds against the live files only, not their "
            "backups (use --kms-alias-prefix; docs/TENANTS.md)",
            file=sys.stderr,
        )
    return 0


def _cmd_tenants_list(args: argparse.Namespace) -> int:
    store = _tenant_store(args)
    live = [{"tenant": n, "state": "live"} for n in store.names()]
    gone = [
        {"tenant": r.tenant, "state": "shredded", "by": r.by, "at": r.at,
         "key_ids": list(r.key_ids), "index_key_ids": list(r.index_key_ids),
         "kms_key": r.kms_key}
        for r in store.shred_log()
    ]  # fmt: skip
    rows = sorted(live + gone, key=lambda r: r["tenant"])
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        extra = f"  shredded {r['at']} by {r['by']}" if r["state"] == "shredded" else ""
        print(f"{r['tenant']}  {r['state']}{extra}")
    return 0


def _cmd_tenants_rotate(args: argparse.Namespace) -> int:
    key, index_key = _tenant_store(args).rotate(args.name)
    if args.json:
        print(json.dumps({"tenant": args.name, "key": key, "index_key": index_key}, indent=2))
    else:
        print(f"tenant {args.name}: new primary key {key}, new index key {index_key}")
    return 0


def _cmd_tenants_shred(args: argparse.Namespace) -> int:
    if not args.yes:
        from .errors import TenantError

        raise TenantError(
            f"shredding destroys every key of tenant {args.name!r} for good: add --yes"
        )
    record = _tenant_store(args).shred(args.name, by=args.by)
    if args.json:
        print(json.dumps(record.as_json(), indent=2))
    else:
        print(
            f"tenant {record.tenant} shredded by {record.by} at {record.at}: keys "
            f"{', '.join(record.key_ids)}, index keys {', '.join(record.index_key_ids)}"
            + (f", KMS key {record.kms_key} disabled and scheduled for deletion"
               if record.kms_key else "")
        )  # fmt: skip
    return 0


def _add_tenants_commands(commands: Any) -> None:
    """``sealstore tenants create | list | rotate | shred``."""
    tenants = commands.add_parser(
        "tenants",
        help="manage tenants: a keyring per tenant, crypto-shredding",
        description="Create, list, rotate and shred tenants: each tenant has a data and an "
        "index keyring of its own in the tenant key directory (docs/TENANTS.md).",
    ).add_subparsers(dest="tenants_command", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--dir", metavar="PATH", help=f"tenant key directory (${TENANTS_DIR_VARIABLE})"
        )
        p.add_argument("--kms-alias-prefix", metavar="PREFIX",
                       help="one AWS KMS key per tenant, alias PREFIX<tenant> (e.g. "
                       "alias/sealstore-tenant-)")  # fmt: skip
        p.add_argument("--kms-endpoint-url", metavar="URL", help=argparse.SUPPRESS)
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = tenants.add_parser("create", help="create a tenant's keyrings (and KMS key)",
                           description="Create tenant NAME: its data and index keyrings, and "
                           "its KMS key with --kms-alias-prefix.")  # fmt: skip
    p.add_argument("name", metavar="NAME")
    p.add_argument("--suite", choices=_SUITES, help="suite of the first keys")
    common(p)
    p.set_defaults(func=_cmd_tenants_create)
    p = tenants.add_parser("list", help="list the tenants and the shredded ones",
                           description="List the live tenants and every shredding recorded.")  # fmt: skip
    common(p)
    p.set_defaults(func=_cmd_tenants_list)
    p = tenants.add_parser("rotate", help="a new primary in a tenant's keyrings",
                           description="Create a new primary key in tenant NAME's data and "
                           "index keyrings (sealstore rotate re-seals the values).")  # fmt: skip
    p.add_argument("name", metavar="NAME")
    common(p)
    p.set_defaults(func=_cmd_tenants_rotate)
    p = tenants.add_parser("shred", help="destroy a tenant's keys for good",
                           description="Destroy every key of tenant NAME (and disable and "
                           "schedule the deletion of its KMS key); records who, when and "
                           "which key ids.")  # fmt: skip
    p.add_argument("name", metavar="NAME")
    p.add_argument("--yes", action="store_true", help="confirm: nothing of NAME opens again")
    p.add_argument("--by", metavar="WHO", help="who shreds (default: the user name)")
    common(p)
    p.set_defaults(func=_cmd_tenants_shred)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (``PROG: error: ...``, exit 2)
    instead of the usage text and the error.  Sub-parsers are of the same class (argparse's
    ``add_subparsers`` takes the parent's class), so every layer's commands answer alike."""

    #: the commands of this parser (sealstore's top level, ``keys``) whose extra is missing
    missing: dict[str, MissingExtra]

    def error(self, message: str) -> NoReturn:
        first = message.splitlines()[0] if message else "bad arguments"
        self.exit(2, f"{self.prog}: error: {first} (see {self.prog} --help)\n")


#: The exit statuses of every ``sealstore`` command (also at the end of ``sealstore --help``);
#: a command may say more about its 1 (``status``: values left under an old key).
EXIT_STATUSES: dict[int, str] = {
    0: "ok",
    1: "failed or refused: a sealstore error, a missing extra, a file, network or database failure",
    2: "usage error: a bad option or argument",
    3: "a column is not stored as its model declares (rotate, status, verify, reindex, "
    "encrypt-column, decrypt-column, keys retire; docs/ROTATION.md)",
    70: "unexpected error (a bug): its type and message; --debug or SEALSTORE_DEBUG=1 prints "
    "the traceback",
    130: "interrupted (Ctrl-C)",
}


def _add_global_options(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print an error's traceback before its line (or SEALSTORE_DEBUG=1); for bug "
        "reports: it shows file paths and library messages",
    )


def build_parser(programs: dict[str, EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The console script's parser; ``programs`` are the ``sealstore.programs`` entry points
    (looked up when not given).  The commands of an entry point whose extra is not installed
    (:data:`ENTRY_POINT_COMMANDS`) are not listed; the end of the help names them and the
    extra, and running one raises its :class:`~sealstore.errors.MissingExtra`."""
    parser = _Parser(
        prog="sealstore",
        description="sealstore administration: keys, column and object rotation, checks",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.missing = {}
    _add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    keys = _add_keys_commands(commands)
    _add_tenants_commands(commands)
    keys_parser: _Parser = commands.choices["keys"]
    keys_parser.missing = {}
    programs = _programs() if programs is None else programs
    for name, ep in sorted(programs.items()):  # main() runs them with their own parser
        try:
            program = ep.load()
        except MissingExtra as exc:  # its module itself needs the extra
            parser.missing[name] = exc
            continue
        absent = _program_missing(name, program)
        if absent is not None:
            parser.missing[name] = absent
            continue
        p = commands.add_parser(name, help=program.help, description=program.help)
        p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=_program_runner(program))
    unknown: list[str] = []
    for ep in _entry_points(COMMANDS):
        try:
            register = ep.load()
        except MissingExtra as exc:
            names = ENTRY_POINT_COMMANDS.get(ep.name)
            if names is None:  # not in the table: say so, name no command that may not exist
                unknown.append(f"  the commands of {ep.name!r}: {exc}")
                continue
            for name in names:
                if name.startswith("keys "):
                    keys_parser.missing[name.split()[1]] = exc
                else:
                    parser.missing[name] = exc
            continue
        register(commands, keys)
    for target, subs in ((parser, commands), (keys_parser, keys)):
        for word, absent in target.missing.items():
            _add_missing(subs, word, absent)
    parser.epilog = _epilog(parser, keys_parser, unknown)
    if keys_parser.missing:
        keys_parser.epilog = "not installed here:\n" + _missing_lines(keys_parser.missing, "")
    return parser


def _program_missing(name: str, program: Any) -> MissingExtra | None:
    """The MissingExtra of a program whose ``needs`` (``(extra, modules)``) are not installed."""
    needs = getattr(program, "needs", None)
    if needs is None:
        return None
    from .extras import missing

    extra, modules = needs
    absent = missing(extra, modules)
    return MissingExtra(f"sealstore {name}", extra, absent) if absent else None


def _program_runner(program: Callable[[list[str]], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return int(program(list(args.args)))

    return run


def _add_missing(subs: Any, word: str, exc: MissingExtra) -> None:
    """A command that is not listed (no help line) and whose run raises ``exc``; it takes any
    argument (--help included), so whatever follows, the answer is the one line."""
    p = subs.add_parser(word, add_help=False, description=f"not installed: {exc}")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=lambda args: _raise(exc))


def _missing_lines(missing: dict[str, MissingExtra], prefix: str) -> str:
    by_extra: dict[str, list[str]] = {}
    for word, exc in missing.items():
        by_extra.setdefault(exc.extra, []).append(prefix + word)
    return "".join(
        f"  {', '.join(words)}: pip install 'sealstore[{extra}]'\n"
        for extra, words in sorted(by_extra.items())
    )


def _epilog(parser: _Parser, keys_parser: _Parser, unknown: list[str]) -> str:
    parts = []
    if parser.missing or keys_parser.missing or unknown:
        parts.append(
            "not installed here (each needs an extra):\n"
            + _missing_lines(
                {**parser.missing, **{f"keys {w}": e for w, e in keys_parser.missing.items()}}, ""
            )
            + "".join(line + "\n" for line in unknown)
        )
    statuses = "".join(
        textwrap.fill(text, 78, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7) + "\n"
        for code, text in EXIT_STATUSES.items()
    )
    parts.append("exit status (an error is one line on stderr):\n" + statuses)
    return "\n".join(parts)


def _add_keys_commands(commands: Any) -> Any:
    """``sealstore keys init | list | rotate``; returns the ``keys`` sub-parsers, where the
    layers above add ``retire`` and ``destroy``."""
    keys = commands.add_parser(
        "keys",
        help="manage the keyring",
        description=textwrap.fill(
            "Create, list, rotate (and, with the migrations commands, retire or destroy) the "
            "keys of the configured key source; never prints key material.",
            width=78,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's lines as written
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
#: ``program(ARGS)``, an exit status; ``program.help`` is its line in ``sealstore --help``, and
#: ``program.needs``, if set, ``(extra, modules)`` it cannot run without (``sealstore bench``:
#: sealstore.bench.command)
PROGRAMS = "sealstore.programs"

#: The commands each ``sealstore.commands`` entry point adds, by entry-point name (``"keys X"``:
#: an action of ``sealstore keys``).  When an entry point cannot load because its extra is not
#: installed, these are the commands that answer one line naming the extra (and that the end of
#: ``--help`` lists as not installed).  tests/core/test_cli_help.py checks this table against what
#: each entry point registers: a layer that adds a command adds its name here.
ENTRY_POINT_COMMANDS: dict[str, tuple[str, ...]] = {
    "migrations": (
        "rotate",
        "reindex",
        "status",
        "verify",
        "encrypt-column",
        "decrypt-column",
        "medium-check",
        "db",
        "keys retire",
        "keys destroy",
    ),
    "s3": ("s3",),
}


def _entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group``, ordered by name.  None at all is an error, not commands
    that silently vanish: the package's own metadata names them, so an install that lacks them
    is broken."""
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=group), key=lambda ep: ep.name)
    if not found:
        raise SealstoreError(
            f"no {group} entry points: sealstore's install is incomplete (reinstall it)"
        )
    return found


def _raise(exc: Exception) -> NoReturn:
    raise exc


def _programs() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=PROGRAMS)}


def _split_global(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` cut before the command word: (the global options, the command and the rest).
    An option the top level does not know (``-h``, a typo) ends the global part there."""
    probe = _Parser(add_help=False)
    _add_global_options(probe)
    takes_value = {o: a.nargs != 0 for a in probe._actions for o in a.option_strings}
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.split("=", 1)[0]
        if not word.startswith("-") or name not in takes_value:
            break
        i += 1 if ("=" in word or not takes_value[name]) else 2
    return argv[:i], argv[i:]


def _debug_wanted(head: list[str]) -> bool:
    return "--debug" in head or os.environ.get("SEALSTORE_DEBUG", "") not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    """Run ``sealstore ARGV``; the exit status (:data:`EXIT_STATUSES`).  Usage errors and
    ``--help``/``--version`` raise SystemExit (2 and 0), as argparse does."""
    argv = sys.argv[1:] if argv is None else list(argv)
    head, rest = _split_global(argv)
    debug = _debug_wanted(head)
    try:
        programs = _programs()
        if rest[:1] and rest[0] in programs:  # its own parser: every option after the word is its
            options = _Parser(prog="sealstore")
            _add_global_options(options)
            opts = options.parse_args(head)
            program = programs[rest[0]].load()
            absent = _program_missing(rest[0], program)
            if absent is not None:
                raise absent
            with _log_to_stderr(opts.log_level):
                return int(program(rest[1:]))
        parser = build_parser(programs)
        absent = _missing_command(parser, rest)
        if absent is not None:  # whatever its arguments (even --help): the one line
            raise absent
        args = parser.parse_args(argv)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure is one line and a status
        return _report(exc, debug)
    return run_command(args)


def _missing_command(parser: argparse.ArgumentParser, rest: list[str]) -> MissingExtra | None:
    """The MissingExtra of the command ``rest`` starts with, if its extra is not installed."""
    if not rest:
        return None
    top: dict[str, MissingExtra] = getattr(parser, "missing", {})
    if rest[0] in top:
        return top[rest[0]]
    if rest[0] == "keys" and len(rest) > 1:
        keys: dict[str, MissingExtra] = getattr(_subparsers(parser).choices["keys"], "missing", {})
        return keys.get(rest[1])
    return None


def _subparsers(parser: argparse.ArgumentParser) -> Any:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


_LOG_LEVELS = ("debug", "info", "warning")


@contextmanager
def _log_to_stderr(level: str | None) -> Any:
    """``--log-level``: the ``sealstore`` loggers' records go to stderr meanwhile (never stdout,
    which ``--json`` keeps for its document)."""
    if level is None:
        yield
        return
    logger = logging.getLogger("sealstore")
    handler, before = logging.StreamHandler(sys.stderr), logger.level
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed ``sealstore`` command: its exit status, or, when it raises, one line on
    stderr and the status of :data:`EXIT_STATUSES` (SealstoreError 1, unexpected 70, Ctrl-C 130)."""
    debug = bool(getattr(args, "debug", False)) or _debug_wanted([])
    try:
        with _log_to_stderr(getattr(args, "log_level", None)):
            status: int = args.func(args)
            return status
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure is one line and a status
        return _report(exc, debug)


#: an unexpected exception's exit status (sysexits.h: internal software error); 3 is taken by
#: the migrations commands (a column not stored as its model declares)
EX_SOFTWARE = 70

#: the libraries whose exceptions are the environment failing (a database, the network, a
#: bad URL in the configuration, missing cloud credentials: google.auth's, google.api_core's),
#: not a bug: exit status 1
_ENVIRONMENT = frozenset(
    "sqlalchemy alembic botocore boto3 s3transfer psycopg psycopg2 pymysql asyncpg sqlite3 "
    "_sqlite3 urllib3 google requests".split()
)


def _one_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, URL and DSN passwords masked, at most 300
    characters.  A database error wrapped by SQLAlchemy shows its driver's message: never the
    statement or its parameters."""
    orig = getattr(exc, "orig", None)
    shown = orig if isinstance(orig, BaseException) else exc
    lines = str(shown).strip().splitlines()
    text = lines[0].strip() if lines else ""
    text = mask_text(text)
    return text if len(text) <= 300 else text[:300] + "..."


def _report(exc: BaseException, debug: bool) -> int:
    """Print ``exc`` as one line on stderr (after its traceback with ``debug``); its status."""
    if isinstance(exc, KeyboardInterrupt):
        print("sealstore: interrupted", file=sys.stderr)
        return 130
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if isinstance(exc, SealstoreError):
        print(f"sealstore: error: {exc}", file=sys.stderr)
        return 1
    lib = type(exc).__module__.split(".")[0]
    name = type(exc).__name__ if lib in ("builtins", "sealstore") else f"{lib}.{type(exc).__name__}"
    orig = getattr(exc, "orig", None)
    if isinstance(orig, BaseException):  # a database driver's error, wrapped by SQLAlchemy
        name = f"database ({type(orig).__module__.split('.')[0]}.{type(orig).__name__})"
    if isinstance(exc, OSError) or lib in _ENVIRONMENT:
        print(f"sealstore: error: {name}: {_one_line(exc)}", file=sys.stderr)
        return 1
    hint = "" if debug else "; --debug prints the traceback"
    print(
        f"sealstore: error: unexpected {name}: {_one_line(exc)} (please report it{hint})",
        file=sys.stderr,
    )
    return EX_SOFTWARE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
