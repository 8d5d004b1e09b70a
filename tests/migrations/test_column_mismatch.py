"""A column whose stored type or contents is not what the model says: every command answers
one line naming the column, the stored and the expected type and the fix, exit status 3,
never a traceback and never a wrong "done" (issue 26, item 4).  SQLite, PostgreSQL, MariaDB."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
import sqlalchemy as sa
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.errors import ColumnNotConverted, ColumnTypeMismatch
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.migrations.rotation.reseal import rotate
from sealstore.migrations.rotation.status import status
from sealstore.migrations.rotation.verify import verify
from sealstore.migrations.schema import create_tables

SECRETS = ["alice@example.com", "bob@example.com", "carol@example.com"]

MODELS = """
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString

metadata = sa.MetaData()
people = sa.Table("{table}", metadata, sa.Column("id", sa.Integer, primary_key=True,
                  autoincrement=False), sa.Column("email", EncryptedString(100)),
                  sa.Column("note", {note_type}),
                  sa.Column("email_index", BlindIndex("email", keyring="index")))
"""


@pytest.fixture
def app(tmp_path, monkeypatch, sql_engine):
    import os

    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, keys in (("main.json", "keys.json"), ("other.json", "other-keys.json")):
        (tmp_path / name).write_text(
            json.dumps({"key_source": {"type": "file", "path": str(tmp_path / keys)}})
        )
        assert main(["--config", name, "keys", "init"]) == 0
    tag = uuid.uuid4().hex[:8]
    table = f"mm_{tag}"
    modules = {}
    for kind, note_type in (("enc", "EncryptedString(100)"), ("plain", "sa.String(100)")):
        modules[kind] = f"mm_models_{kind}_{tag}"
        (tmp_path / f"{modules[kind]}.py").write_text(
            MODELS.format(table=table, note_type=note_type)
        )
    create_tables(sql_engine)
    keyring = use_keyring(load_config("main.json").load_keyring(), "default")
    index = use_keyring(load_config("other.json").load_keyring(), "index")
    url = sql_engine.url.render_as_string(hide_password=False)

    class App:
        engine = sql_engine
        db = url

    App.table, App.modules = table, modules
    yield App
    for name, kr in (("default", keyring), ("index", index)):
        forget_keyring(name)
        kr.close()
    for m in modules.values():
        sys.modules.pop(m, None)


def _plain_table(app, *, email=sa.String(100)):
    """The application's table before the conversion: email is still plaintext."""
    meta = sa.MetaData()
    t = sa.Table(
        app.table, meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("email", email), sa.Column("note", sa.String(100)),
        sa.Column("email_index", sa.LargeBinary),
    )  # fmt: skip
    meta.create_all(app.engine)
    with app.engine.begin() as conn:
        raw = isinstance(email, sa.LargeBinary)
        rows = [
            {"id": i, "email": e.encode() if raw else e, "note": e} for i, e in enumerate(SECRETS)
        ]
        conn.execute(t.insert(), rows)
    return t


def _sealed_table(app, models: str):
    """The table as the models of ``models`` declare it, rows written through them."""
    mod = __import__(app.modules[models])
    mod.metadata.create_all(app.engine)
    with app.engine.begin() as conn:
        rows = [{"id": i, "email": e, "note": e} for i, e in enumerate(SECRETS)]
        conn.execute(mod.people.insert(), rows)
    return mod


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("sealstore: error: ")]
    assert len(errors) == 1, err
    for secret in SECRETS:  # no value, whatever the command read
        assert secret not in out + err
    return code, errors[0]


COMMANDS = {
    "status": ["status"],
    "verify": ["verify"],
    "rotate": ["rotate"],
    "rotate --dry-run": ["rotate", "--dry-run"],
    "reindex": ["reindex", "--index-config", "other.json"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_declared_encrypted_but_still_plaintext(app, capsys, command):
    _plain_table(app)
    code, line = run(capsys, "--config", "main.json", *COMMANDS[command], "--db", app.db,
                     "--models", app.modules["plain"])  # fmt: skip
    assert code == 3
    assert f"{app.table}.email" in line and "still plaintext" in line
    assert "VARCHAR(100)" in line and "EncryptedString(100)" in line
    assert f"sealstore encrypt-column {app.table}.email" in line


@pytest.mark.parametrize("command", ["status", "verify", "rotate"])
def test_a_column_named_by_column_still_plaintext(app, capsys, command):
    _plain_table(app)
    code, line = run(capsys, "--config", "main.json", command, "--db", app.db, "--column",
                     f"{app.table}.email")  # fmt: skip
    assert code == 3 and "named as an encrypted column" in line and "still plaintext" in line
    assert f"sealstore encrypt-column {app.table}.email --type" in line


def test_keys_retire_on_a_plaintext_column_is_one_line(app, capsys):
    _plain_table(app)
    keyring = load_config("main.json").load_keyring()
    key = keyring.primary.id_hex
    keyring.close()
    code, line = run(capsys, "--config", "main.json", "keys", "retire", key, "--db", app.db,
                     "--models", app.modules["plain"])  # fmt: skip
    assert code == 3 and f"{app.table}.email" in line and "still plaintext" in line


def test_reindex_into_a_text_index_column(app, capsys):
    """The source column is sealed, the blind-index column was created as text."""
    mod = __import__(app.modules["enc"])
    meta = sa.MetaData()
    t = sa.Table(
        app.table, meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("email", sa.LargeBinary), sa.Column("note", sa.LargeBinary),
        sa.Column("email_index", sa.String(100)),
    )  # fmt: skip
    meta.create_all(app.engine)
    with app.engine.begin() as conn:
        seal = mod.people.c.email.type.process_bind_param
        conn.execute(t.insert(), [{"id": i, "email": bytes(seal(e, conn.dialect))}
                                  for i, e in enumerate(SECRETS)])  # fmt: skip
    code, line = run(capsys, "--config", "main.json", *COMMANDS["reindex"], "--db", app.db,
                     "--models", app.modules["enc"])  # fmt: skip
    assert code == 3 and f"{app.table}.email_index" in line and "VARCHAR(100)" in line
    assert "BlindIndex" in line and "sealstore reindex" in line


def test_a_conversion_under_way_is_named(app, capsys):
    _plain_table(app)
    with app.engine.begin() as conn:  # as an interrupted op.encrypt_column leaves it
        conn.execute(sa.text(f"ALTER TABLE {app.table} ADD COLUMN _ss_email "
                             f"{sa.LargeBinary().compile(dialect=conn.dialect)}"))  # fmt: skip
    code, line = run(capsys, "--config", "main.json", "status", "--db", app.db, "--models",
                     app.modules["plain"])  # fmt: skip
    assert code == 3 and "a conversion is under way or was interrupted" in line
    assert "_ss_email" in line and "run it again to resume" in line


def test_the_library_raises_column_not_converted(app):
    _plain_table(app)
    models = __import__(app.modules["plain"])
    for call in (
        lambda: status(app.engine, models.metadata),
        lambda: verify(app.engine, models.metadata),
        lambda: rotate(app.engine, models.metadata),
        lambda: rotate(app.engine, models.metadata, dry_run=True),
    ):
        with pytest.raises(ColumnNotConverted) as info:
            call()
        assert info.value.column == f"{app.table}.email"
        assert "VARCHAR" in info.value.stored and "EncryptedString" in info.value.expected


def test_after_the_conversion_the_same_commands_succeed(app, capsys):
    _plain_table(app)
    plain = app.modules["plain"]
    assert main(["--config", "main.json", "encrypt-column", f"{app.table}.email", "--db",
                 app.db, "--models", plain, "--progress", "none"]) == 0  # fmt: skip
    assert main(["--config", "main.json", "verify", "--db", app.db, "--models", plain]) == 0
    assert main(["--config", "main.json", "rotate", "--db", app.db, "--models", plain]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_model_says_plaintext_but_the_column_is_sealed(app, capsys, command):
    """note was converted (sealed bytes) but the model still declares String(100)."""
    _sealed_table(app, "enc")  # written through the encrypted model: note holds sealed values
    code, line = run(capsys, "--config", "main.json", *COMMANDS[command], "--db", app.db,
                     "--models", app.modules["plain"])  # fmt: skip
    assert code == 3
    assert f"{app.table}.note" in line and "declares a plaintext VARCHAR(100)" in line
    assert "holds sealed values" in line and "encrypted type in the model" in line


@pytest.mark.parametrize("direction", ["encrypt", "decrypt"])
def test_conversion_with_another_keyring_is_refused(app, capsys, direction):
    """Values sealed by the main keyring; the conversion is run with another one: it neither
    seals sealed values again nor answers "already decrypted"."""
    _sealed_table(app, "enc")
    extra = ["--plain-type", "string:100"] if direction == "decrypt" else []
    code, line = run(capsys, "--config", "other.json", f"{direction}-column",
                     f"{app.table}.email", "--db", app.db, "--models", app.modules["enc"],
                     "--progress", "none", *extra)  # fmt: skip
    assert code == 3
    assert "sealed under keys this keyring does not have" in line and "--config" in line
    with app.engine.connect() as conn:  # nothing changed
        t = sa.table(app.table, sa.column("email", sa.LargeBinary))
        values = [bytes(v) for (v,) in conn.execute(sa.select(t.c.email))]
    assert len(values) == len(SECRETS) and all(v[:1] == b"\x01" for v in values)


def test_half_sealed_column_is_not_sealed_twice(app, capsys):
    """A binary plaintext column into which an encrypted model wrote before the conversion."""
    t = _plain_table(app, email=sa.LargeBinary())
    mod = __import__(app.modules["enc"])
    with app.engine.begin() as conn:
        conn.execute(t.update().where(t.c.id == 0).values(
            email=bytes(mod.people.c.email.type.process_bind_param("zed@example.com", conn.dialect))
        ))  # fmt: skip
    code, line = run(capsys, "--config", "main.json", "encrypt-column", f"{app.table}.email",
                     "--db", app.db, "--models", app.modules["plain"], "--type", "binary",
                     "--progress", "none")  # fmt: skip
    assert code == 3 and "1 values sealed under this keyring and 2 that are not" in line


def test_sqlite_text_column_holding_sealed_bytes(app, capsys):
    if app.engine.dialect.name != "sqlite":
        pytest.skip("only SQLite keeps BLOBs in a TEXT column")
    _sealed_table(app, "enc")
    with app.engine.begin() as conn:  # the column's declared type becomes TEXT, values kept
        conn.exec_driver_sql(f"ALTER TABLE {app.table} RENAME COLUMN email TO email_old")
        conn.exec_driver_sql(f"ALTER TABLE {app.table} ADD COLUMN email TEXT")
        conn.exec_driver_sql(f"UPDATE {app.table} SET email = email_old")
    for argv in (["status"], ["verify"], ["rotate"]):
        code, line = run(capsys, "--config", "main.json", *argv, "--db", app.db, "--models",
                         app.modules["plain"])  # fmt: skip
        assert code == 3 and "a text type, holding 3 binary values" in line, argv
    with pytest.raises(ColumnTypeMismatch):
        status(app.engine, __import__(app.modules["plain"]).metadata)
    for direction in ("encrypt", "decrypt"):  # neither seals sealed bytes nor says "done"
        code, line = run(capsys, "--config", "main.json", f"{direction}-column",
                         f"{app.table}.email", "--db", app.db, "--type", "string:100",
                         "--plain-type", "string:100", "--progress", "none")  # fmt: skip
        assert code == 3 and "is a text column holding sealed values (3 read)" in line
