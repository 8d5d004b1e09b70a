"""Issue 26, items 3 and 9: what ``alembic revision --autogenerate`` writes for columns changed
from ``String`` to encrypted types runs, on SQLite, PostgreSQL and MariaDB, with Alembic's
unedited ``script.py.mako``: the index on a converted column is dropped before the conversion
and recreated after the reverse one, each conversion is a revision of its own, and an upgrade
that failed at any point (mid-backfill, in the final pass, after a conversion committed but
before ``alembic_version`` moved) completes when it is run again, never ``DuplicateColumn``."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.runtime.migration import MigrationContext
from alembic_project import alembic_project
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.errors import ColumnBindingError
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.alembic import ops as conv_ops

ENV_PY = """
from alembic import context
from sqlalchemy import create_engine
from sealstore.migrations.alembic.autogen import alembic_options
from sealstore.migrations.alembic.ops import rewriter

config = context.config
hooks = config.attributes.get("hooks", "options")
extra = {"options": alembic_options(),
         "rewriter": {"process_revision_directives": rewriter}}[hooks]
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=config.attributes.get("target"),
                          transaction_per_migration=True, **extra)
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""

USERS_REV = '''
"""users, as the application had it before sealstore"""
import sqlalchemy as sa
from alembic import op

revision = "app_0001"
down_revision = None
branch_labels = ("app",)
depends_on = None


def upgrade():
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("email", sa.String(80), nullable=False),
        sa.Column("ssn", sa.String(11), nullable=True),
        sa.Column("notes", sa.String(200), nullable=True),
    )
    op.create_index("ix_users_email", "users", ["email"], unique=True)


def downgrade():
    op.drop_index("ix_users_email", table_name="users")
    op.drop_table("users")
'''

ROWS = 2500  # three batches of the default 1000


def _models(encrypted: bool) -> sa.MetaData:
    target = sa.MetaData()
    if encrypted:
        sa.Table(
            "users", target,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("email", EncryptedString(80), nullable=False),
            sa.Column("ssn", EncryptedString(11)),
            sa.Column("notes", EncryptedString(200)),
        )  # fmt: skip
    else:
        sa.Table(
            "users", target,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("email", sa.String(80), nullable=False, index=True, unique=True),
            sa.Column("ssn", sa.String(11)),
            sa.Column("notes", sa.String(200)),
        )  # fmt: skip
    return target


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate())
    yield kr
    forget_keyring()


@pytest.fixture
def project(tmp_path, sql_engine):
    with alembic_project(tmp_path, sql_engine, ENV_PY, {"app_0001.py": USERS_REV}) as (
        cfg,
        versions,
    ):
        yield cfg, sql_engine, versions


def _fill(engine) -> dict:
    rows = {
        i: (f"user{i}@example.org", f"{i % 1000:03d}-45-{i:04d}" if i % 7 else None,
            f"allergic to penicillin #{i}" if i % 3 else None)
        for i in range(1, ROWS + 1)
    }  # fmt: skip
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO users (id, email, ssn, notes) VALUES (:id, :e, :s, :n)"),
            [{"id": k, "e": e, "s": s, "n": n} for k, (e, s, n) in rows.items()],
        )
    return rows


def _read(engine, encrypted: bool) -> dict:
    users = _models(encrypted).tables["users"]
    with engine.connect() as conn:
        got = conn.execute(sa.select(users.c.id, users.c.email, users.c.ssn, users.c.notes))
        return {r[0]: tuple(r[1:]) for r in got}


def _version(engine) -> set:
    with engine.connect() as conn:
        return set(MigrationContext.configure(conn).get_current_heads())


def _columns(engine) -> dict:
    return {c["name"]: c for c in sa.inspect(engine).get_columns("users")}


def _generate(cfg) -> list[Path]:
    cfg.attributes["target"] = _models(True)
    out = command.revision(cfg, "encrypt", autogenerate=True, head="app@head", rev_id="app_0002")
    scripts = out if isinstance(out, list) else [out]
    return [Path(s.path) for s in scripts]


def _body(path: Path, which: str) -> str:
    text = path.read_text()
    up, down = text.split("def upgrade", 1)[1].split("def downgrade", 1)
    return up if which == "up" else down


def _plain_state_ok(engine, rows) -> None:
    cols = _columns(engine)
    assert not any(n.startswith("_ss_") for n in cols)
    assert not isinstance(cols["email"]["type"], sa.LargeBinary)
    indexes = {ix["name"]: ix for ix in sa.inspect(engine).get_indexes("users")}
    assert indexes["ix_users_email"]["column_names"] == ["email"]
    assert indexes["ix_users_email"]["unique"]
    assert _read(engine, False) == rows


def _encrypted_state_ok(engine, rows, head) -> None:
    assert _version(engine) >= {head}
    cols = _columns(engine)
    assert not any(n.startswith("_ss_") for n in cols), cols
    assert cols["email"]["nullable"] is False
    assert _read(engine, True) == rows
    with engine.connect() as conn:  # sealed on the medium of SQL: no plaintext value left
        raw = conn.execute(sa.text("SELECT email, ssn, notes FROM users")).all()
    for values in raw:
        for v in values:
            assert v is None or isinstance(v, (bytes, memoryview))


def test_generated_revisions_run_down_and_up_again(project, keyring):
    cfg, engine, versions = project
    command.upgrade(cfg, "heads")
    rows = _fill(engine)
    paths = _generate(cfg)
    names = [p.name.split("_encrypt")[0] for p in paths]
    assert names == ["app_0002", "app_0002_2", "app_0002_3", "app_0002_4"]
    first = paths[0]
    assert "op.drop_index(op.f('ix_users_email')" in _body(first, "up")
    assert "encrypt_column" not in first.read_text()
    assert "op.create_index(op.f('ix_users_email')" in _body(first, "down")
    for path, column in zip(paths[1:], ("email", "ssn", "notes")):
        up, down = _body(path, "up"), _body(path, "down")
        assert up.count("op.encrypt_column(") == 1 and f"'users', '{column}'" in up
        assert down.count("op.decrypt_column(") == 1 and "index" not in down
        assert "import sealstore.adapters.sqlalchemy" in path.read_text()
    head = "app_0002_4"

    command.upgrade(cfg, "app@head")
    _encrypted_state_ok(engine, rows, head)
    assert "ix_users_email" not in {ix["name"] for ix in sa.inspect(engine).get_indexes("users")}
    cfg.attributes["target"] = _models(True)
    command.check(cfg)  # the models and the database agree

    command.downgrade(cfg, "app_0001")
    assert _version(engine) >= {"app_0001"}
    _plain_state_ok(engine, rows)

    command.upgrade(cfg, "app@head")
    _encrypted_state_ok(engine, rows, head)
    command.downgrade(cfg, "base")


class _Injected(RuntimeError):
    pass


def _fail_once(monkeypatch, target, name, column, *, after=False, skip=0):
    """Make ``target.name`` raise once, for the conversion of ``column`` (the ``skip``-th call
    after the first ``skip`` ones; ``after``: once the real call returned)."""
    real = getattr(target, name)
    state = {"calls": 0, "fired": False}

    def wrapper(self, *args, **kw):
        mine = self.op.column_name == column and not state["fired"]
        if mine and not after:
            state["calls"] += 1
            if state["calls"] > skip:
                state["fired"] = True
                raise _Injected(f"injected in {name} of {column}")
        out = real(self, *args, **kw)
        if mine and after:
            state["fired"] = True
            raise _Injected(f"injected after {name} of {column}")
        return out

    monkeypatch.setattr(target, name, wrapper)
    return state


def _fail_in_batch(monkeypatch, column, skip):
    """The ``skip + 1``-th batch of ``column`` fails (the ones before it are committed)."""
    real = conv_ops._seal_rows
    state = {"calls": 0, "fired": False}

    def seal(bound, items):
        mine = column == "ssn" and "-45-" in str(items[0][1])  # ssn's values
        if mine and not state["fired"]:
            state["calls"] += 1
            if state["calls"] > skip:
                state["fired"] = True
                raise _Injected(f"injected in batch {state['calls']} of {column}")
        return real(bound, items)

    monkeypatch.setattr(conv_ops, "_seal_rows", seal)
    return state


@pytest.mark.parametrize(
    "where", ["mid_backfill", "final_pass", "after_commit", "after_commit_downgrade"]
)
def test_failed_upgrade_completes_when_run_again(project, keyring, monkeypatch, where):
    cfg, engine, versions = project
    command.upgrade(cfg, "heads")
    rows = _fill(engine)
    _generate(cfg)
    if where == "mid_backfill":  # ssn: two batches committed, the third fails
        state = _fail_in_batch(monkeypatch, "ssn", skip=2)
    elif where == "final_pass":  # ssn backfilled; the swap's transaction fails
        state = _fail_once(monkeypatch, conv_ops._Converter, "_swap", "ssn")
    else:  # ssn converted and committed; the failure comes before alembic_version moves
        state = _fail_once(monkeypatch, conv_ops._Converter, "run", "ssn", after=True)
    if where == "after_commit_downgrade":
        monkeypatch.undo()
        command.upgrade(cfg, "app@head")
        state = _fail_once(monkeypatch, conv_ops._Converter, "run", "ssn", after=True)
        with pytest.raises(_Injected):
            command.downgrade(cfg, "app_0001")
        assert state["fired"]
        assert "app_0002_3" in _version(engine)  # ssn decrypted, the version did not move
        monkeypatch.undo()
        command.downgrade(cfg, "app_0001")  # the same downgrade again: completes
        _plain_state_ok(engine, rows)
        command.downgrade(cfg, "base")
        return
    with pytest.raises(_Injected):
        command.upgrade(cfg, "app@head")
    assert state["fired"]
    assert _version(engine) >= {"app_0002_2"}  # email's revision is done, ssn's is not
    assert "app_0002_3" not in _version(engine)
    monkeypatch.undo()
    command.upgrade(cfg, "app@head")  # the same upgrade again: resumes, no DuplicateColumn
    _encrypted_state_ok(engine, rows, "app_0002_4")
    command.downgrade(cfg, "app_0001")
    _plain_state_ok(engine, rows)
    command.downgrade(cfg, "base")


def test_rewriter_alone_imports_what_the_revision_names(project, keyring):
    """Item 9: with only the rewriter (no render_item hook) the file imports the module of
    every sealstore type it names, and runs with the unedited template."""
    cfg, engine, versions = project
    cfg.attributes["hooks"] = "rewriter"
    command.upgrade(cfg, "heads")
    rows = _fill(engine)
    target = _models(True)
    target.tables["users"].append_column(sa.Column("phone", EncryptedString(20)))
    cfg.attributes["target"] = target
    out = command.revision(cfg, "enc", autogenerate=True, head="app@head", rev_id="app_0002")
    paths = [Path(s.path) for s in (out if isinstance(out, list) else [out])]
    text = paths[0].read_text()
    assert "sealstore.adapters.sqlalchemy.EncryptedString(20)" in text  # Alembic's default
    assert "import sealstore.adapters.sqlalchemy\n" in text
    command.upgrade(cfg, "app@head")
    assert _read(engine, True) == rows
    command.downgrade(cfg, "base")


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_conversion_refuses_a_column_an_index_still_covers(project, keyring):
    """A hand-written encrypt_column on an indexed column is refused before any write (the
    index would be dropped with the plaintext column on some databases, kept on sealed bytes
    on others): the message names the index and the fix."""
    cfg, engine, versions = project
    command.upgrade(cfg, "heads")
    rows = _fill(engine)
    from alembic.operations import Operations

    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        with pytest.raises(ColumnBindingError, match="ix_users_email.*drop it first"):
            op.encrypt_column("users", "email", EncryptedString(80))
    assert "_ss_email" not in _columns(engine)
    assert _read(engine, False) == rows
    command.downgrade(cfg, "base")


KILLED_ENV_PY = """
import json, os, time
from alembic import context
from sqlalchemy import create_engine
from sealstore.keyring import Key, Keyring, use_keyring
from sealstore.migrations.alembic import ops as conv_ops
from sealstore.migrations.alembic.autogen import alembic_options

keys = [Key(k["id"], k["suite"], bytes.fromhex(k["material"]), state=k["state"])
        for k in json.load(open(os.environ["KEYS_JSON"]))]
use_keyring(Keyring(keys))
if os.environ.get("SLOW_BATCHES"):  # time for the test to kill us in the middle of a backfill
    real = conv_ops._seal_rows

    def slow(bound, items):
        time.sleep(float(os.environ["SLOW_BATCHES"]))
        return real(bound, items)

    conv_ops._seal_rows = slow
config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=None,
                          transaction_per_migration=True, **alembic_options())
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""


def test_upgrade_killed_mid_backfill_completes_when_run_again(
    project, keyring, tmp_path, monkeypatch
):
    """SIGKILL an ``alembic upgrade`` process while it fills ``_ss_ssn`` (batches of email
    and of ssn committed), then run the same command again: it completes."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    cfg, engine, versions = project
    command.upgrade(cfg, "heads")
    rows = _fill(engine)
    _generate(cfg)
    root = Path(cfg.get_main_option("script_location"))
    (root / "env.py").write_text(KILLED_ENV_PY)
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([
        {"id": k.key_id, "suite": str(k.suite), "state": k.state.value,
         "material": k.reveal_material().hex()} for k in keyring.keys
    ]))  # fmt: skip
    monkeypatch.setenv("KEYS_JSON", str(keys))  # the env.py, in this process too
    ini = tmp_path / "alembic.ini"
    ini.write_text("[alembic]\n" + "".join(
        f"{k} = {cfg.get_main_option(k)}\n"
        for k in ("script_location", "path_separator", "version_locations")
    ) + f"sqlalchemy.url = {cfg.get_main_option('sqlalchemy.url').replace('%', '%%')}\n")  # fmt: skip
    cmd = [sys.executable, "-m", "alembic", "-c", str(ini), "upgrade", "app@head"]
    env = {**os.environ, "KEYS_JSON": str(keys)}
    proc = subprocess.Popen(cmd, env={**env, "SLOW_BATCHES": "0.3"}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    counted = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if "_ss_ssn" in _columns(engine):
                with engine.connect() as conn:
                    counted = conn.execute(
                        sa.text("SELECT count(*) FROM users WHERE _ss_ssn IS NOT NULL")
                    ).scalar_one()
                if counted:
                    break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    assert counted, proc.stdout.read().decode(errors="replace")[-2000:]
    assert "_ss_ssn" in _columns(engine)  # killed in the middle of ssn's backfill
    assert _version(engine) >= {"app_0002_2"} and "app_0002_3" not in _version(engine)

    again = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "DuplicateColumn" not in again.stdout + again.stderr
    _encrypted_state_ok(engine, rows, "app_0002_4")
    command.downgrade(cfg, "base")
