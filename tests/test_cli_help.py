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
