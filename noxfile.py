"""Developer sessions: ``nox -l`` lists them, ``nox -s NAME`` runs one in a fresh virtualenv.

    lint         ruff check (pyflakes rules, pyproject's [tool.ruff]), ruff format --check,
                 the layer rules (tools/imports.py: no upper-layer import, no import cycle)
                 and the types (tools/typecheck.py: mypy, pyright --verifytypes)
    tests        the suite without the toolchain tests (compilers, sanitizers, whole bench runs)
    tests-full   the whole suite, as the README's test command runs it (CI=true: a missing
                 database or S3 server fails instead of skipping)
    sanitize     ASan/UBSan and valgrind over the native code (tools/sanitize.sh)
    fuzz         atheris over the parsers and openers (tools/fuzz.sh; FUZZ_SECONDS, default 20)
    bench-quick  sealstore bench --quick (the main job in quick mode)

Arguments after ``--`` go to pytest (tests, tests-full) or to the bench (bench-quick).
CI (.ci/run) runs the same commands from a fresh clone; see docs/CONTRIBUTING.md.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "tests"]
#: pinned: a new ruff may format differently, and CI (.ci/run) checks the same version
RUFF = "ruff==0.17.6"
#: pinned as in CI (.ci/run's TYPING_PKGS): a new release finds new errors
TYPING = ("mypy==2.4.1", "pyright==1.1.414", "types-cffi==2.1.0.20260827")
nox.options.reuse_existing_virtualenvs = True


@nox.session
def lint(session: nox.Session) -> None:
    # the package and its dependencies: the type checkers read their types
    session.install(".[test]", RUFF, *TYPING)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/imports.py")
    session.run("python", "tools/typecheck.py")
    session.run("python", "tools/typecheck.py", "--verifytypes")


@nox.session
def tests(session: nox.Session) -> None:
    session.install(".[test]")
    session.run("python", "-m", "pytest", "-q", "-m", "not toolchain", *session.posargs)


@nox.session(name="tests-full")
def tests_full(session: nox.Session) -> None:
    session.install(".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs, env={"CI": "true"})


@nox.session
def sanitize(session: nox.Session) -> None:
    session.install(".[test]")
    session.run("bash", "tools/sanitize.sh", env={"PYTHON": "python"}, external=True)


@nox.session
def fuzz(session: nox.Session) -> None:
    session.install(".[test]", "atheris")
    env = {"PYTHON": "python", "FUZZ_SECONDS": os.environ.get("FUZZ_SECONDS", "20")}
    session.run("bash", "tools/fuzz.sh", env=env, external=True)


@nox.session(name="bench-quick")
def bench_quick(session: nox.Session) -> None:
    session.install(".[bench]")
    session.run("sealstore", "bench", "--quick", *session.posargs)
