"""The core install and its extras (sealstore.extras): each part beyond the core checks for its
extra before importing it and raises MissingExtra (an ImportError) naming ``pip install
'sealstore[...]'``; the console script lists the commands it cannot load instead of failing.

Each case runs in a fresh interpreter where the extra's modules are made unfindable
(``sys.modules[name] = None``, what ``importlib.util.find_spec`` and ``import`` both honour), so
the package's import-time registrations never run twice in the test process.  The same
imports on real installs without the extras: tests/toolchain/test_packaging.py.
"""

from __future__ import annotations

import importlib.metadata
import json
import pickle
import re
import subprocess
import sys
import textwrap

import pytest
from packaging.markers import Marker
from sealstore import extras
from sealstore.errors import MissingExtra, SealstoreError

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

PRELUDE = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
"""


def run_without(blocked: list[str], code: str, *args: str) -> subprocess.CompletedProcess:
    src = PRELUDE.format(blocked=blocked) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", src, *args], capture_output=True, text=True, timeout=120
    )


def test_missing_extra_is_an_import_error_naming_the_command():
    exc = MissingExtra("sealstore.adapters.s3", "s3", ["boto3", "botocore"])
    assert isinstance(exc, ImportError) and isinstance(exc, SealstoreError)
    assert str(exc) == (
        "sealstore.adapters.s3 needs the 's3' extra (missing: boto3, botocore): "
        "pip install 'sealstore[s3]'"
    )
    assert (exc.name, exc.extra, exc.missing) == ("boto3", "s3", ("boto3", "botocore"))
    again = pickle.loads(pickle.dumps(exc))  # e.g. raised in a worker process
    assert type(again) is MissingExtra and str(again) == str(exc)
    assert (again.name, again.extra, again.missing) == (exc.name, exc.extra, exc.missing)


def test_require_passes_when_installed_and_refuses_modules_of_another_extra():
    for extra in extras.EXTRAS:  # the test extra installs every one
        assert extras.missing(extra) == []
        extras.require(extra, "x")
    with pytest.raises(ValueError, match="does not install"):
        extras.missing("s3", ("sqlalchemy",))


IMPORTS = [
    ("import sealstore.adapters.s3", ["botocore"], "s3", "sealstore.adapters.s3"),
    ("import sealstore.adapters.s3.cli", ["boto3"], "s3", "sealstore.adapters.s3"),
    ("from sealstore.adapters.s3 import encrypt_client", ["boto3"], "s3", "adapters.s3"),
    ("import sealstore.adapters.gcs", ["google.cloud.storage"], "gcs", "sealstore.adapters.gcs"),
    ("from sealstore.adapters.gcs import store", ["google.api_core"], "gcs", "adapters.gcs"),
    # no google package at all: find_spec of google.cloud.storage raises, it does not return None
    ("import sealstore.adapters.gcs", ["google"], "gcs", "sealstore.adapters.gcs"),
    (
        "from sealstore.adapters.objects.stores import open_store; open_store('gs://b/p')",
        ["google"],
        "gcs",
        "Google Cloud Storage prefixes (gs://)",
    ),  # fmt: skip
    ("import sealstore.adapters.sqlalchemy", ["sqlalchemy"], "sqlalchemy", "adapters.sqlalchemy"),
    ("import sealstore.migrations", ["alembic"], "sqlalchemy", "sealstore.migrations"),
    ("import sealstore.migrations.ops", ["sqlalchemy"], "sqlalchemy", "sealstore.migrations"),
    ("import sealstore.migrations.commands", ["rich"], "sqlalchemy", "sealstore.migrations"),
    ("import sealstore.keysources.database", ["sqlalchemy"], "sqlalchemy", "database key source"),
]


@pytest.mark.parametrize("stmt, blocked, extra, what", IMPORTS, ids=[i[0] for i in IMPORTS])
def test_import_without_its_extra_names_the_extra(stmt, blocked, extra, what):
    proc = run_without(
        blocked,
        f"""
        from sealstore.errors import MissingExtra
        try:
            {stmt}
        except MissingExtra as exc:
            assert isinstance(exc, ImportError)
            assert exc.__cause__ is None and exc.__context__ is None
            print(exc.extra, "|", exc)
        else:
            raise SystemExit("imported")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    got_extra, _, message = proc.stdout.strip().partition(" | ")
    assert got_extra == extra
    assert what in message and f"pip install 'sealstore[{extra}]'" in message
    assert all(b in message for b in blocked)


def test_the_core_imports_without_any_extra():
    blocked = sorted({m for mods in extras.EXTRAS.values() for m in mods})
    proc = run_without(
        blocked,
        """
        import os
        import sealstore, sealstore.config, sealstore.keysources.file, sealstore.wrapping, sealstore.wrapping.kms
        import sealstore.stream, sealstore.cli, sealstore.adapters.objects
        from sealstore import AEGIS128X4, Keyring
        c = AEGIS128X4(AEGIS128X4.generate_key())
        n = os.urandom(16)
        assert c.decrypt(n, c.encrypt(n, b"x", b""), b"") == b"x"
        ring = Keyring.generate()
        assert ring.open(ring.seal(b"value")) == b"value"
        print("ok")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_kms_wrapper_needs_the_kms_extra_only_without_a_client():
    proc = run_without(
        ["boto3"],
        """
        from sealstore.errors import MissingExtra
        from sealstore.wrapping.kms import KmsWrapper
        try:
            KmsWrapper("alias/k")
        except MissingExtra as exc:
            print(exc.extra, "|", exc)
        KmsWrapper("alias/k", client=object())  # a caller's client: no boto3 needed
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kms | ") and "pip install 'sealstore[kms]'" in proc.stdout


def test_database_key_source_in_a_config_needs_the_sqlalchemy_extra(tmp_path):
    master = tmp_path / "master.key"
    master.write_bytes(bytes(range(32)))
    master.chmod(0o600)
    cfg = tmp_path / "sealstore.toml"
    cfg.write_text(
        '[key_source]\ntype = "database"\nurl = "sqlite:///%s"\n'
        '[key_source.wrapping]\ntype = "master-key"\npath = "%s"\n' % (tmp_path / "keys.db", master)
    )
    proc = run_without(
        ["sqlalchemy"],
        """
        import sys
        from sealstore.config import load_config
        from sealstore.errors import MissingExtra
        cfg = load_config(sys.argv[1], env={})  # the file itself is valid on the core
        try:
            cfg.load_keyring()
        except MissingExtra as exc:
            print(exc.extra)
        """,
        str(cfg),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "sqlalchemy"
    assert not (tmp_path / "keys.db").exists()


CLI = """
import sys
from sealstore.cli import main
sys.exit(main(sys.argv[1:]))
"""


def listed(help_text: str) -> set[str]:
    """The command names of ``sealstore --help``'s list (between COMMAND and options:)."""
    block = help_text.split("  COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    return {line.split()[0] for line in block.splitlines() if line.startswith("    ") and
            not line.startswith("     ")}  # fmt: skip


def test_help_lists_only_installed_commands_and_names_the_extra_of_the_others():
    proc = run_without(["boto3", "sqlalchemy"], CLI, "--help")
    assert proc.returncode == 0, proc.stderr
    assert listed(proc.stdout) == {"keys", "bench", "tenants"}  # bench needs only rich
    assert "not available" not in proc.stdout and "migrations" not in proc.stdout
    tail = " ".join(proc.stdout.split("not installed here")[1].split())
    assert "s3: pip install 'sealstore[s3]'" in tail
    assert (
        "rotate, reindex, status, verify, encrypt-column, decrypt-column, medium-check, db, "
        "keys retire, "
        "keys destroy: pip install 'sealstore[sqlalchemy]'"
    ) in tail
    assert "exit status" in tail and "130 interrupted" in tail
    keys = run_without(["sqlalchemy"], CLI, "keys", "--help")
    assert keys.returncode == 0, keys.stderr
    assert "retire, destroy: pip install 'sealstore[sqlalchemy]'" in keys.stdout
    assert "    retire " not in keys.stdout


def test_help_lists_the_real_commands_when_the_extras_are_installed():
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "not available" not in proc.stdout
    assert re.search(r"\brotate\b", proc.stdout) and re.search(r"\bs3\b", proc.stdout)


@pytest.mark.parametrize(
    "blocked, argv, extra",
    [
        (["boto3"], ["s3", "rotate", "s3://bucket/p", "--dry-run"], "s3"),
        (["boto3"], ["s3", "--help"], "s3"),
        (["alembic"], ["rotate"], "sqlalchemy"),
        (["sqlalchemy"], ["--config", "x.toml", "status", "--json"], "sqlalchemy"),
        (["sqlalchemy"], ["rotate", "--help"], "sqlalchemy"),
        (["sqlalchemy"], ["db", "init", "--db", "sqlite:///x.db"], "sqlalchemy"),
        (["sqlalchemy"], ["keys", "retire", "0a0b0c0d", "--force"], "sqlalchemy"),
        (["rich"], ["keys", "destroy", "--bogus"], "sqlalchemy"),
        (["rich"], ["bench", "--quick"], "bench"),
        (["rich"], ["--log-level", "debug", "bench", "--help"], "bench"),
    ],
)
def test_a_command_without_its_extra_is_one_line_and_exit_1(blocked, argv, extra, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE.format(blocked=blocked) + CLI, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("sealstore: error: ")
    assert proc.stderr.rstrip().endswith(f"pip install 'sealstore[{extra}]'")
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing written (no checkpoint, no output)


def test_an_unknown_command_is_a_one_line_usage_error_in_a_core_install():
    proc = run_without(["sqlalchemy", "boto3"], CLI, "rotat")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "invalid choice: 'rotat'" in proc.stderr


def test_keys_commands_work_without_any_extra(tmp_path):
    blocked = sorted({m for mods in extras.EXTRAS.values() for m in mods})
    env_code = (
        "import os\n"
        "for k in [k for k in os.environ if k.startswith('SEALSTORE_')]: del os.environ[k]\n"
        f"os.environ['SEALSTORE_KEY_SOURCE__PATH'] = {str(tmp_path / 'keys.json')!r}\n"
    )
    for argv in (["keys", "init"], ["keys", "list", "--json"]):
        proc = run_without(blocked, env_code + CLI, *argv)
        assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 1


def _requirements_closure(dist: str, extra: str | None = None, seen=None) -> set[str]:
    """``dist`` and every distribution it (with ``extra``) requires, as installed."""
    seen = set() if seen is None else seen
    key = re.sub(r"[-_.]+", "-", dist).lower()
    if (key, extra) in seen:
        return {key}
    seen.add((key, extra))
    found = {key}
    for req in importlib.metadata.requires(dist) or []:
        name, _, marker = req.partition(";")
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[([^\]]*)\])?", name)
        wanted = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if (wanted.group(1) if wanted else None) != extra:
            continue
        if wanted is None and marker.strip() and not _marker_holds(marker):
            continue
        for sub in [None] + [s.strip() for s in (m.group(2) or "").split(",") if s.strip()]:
            found |= _requirements_closure(m.group(1), sub, seen)
    return found


def _marker_holds(marker: str) -> bool:
    return Marker(marker).evaluate()


@pytest.mark.parametrize("extra", sorted(extras.EXTRAS))
def test_every_module_an_extra_is_checked_for_comes_with_that_extra(extra):
    closure = _requirements_closure("sealstore", extra)
    by_module = importlib.metadata.packages_distributions()
    for module in extras.EXTRAS[extra]:
        top = module.split(".")[0]  # google.cloud.storage: the google namespace's distributions
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in by_module[top]}
        assert dists & closure, f"{module} ({dists}) is not installed by sealstore[{extra}]"


@pytest.mark.parametrize(
    "wrapping, argv, blocked, extra",
    [
        ('type = "aws-kms"\nkms_key_id = "alias/k"', ["keys", "init"], ["boto3"], "kms"),
        (None, ["keys", "list"], ["sqlalchemy"], "sqlalchemy"),
    ],
)
def test_a_key_source_without_its_extra_is_one_line_and_exit_1(
    tmp_path, wrapping, argv, blocked, extra
):
    """The core's own ``keys`` commands on a configuration that needs an extra: AWS KMS wrapping
    without boto3, the database key source without SQLAlchemy."""
    master = tmp_path / "master.key"
    master.write_bytes(bytes(range(32)))
    master.chmod(0o600)
    if wrapping is None:  # the database key source, wrapped with a master key
        text = '[key_source]\ntype = "database"\nurl = "sqlite:///%s"\n' % (tmp_path / "k.db")
        text += '[key_source.wrapping]\ntype = "master-key"\npath = "%s"\n' % master
    else:
        text = '[key_source]\npath = "%s"\n[key_source.wrapping]\n%s\n' % (
            tmp_path / "keys.json",
            wrapping,
        )
    cfg = tmp_path / "sealstore.toml"
    cfg.write_text(text)
    cfg.chmod(0o600)
    env_code = (
        "import os\n"
        "for k in [k for k in os.environ if k.startswith('SEALSTORE_')]: del os.environ[k]\n"
    )
    proc = run_without(blocked, env_code + CLI, "-c", str(cfg), *argv)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.rstrip().endswith(f"pip install 'sealstore[{extra}]'"), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["master.key", "sealstore.toml"]
