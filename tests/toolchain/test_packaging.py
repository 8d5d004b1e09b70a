"""What the distributions carry and what each install can import.

The sdist: everything the native build needs, everything the test suite reads (a few test
files run from the unpacked sdist), the license and the metadata, built without a setuptools
warning.  The wheel, installed in fresh virtualenvs with no extra, with ``[s3]`` and with
``[sqlalchemy]``: the core imports and runs, each adapter imports only with its extra and
otherwise raises MissingExtra naming it, ``sealstore --help`` lists every command.  The
installed package carries the kernel sources the bench's C harness compiles.
"""

import email
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import sealstore

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    return proc


def build(kind: str, out: Path) -> tuple[Path, str]:
    """Build the ``--sdist`` or ``--wheel`` into ``out`` (no isolation: `build` and the backend
    come with the test extra); every Python warning in the backend is an error."""
    proc = run(
        [sys.executable, "-m", "build", kind, "--no-isolation", "-o", str(out), str(ROOT)],
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    (dist,) = out.glob("sealstore-*.tar.gz" if kind == "--sdist" else "sealstore-*.whl")
    return dist, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tuple[Path, str]:
    return build("--sdist", tmp_path_factory.mktemp("sdist"))


def sdist_names(path: Path) -> set[str]:
    with tarfile.open(path) as tar:
        return {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}


def test_sdist_ships_the_native_build(sdist):
    names = sdist_names(sdist[0])
    expected = {
        "setup.py",
        "pyproject.toml",
        "native/build_ffi.py",
        "native/sealstore_cdef.h",
        "native/python/module.c",
        "native/include/sealstore.h",
        "plugin/__init__.py",
    }
    expected |= {str(p.relative_to(ROOT)) for p in (ROOT / "native" / "src").rglob("*.[ch]")}
    missing = expected - names
    assert not missing, f"sdist lacks {sorted(missing)}"


def tracked(*folders: str) -> set[str]:
    """The files of ``folders`` as git tracks them (or as they are, outside a git checkout)."""
    if (ROOT / ".git").exists():
        out = run(["git", "-C", str(ROOT), "ls-files", "--", *folders]).stdout
        return {line for line in out.splitlines() if (ROOT / line).is_file()}
    return {
        str(p.relative_to(ROOT))
        for f in folders
        for p in (ROOT / f).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_sdist_ships_what_the_test_suite_reads(sdist):
    names = sdist_names(sdist[0])
    wanted = tracked("tests", "tools", "docs", *layout.PACKAGES)
    wanted |= {"LICENSE", "README.md", "MANIFEST.in", "noxfile.py"}
    missing = wanted - names
    assert not missing, f"sdist lacks {sorted(missing)}"
    assert {"tests/native/kat.c", "tests/native/ct.c", "tools/smoke.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".so"))]


def test_sdist_builds_without_a_setuptools_warning(sdist):
    log = sdist[1]  # PYTHONWARNINGS=error already turned any Python warning into a failure
    flagged = [
        line for line in log.splitlines() if "warning" in line.lower() or "deprecat" in line.lower()
    ]
    assert flagged == []


def test_metadata_license_version_and_extras(sdist):
    with tarfile.open(sdist[0]) as tar:
        (member,) = [
            m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        ]
        meta = email.message_from_bytes(tar.extractfile(member).read())
        license_text = tar.extractfile(member.name.replace("PKG-INFO", "LICENSE")).read()
    assert meta["Version"] == sealstore.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in license_text and b"Version 2.0, January 2004" in license_text
    assert meta["Author"] == "sealstore developers" or "sealstore developers" in (
        meta["Author-email"] or ""
    )
    assert "Topic :: Security :: Cryptography" in meta.get_all("Classifier")
    assert set(meta.get_all("Provides-Extra")) >= {
        "sqlalchemy",
        "s3",
        "kms",
        "bench",
        "test",
        "all",
    }
    core = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    names = {r.split(";")[0].split(">")[0].split("[")[0].strip().lower() for r in core}
    assert names == {"cffi", "cryptography", "pydantic", "tomli"}


def test_the_version_is_written_once():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and "\nversion =" not in text.split("[tool.")[0]
    written = [
        str(p.relative_to(ROOT))
        for p in (ROOT / layout.CORE).rglob("*.py")
        if f'"{sealstore.__version__}"' in p.read_text()
    ]
    assert written == [f"{layout.CORE}/__init__.py"]


def test_tests_run_from_the_unpacked_sdist(sdist, tmp_path):
    with tarfile.open(sdist[0]) as tar:
        tar.extractall(tmp_path, filter="data")
    (tree,) = tmp_path.iterdir()
    # they read docs/, tests/vectors, tools/ and native/ from the unpacked tree
    files = ["tests/core/test_suites.py", "tests/test_layers.py", "tests/core/test_format.py"]
    pytest_args = ["-q", "-p", "no:cacheprovider", "-m", "not toolchain", *files]
    proc = run([sys.executable, "-m", "pytest", *pytest_args], cwd=tree)
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_installed_package_ships_the_kernel_sources():
    from importlib.resources import files

    shipped = Path(str(files(layout.SOURCES_PACKAGE)))
    native = ROOT / layout.NATIVE
    expected = {p.relative_to(native) for p in (native / "src").rglob("*.[ch]")}
    expected |= {Path("include/sealstore.h")}
    missing = {p for p in expected if not (shipped / p).is_file()}
    assert not missing, f"the installed sealstore lacks {sorted(map(str, missing))}"


# ---- the wheel in fresh virtualenvs: the core and each extra ------------------------------------

PROBE = textwrap.dedent(
    """
    import importlib, json, os, subprocess, sys
    from importlib.metadata import distributions
    out = {"imports": {}, "dists": sorted(d.metadata["Name"].lower() for d in distributions())}
    for name in sys.argv[1:]:
        try:
            importlib.import_module(name)
            out["imports"][name] = "ok"
        except ImportError as exc:
            out["imports"][name] = [type(exc).__name__, getattr(exc, "extra", None), str(exc)]
    from sealstore import AEGIS128X4, Keyring
    ring = Keyring.generate()
    assert ring.open(ring.seal(b"v")) == b"v"
    script = os.path.join(os.path.dirname(sys.executable), "sealstore")
    help = subprocess.run([script, "--help"], capture_output=True, text=True)
    out["help"] = [help.returncode, " ".join(help.stdout.split()), help.stderr]
    out["commands"] = {}
    for argv in json.loads(os.environ["PROBE_COMMANDS"]):  # each command's answer, in a cwd
        proc = subprocess.run([script, *argv], capture_output=True, text=True, cwd=os.getcwd())
        out["commands"][" ".join(argv)] = [proc.returncode, proc.stdout, proc.stderr]
    print(json.dumps(out))
    """
)

#: Every ``sealstore`` command and the extra it needs (None: the core).  Each install runs each
#: one with ``--help``: where it runs, its help page (exit 0); where its extra is missing, one
#: line ending in ``pip install 'sealstore[EXTRA]'``, exit 1.  ``bench`` starts where rich is
#: (the sqlalchemy extra brings it; its sections say what else they lack).  A new command is
#: added here (test_the_table_names_every_command checks it against a full install).
COMMAND_TABLE: dict[str, str | None] = {
    "keys init": None,
    "keys list": None,
    "keys rotate": None,
    "tenants create": None,
    "tenants list": None,
    "tenants rotate": None,
    "tenants shred": None,
    "rotate": "sqlalchemy",
    "reindex": "sqlalchemy",
    "status": "sqlalchemy",
    "verify": "sqlalchemy",
    "encrypt-column": "sqlalchemy",
    "decrypt-column": "sqlalchemy",
    "medium-check": "sqlalchemy",
    "db init": "sqlalchemy",
    "keys retire": "sqlalchemy",
    "keys destroy": "sqlalchemy",
    "s3 rotate": "s3",
    "bench": "bench",
}
#: and bad input, the same in every install: (argv, exit status, what its one line says)
BAD_INPUT = [
    (["rotat"], 2, "invalid choice: 'rotat'"),
    (["keys", "list", "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["-c", "missing.toml", "keys", "list"], 1, "missing.toml"),
]


def runs_in(extra: str | None, installed: set[str]) -> bool:
    return extra is None or extra in installed or (extra == "bench" and "sqlalchemy" in installed)


def probe_commands() -> list[list[str]]:
    return [[*name.split(), "--help"] for name in COMMAND_TABLE] + [a for a, _, _ in BAD_INPUT]


def check_commands(result: dict, installed: set[str]) -> None:
    """Every command of COMMAND_TABLE and BAD_INPUT answered as it must in this install."""
    got = result["commands"]
    for name, extra in COMMAND_TABLE.items():
        code, out, err = got[f"{name} --help"]
        if runs_in(extra, installed):
            assert code == 0 and err == "" and out.startswith("usage: "), (name, code, err)
        else:
            assert code == 1 and out == "" and err.count("\n") == 1, (name, code, out, err)
            assert err.startswith("sealstore: error: ") and "Traceback" not in err, (name, err)
            assert err.rstrip().endswith(f"pip install 'sealstore[{extra}]'"), (name, err)
    for argv, status, says in BAD_INPUT:
        code, out, err = got[" ".join(argv)]
        assert (code, out, err.count("\n")) == (status, "", 1) and says in err, (argv, code, err)
    code, help_text, _ = result["help"]
    listed_part, _, tail = help_text.partition("not installed here (each needs an extra):")
    named = {
        name.strip(): extra
        for names, extra in re.findall(r"([\w\-, ]+?): pip install 'sealstore\[(\w+)\]'", tail)
        for name in names.split(",")
    }
    for name, extra in COMMAND_TABLE.items():
        word = name.split()[0]
        here = runs_in(extra, installed)
        if word != "keys":  # the top-level list: only what runs here
            assert (f" {word} " in listed_part) == here, (name, help_text)
        if extra is not None:  # the end of the help names what does not, and its extra
            assert named.get(name if word == "keys" else word) == (None if here else extra), (
                name,
                named,
            )
    assert "exit status" in help_text and "migrations" not in help_text


MODULES = [
    "sealstore",
    "sealstore.config",
    "sealstore.wrapping.kms",
    "sealstore.stream",
    "sealstore.adapters.objects",
    "sealstore.adapters.s3",
    "sealstore.adapters.sqlalchemy",
    "sealstore.migrations",
    "sealstore.keysources.database",
]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel, and a directory of it and of every wheel its extras need (pip download:
    PyPI or pip's cache, once), so each venv installs with --no-index."""
    house = tmp_path_factory.mktemp("wheelhouse")
    wheel, _ = build("--wheel", house)
    run([sys.executable, "-m", "pip", "download", "-q", "-d", str(house),
         f"{wheel}[sqlalchemy,s3]"])  # fmt: skip
    return wheel, house


def probe_install(tmp_path: Path, wheelhouse, extras: str) -> dict:
    wheel, house = wheelhouse
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
         "--find-links", str(house), f"{wheel}{extras}"])  # fmt: skip
    env = {**os.environ, "PROBE_COMMANDS": json.dumps(probe_commands())}
    env = {k: v for k, v in env.items() if not k.startswith("SEALSTORE_")}
    proc = run(
        [str(python), "-I", "-c", PROBE, *MODULES], cwd=tmp_path, env=env
    )  # -I: not the tree
    result = json.loads(proc.stdout)
    result["size"] = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file())
    return result


def refused(result: dict, module: str, extra: str) -> bool:
    got = result["imports"][module]
    return got[:2] == ["MissingExtra", extra] and f"pip install 'sealstore[{extra}]'" in got[2]


HEAVY = {"sqlalchemy", "alembic", "boto3", "botocore", "rich", "s3transfer"}


@pytest.fixture(scope="module")
def core(wheelhouse, tmp_path_factory) -> dict:
    return probe_install(tmp_path_factory.mktemp("core"), wheelhouse, "")


def test_core_install_has_the_core_and_no_adapter_dependency(core):
    assert not HEAVY & set(core["dists"]), core["dists"]
    for module in MODULES[:5]:
        assert core["imports"][module] == "ok", core["imports"][module]
    assert refused(core, "sealstore.adapters.s3", "s3")
    assert refused(core, "sealstore.adapters.sqlalchemy", "sqlalchemy")
    assert refused(core, "sealstore.migrations", "sqlalchemy")
    assert refused(core, "sealstore.keysources.database", "sqlalchemy")
    code, out, err = core["help"]
    assert code == 0, err
    assert "s3: pip install 'sealstore[s3]'" in out
    assert "keys retire, keys destroy: pip install 'sealstore[sqlalchemy]'" in out
    check_commands(core, set())


def test_s3_install_imports_the_s3_adapter_only(core, wheelhouse, tmp_path):
    s3 = probe_install(tmp_path, wheelhouse, "[s3]")
    assert {"boto3", "botocore"} <= set(s3["dists"]) and not {"sqlalchemy", "alembic"} & set(
        s3["dists"]
    )
    assert s3["imports"]["sealstore.adapters.s3"] == "ok"
    assert refused(s3, "sealstore.adapters.sqlalchemy", "sqlalchemy")
    assert refused(s3, "sealstore.migrations", "sqlalchemy")
    code, out, err = s3["help"]
    assert code == 0 and "keys destroy: pip install 'sealstore[sqlalchemy]'" in out
    check_commands(s3, {"s3"})
    assert core["size"] < s3["size"]
    print(f"\ninstall size: core {core['size'] / 1e6:.1f} MB, core+s3 {s3['size'] / 1e6:.1f} MB")


def test_sqlalchemy_install_imports_the_columns_and_migrations_only(core, wheelhouse, tmp_path):
    sa = probe_install(tmp_path, wheelhouse, "[sqlalchemy]")
    assert {"sqlalchemy", "alembic", "rich"} <= set(sa["dists"]) and "boto3" not in sa["dists"]
    for module in (
        "sealstore.adapters.sqlalchemy",
        "sealstore.migrations",
        "sealstore.keysources.database",
    ):
        assert sa["imports"][module] == "ok", sa["imports"][module]
    assert refused(sa, "sealstore.adapters.s3", "s3")
    code, out, err = sa["help"]
    assert code == 0 and "s3: pip install 'sealstore[s3]'" in out and "retire," not in out
    assert "rotate" in out and "encrypt-column" in out
    check_commands(sa, {"sqlalchemy"})
    assert core["size"] < sa["size"]
    print(
        f"\ninstall size: core {core['size'] / 1e6:.1f} MB, core+sqlalchemy {sa['size'] / 1e6:.1f} MB"
    )


def test_the_table_names_every_command():
    """COMMAND_TABLE is every command of a full install (the test extra installs every extra)."""
    import argparse

    from sealstore.cli import build_parser

    def names(parser, path=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    subs = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                    if subs:
                        yield from names(sub, (*path, name))
                    else:
                        yield " ".join((*path, name))

    assert set(names(build_parser())) == set(COMMAND_TABLE)


def test_cibuildwheel_builds_only_the_checked_platforms():
    """[tool.cibuildwheel] builds Linux wheels only: Windows and macOS kernels are compiled and
    (Windows) run under wine by tools/crossbuild.sh, but no .pyd or macOS .so of _native or
    _speedups was ever built (docs/HARDENING.md, "Windows and macOS").  A release that adds a
    platform runs that section's checks on a runner first, then changes skip and this test."""
    from fnmatch import fnmatch

    conf = layout.tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    skip = conf["tool"]["cibuildwheel"]["skip"].split()
    built = conf["tool"]["cibuildwheel"]["build"].split()

    def builds(identifier: str) -> bool:
        return any(fnmatch(identifier, b) for b in built) and not any(
            fnmatch(identifier, s) for s in skip
        )

    for plat in ("win32", "win_amd64", "win_arm64", "macosx_x86_64", "macosx_arm64",
                 "macosx_universal2", "manylinux_i686", "musllinux_i686"):  # fmt: skip
        assert not builds(f"cp312-{plat}"), plat
    for plat in ("manylinux_x86_64", "manylinux_aarch64"):
        assert builds(f"cp312-{plat}"), plat
