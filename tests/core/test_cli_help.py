"""Every ``sealstore`` sub-command, from every layer's entry points, has a description on its
``--help`` page and a line in its parent's list."""

from __future__ import annotations

import argparse

import pytest
from sealstore.cli import build_parser, main


def subcommands(parser: argparse.ArgumentParser, path=("sealstore",)):
    """(path, parser, help line) of every sub-command under ``parser``, depth first."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        lines = {a.dest: a.help for a in action._choices_actions}
        for name, sub in action.choices.items():
            yield (*path, name), sub, lines.get(name)
            yield from subcommands(sub, (*path, name))


def test_every_subcommand_has_a_description_and_a_help_line():
    found = list(subcommands(build_parser()))
    names = {" ".join(p[1:]) for p, _, _ in found}
    # the core's, the migrations' and the S3 adapter's entry points, and the bench program
    for expected in ("keys init", "keys list", "keys rotate", "keys retire", "keys destroy",
                     "rotate", "reindex", "status", "verify", "encrypt-column",
                     "decrypt-column", "db init", "s3 rotate", "bench"):  # fmt: skip
        assert expected in names
    for path, sub, line in found:
        assert (sub.description or "").strip(), f"{' '.join(path)} --help has no description"
        assert (line or "").strip(), f"{' '.join(path)} has no line in its parent's list"


@pytest.mark.parametrize("argv", [["keys", "init"], ["status"], ["s3", "rotate"], ["db", "init"]])
def test_help_pages_print_their_description(argv, capsys):
    parser = dict((p[1:], s) for p, s, _ in subcommands(build_parser()))[tuple(argv)]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    assert parser.description.split()[0] in capsys.readouterr().out


def test_bench_program_has_its_own_description():
    from sealstore.bench.run import build_parser as bench_parser

    assert (bench_parser().description or "").strip()


def _added_by(register) -> set[str]:
    """The command names ``register(commands, keys)`` adds ("keys X" for a keys action)."""
    parser = argparse.ArgumentParser(prog="probe")
    commands = parser.add_subparsers()
    keys = commands.add_parser("keys").add_subparsers()
    register(commands, keys)
    names = {name for name in commands.choices if name != "keys"}
    return names | {f"keys {name}" for name in keys.choices}


def test_the_table_of_entry_point_commands_is_what_each_entry_point_registers():
    """ENTRY_POINT_COMMANDS is what a core install answers for the commands of an entry point
    whose extra is missing: it must name exactly what the entry point adds when installed (a
    layer adding a command adds it to the table)."""
    from importlib.metadata import entry_points

    from sealstore.cli import COMMANDS, ENTRY_POINT_COMMANDS

    found = {ep.name: ep for ep in entry_points(group=COMMANDS)}
    assert set(found) == set(ENTRY_POINT_COMMANDS)
    for name, ep in found.items():
        assert _added_by(ep.load()) == set(ENTRY_POINT_COMMANDS[name]), name


def test_help_ends_with_the_exit_statuses(capsys):
    from sealstore.cli import EXIT_STATUSES

    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    tail = out.split("exit status (an error is one line on stderr):", 1)[1]
    for code, text in EXIT_STATUSES.items():
        assert f"  {code}" in tail and text.split()[0] in tail
    assert "not installed here" not in out  # the test extra installs everything


@pytest.mark.parametrize(
    "argv, says",
    [
        (["nosuch"], "invalid choice: 'nosuch'"),
        (["keys", "list", "--bogus"], "unrecognized arguments: --bogus"),
        (["--log-level", "loud", "keys", "list"], "invalid choice: 'loud'"),
        (["keys", "init", "--tag-size", "7"], "invalid choice: 7"),
        (["verify", "--batch-size"], "expected one argument"),
        (["s3", "rotate"], "the following arguments are required"),
        (["bench", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, says, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and says in captured.err, captured.err
    assert captured.err.startswith("sealstore") and "--help)" in captured.err


def test_a_program_runs_after_global_options(capsys):
    """``sealstore --log-level info bench --help``: the global options, then the program's own
    parser with every word after its name."""
    with pytest.raises(SystemExit) as info:
        main(["--log-level", "info", "bench", "--help"])
    assert info.value.code == 0
    assert "--quick" in capsys.readouterr().out
