"""Every fenced code block of README.md, SECURITY.md and docs/**/*.md runs, or is marked as not
run with a reason (the markers: tests/docblocks.py).  Each block group runs in a fresh temporary
directory with only the fixtures it declares."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import types
import uuid
from pathlib import Path

import pytest
from docblocks import ROOT, Block, blocks, commands, groups, pages, problems
from fixtures_s3 import make_client, s3_endpoint
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

BUCKET = "my-bucket"  # the name the pages use


class Run:
    """What a block group sees: its namespace, directory and environment."""

    def __init__(self, request, monkeypatch, tmp_path: Path) -> None:
        self.request, self.monkeypatch, self.dir = request, monkeypatch, tmp_path
        module = types.ModuleType(f"docs_block_{uuid.uuid4().hex}")  # SQLAlchemy resolves
        monkeypatch.setitem(sys.modules, module.__name__, module)  # annotations through it
        self.ns: dict = module.__dict__

    def setenv(self, name: str, value: str) -> None:
        self.monkeypatch.setenv(name, value)


@contextlib.contextmanager
def fx_keyring(run: Run):
    """``keyring`` and ``index_keyring``: fresh generated keyrings (nothing registered)."""
    from sealstore import Keyring

    run.ns["keyring"] = Keyring.generate()
    run.ns["index_keyring"] = Keyring.generate()
    yield


@contextlib.contextmanager
def fx_s3(run: Run):
    """A moto S3 server that ``boto3.client("s3")`` reaches, with an empty ``my-bucket``."""
    endpoint = run.request.getfixturevalue("s3_endpoint")
    for name, value in {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        run.setenv(name, value)
    raw = make_client(endpoint)
    raw.create_bucket(Bucket=BUCKET)
    try:
        yield
    finally:
        for obj in raw.list_objects_v2(Bucket=BUCKET).get("Contents", []):
            raw.delete_object(Bucket=BUCKET, Key=obj["Key"])
        raw.delete_bucket(Bucket=BUCKET)


@contextlib.contextmanager
def fx_gcs(run: Run):
    """The GCS emulator that ``storage.Client()`` reaches, with an empty ``my-bucket``."""
    from fixtures_gcs import make_gcs_client

    emulator = run.request.getfixturevalue("gcs_emulator")
    run.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    run.setenv("GOOGLE_CLOUD_PROJECT", "sealstore-test")
    raw = make_gcs_client(emulator)
    bucket = raw.create_bucket(BUCKET)
    try:
        yield
    finally:
        bucket.delete(force=True)


@contextlib.contextmanager
def fx_alembic_revision(run: Run):
    """The block is an Alembic revision file: loaded as a module, its ``upgrade()``, then its
    ``downgrade()``, then ``upgrade()`` again run on the page's ``engine`` (from an earlier
    block or a fixture), each inside an Alembic operations context."""
    yield


class AppBase(DeclarativeBase):
    pass


class AppUser(AppBase):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    ssn: Mapped[str] = mapped_column(EncryptedString(11))
    email: Mapped[str] = mapped_column(EncryptedString(320))
    email_index: Mapped[bytes] = mapped_column(BlindIndex("email"), index=True)


@contextlib.contextmanager
def fx_app(run: Run):
    """An application: ``engine`` (SQLite file), ``Base`` and ``User`` (encrypted ``ssn``,
    ``email`` with its blind index), 20 users written under a key that is no longer the
    primary, ``keyring`` registered as "default" and ``index_keyring`` as "index", and
    sealstore's job tables (``sealstore db init``)."""
    import sqlalchemy as sa
    from sealstore import Keyring, use_keyring
    from sealstore.migrations import create_tables

    keyring = use_keyring(Keyring.generate())
    index_keyring = use_keyring(Keyring.generate(), name="index")
    engine = sa.create_engine(f"sqlite:///{run.dir / 'app.db'}")
    AppBase.metadata.create_all(engine)
    create_tables(engine)
    with Session(engine) as session:
        session.add_all(
            AppUser(ssn=f"{i:03}-45-6789", email=f"user{i}@example.org") for i in range(20)
        )
        session.commit()
    keyring.rotate()
    run.ns.update(engine=engine, Base=AppBase, User=AppUser, keyring=keyring)
    run.ns["index_keyring"] = index_keyring
    try:
        yield
    finally:
        engine.dispose()


_CONFIG = """[key_source]
path = "{name}-keys.json"

[key_source.wrapping]
type = "master-key"
path = "master.key"
"""


@contextlib.contextmanager
def fx_configs(run: Run):
    """``master.key`` and two configuration files using it, ``sealstore.toml`` (key file
    ``sealstore-keys.json``) and ``sealstore-index.toml`` (``sealstore-index-keys.json``), no
    keyring created yet."""
    from sealstore.wrapping import MasterKeyWrapper

    MasterKeyWrapper.create_file(run.dir / "master.key")
    for name in ("sealstore", "sealstore-index"):
        (run.dir / f"{name}.toml").write_text(_CONFIG.format(name=name), encoding="utf-8")
    yield


@contextlib.contextmanager
def fx_configured(run: Run):
    """As ``configs``, both keyrings created, and ``SEALSTORE_CONFIG=sealstore.toml``."""
    from sealstore.config import load_config

    with fx_configs(run):
        for name in ("sealstore", "sealstore-index"):
            load_config(run.dir / f"{name}.toml", env={}).key_source_object().init()
        run.setenv("SEALSTORE_CONFIG", str(run.dir / "sealstore.toml"))
        yield


@contextlib.contextmanager
def fx_plain_app(run: Run):
    """``engine`` on a SQLite file with a ``users`` table whose ``ssn`` is plaintext
    ``VARCHAR(11)`` (three rows), and a generated keyring registered as "default"."""
    import sqlalchemy as sa
    from sealstore import Keyring, use_keyring

    use_keyring(Keyring.generate())
    engine = sa.create_engine(f"sqlite:///{run.dir / 'app.db'}")
    table = sa.Table(
        "users",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("ssn", sa.String(11)),
    )
    with engine.begin() as conn:
        table.create(conn)
        conn.execute(table.insert(), [{"ssn": f"{i:03}-45-6789"} for i in range(3)])
    run.ns["engine"] = engine
    try:
        yield
    finally:
        engine.dispose()


FIXTURES = {
    "app": fx_app,
    "configs": fx_configs,
    "configured": fx_configured,
    "plain-app": fx_plain_app,
    "keyring": fx_keyring,
    "s3": fx_s3,
    "gcs": fx_gcs,
    "alembic-revision": fx_alembic_revision,
}


def run_python(block: Block, run: Run) -> None:
    code = compile(block.text, block.where, "exec")
    if "alembic-revision" not in block.fixtures:
        exec(code, run.ns)
        return
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    module = types.ModuleType(f"revision_{uuid.uuid4().hex}")
    exec(code, module.__dict__)
    for step in (module.upgrade, module.downgrade, module.upgrade):  # reversible
        with run.ns["engine"].connect() as conn:  # one revision, as Alembic runs it
            ctx = MigrationContext.configure(conn, opts={"transaction_per_migration": True})
            with Operations.context(ctx), ctx.begin_transaction(_per_migration=True):
                step()


def run_shell(block: Block, run: Run) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for cmd in commands(block):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", cmd],
            cwd=run.dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{block.where}: {cmd!r} exited {done.returncode}\n" + (
            done.stdout + done.stderr
        )


def run_toml(block: Block, run: Run) -> None:
    from sealstore.config import load_config

    tomllib.loads(block.text)
    path = run.dir / (block.file or f".block-{block.line}.toml")
    path.write_text(block.text, encoding="utf-8")
    load_config(path, env={})  # a valid sealstore configuration (ConfigError otherwise)


def run_sql(block: Block, run: Run) -> None:
    engine = run.ns.get("engine")
    assert engine is not None, f"{block.where}: an sql block continues a block that makes `engine`"
    with engine.begin() as conn:
        for statement in (s.strip() for s in block.text.split(";")):
            if statement and not all(ln.startswith("--") for ln in statement.splitlines()):
                conn.exec_driver_sql(statement).fetchall()


RUNNERS = {
    "sql": run_sql,
    "python": run_python,
    "console": run_shell,
    "sh": run_shell,
    "toml": run_toml,
    "json": lambda block, run: json.loads(block.text),
}


def _cases():
    out = []
    for page in pages():
        for group in groups(page):
            first = group[0]
            marks = []
            if first.not_run is not None or first.ci is not None:
                marks.append(pytest.mark.skip(reason=first.not_run or f"ci:{first.ci}"))
            out.append(pytest.param(group, id=first.where, marks=marks))
    return out


@pytest.mark.parametrize("group", _cases())
def test_block_runs(group, request, monkeypatch, tmp_path):
    run = Run(request, monkeypatch, tmp_path)
    tmp_path.chmod(0o700)  # key files refuse directories others can write
    monkeypatch.chdir(tmp_path)
    names = [n for block in group for n in block.fixtures]
    unknown = sorted(set(names) - set(FIXTURES))
    assert not unknown, f"{group[0].where}: unknown fixtures {unknown} (known: {sorted(FIXTURES)})"
    from sealstore.keyring import forget_keyring

    with contextlib.ExitStack() as stack:
        stack.callback(forget_keyring, "index")
        stack.callback(forget_keyring)
        for name in dict.fromkeys(names):
            stack.enter_context(FIXTURES[name](run))
        for block in group:
            if block.file is not None:
                (tmp_path / block.file).write_text(block.text, encoding="utf-8")
            RUNNERS[block.lang](block, run)


def test_every_block_runs_or_is_marked():
    """An unmarked block in a language the test cannot run fails here, as does a marker the
    test does not know, a dangling marker, or a console block that shows output."""
    found = problems(pages(), set(FIXTURES))
    assert not found, "\n".join(found)


def test_ci_blocks_are_the_ones_ci_runs():
    """``<!-- ci:TAG -->`` blocks are only README's set-up commands, which .ci/run reads."""
    if not (ROOT / ".ci" / "run").exists():
        pytest.skip("not a git checkout (an sdist has no .ci/run)")
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for page in pages():
        for block in blocks(page):
            if block.ci is not None:
                assert page.name == "README.md", block.where
                assert f"readme_command {block.ci}" in ci_script, block.where


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("```ini\n[alembic]\n```\n", "neither runs nor is marked"),
        ("```\nplain\n```\n", "a plain block neither runs"),
        ("<!-- fixtures: s3 -->\n```python\npass\n```\n", "is not one we run"),
        ("<!-- not-run -->\n```text\nx\n```\n", "is not one we run"),
        ("<!-- not-run: ok -->\n\n```text\nx\n```\n", "not directly above a block"),
        ("<!-- continues -->\n```python\npass\n```\n", "needs a run block before it"),
        ("```console\n$ true\noutput\n```\n", "'$ ' commands only"),
        ("```python\npass\n", "unclosed code block"),
        ("<!-- fixture: database -->\n```python\npass\n```\n", "unknown fixtures ['database']"),
        ("<!-- file: ../x.toml -->\n```toml\n```\n", "is not one we run"),
    ],
)
def test_the_checker_refuses_bad_pages(tmp_path, text, problem):
    """The checks above find what they must refuse."""
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    found = problems([path], set(FIXTURES))
    assert len(found) == 1 and problem in found[0], found


def test_a_failing_block_fails(request, monkeypatch, tmp_path):
    """A block that raises, or a command that exits non-zero, fails its test."""
    run = Run(request, monkeypatch, tmp_path)
    bad = Block(ROOT / "docs" / "x.md", 1, "python", "raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError, match="boom"):
        run_python(bad, run)
    with pytest.raises(AssertionError, match="exited 3"):
        run_shell(Block(ROOT / "docs" / "x.md", 1, "sh", "exit 3\n"), run)
    with pytest.raises(Exception, match="key_source"):
        run_toml(Block(ROOT / "docs" / "x.md", 1, "toml", "[key_source]\ntype = 'nope'\n"), run)
