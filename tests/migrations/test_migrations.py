"""sealstore.migrations: the shipped Alembic revisions, and encrypt/decrypt_column operations,
on SQLite and PostgreSQL, through a real Alembic environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic_project import REWRITER_ENV_PY, alembic_project, encrypt_users_ssn
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.format import HEADER_SIZE, KEY_ID_OFFSET, column_context
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations import schema

USERS_REV = '''
"""users table"""
import sqlalchemy as sa
from alembic import op

revision = "app_0001"
down_revision = None
branch_labels = ("app",)
depends_on = "sealstore"


def upgrade():
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("ssn", sa.String(11), nullable=True),
    )


def downgrade():
    op.drop_table("users")
'''

ENCRYPT_REV = encrypt_users_ssn(up=", batch_size=7", down=", batch_size=7")


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate())
    yield kr
    forget_keyring()


@pytest.fixture
def alembic_env(tmp_path, sql_engine):
    """(Config, engine): a user's Alembic environment whose version_locations include
    sealstore's revisions by package resource, on SQLite or PostgreSQL."""
    with alembic_project(tmp_path, sql_engine, REWRITER_ENV_PY) as (cfg, versions):
        yield cfg, sql_engine, versions


def tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_shipped_revisions_upgrade_and_downgrade(alembic_env):
    cfg, engine, _ = alembic_env
    command.upgrade(cfg, "sealstore@head")
    ours = {
        "sealstore_keys",
        "sealstore_jobs",
        "sealstore_job_batches",
        "sealstore_object_prefixes",
    }
    assert ours <= tables(engine)
    with engine.connect() as conn:  # the revisions create exactly the tables the code defines
        diffs = compare_metadata(MigrationContext.configure(conn), schema.metadata)
    assert diffs == []
    command.downgrade(cfg, "sealstore@-3")
    assert tables(engine) & ours == {"sealstore_keys"}
    command.downgrade(cfg, "sealstore@base")
    assert not ours & tables(engine)
    command.upgrade(cfg, "heads")
    assert "sealstore_job_batches" in tables(engine)
    command.downgrade(cfg, "base")


def test_registry_table_is_the_key_source_table():
    """The revision mirrors sealstore.keysources.database; the schema module re-exports that definition."""
    from sealstore.keysources.database import sealstore_keys

    mirrored = schema.metadata.tables["sealstore_keys"]
    assert [(c.name, type(c.type), c.nullable, c.primary_key) for c in mirrored.columns] == [
        (c.name, type(c.type), c.nullable, c.primary_key) for c in sealstore_keys.columns
    ]


def _insert_users(engine, n: int) -> dict[int, str | None]:
    values = {i: (None if i % 5 == 0 else f"{i:03d}-45-{i:04d}") for i in range(1, n + 1)}
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO users (id, ssn) VALUES (:id, :ssn)"),
            [{"id": k, "ssn": v} for k, v in values.items()],
        )
    return values


def _raw(engine) -> dict[int, object]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT id, ssn FROM users")).all())


def test_encrypt_column_in_place_and_back(alembic_env, keyring):
    cfg, engine, versions = alembic_env
    (versions / "app_0001.py").write_text(USERS_REV)
    (versions / "app_0002.py").write_text(ENCRYPT_REV)
    command.upgrade(cfg, "app_0001")
    assert "sealstore_keys" in tables(engine)  # depends_on pulled the sealstore branch in
    values = _insert_users(engine, 40)

    command.upgrade(cfg, "app@head")
    cols = {c["name"]: c for c in sa.inspect(engine).get_columns("users")}
    assert set(cols) == {"id", "ssn"}
    assert isinstance(cols["ssn"]["type"], (sa.LargeBinary, sa.VARBINARY))  # MariaDB: VARBINARY(n)
    raw = _raw(engine)
    ctx = column_context("users", "ssn")
    for pk, plain in values.items():
        if plain is None:
            assert raw[pk] is None
            continue
        sealed = bytes(raw[pk])
        assert plain.encode() not in sealed
        assert sealed[KEY_ID_OFFSET : KEY_ID_OFFSET + 4] == keyring.primary.key_id.to_bytes(
            4, "big"
        )
        assert keyring.open(sealed, ctx) == plain.encode()  # sealed once, for users.ssn
    # the application's model reads the converted column
    users = sa.Table("users", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("ssn", EncryptedString(11)))  # fmt: skip
    with engine.connect() as conn:
        assert dict(conn.execute(sa.select(users.c.id, users.c.ssn)).all()) == values

    command.downgrade(cfg, "app_0001")
    cols = {c["name"]: c for c in sa.inspect(engine).get_columns("users")}
    assert set(cols) == {"id", "ssn"} and isinstance(cols["ssn"]["type"], sa.String)
    assert _raw(engine) == values
    command.downgrade(cfg, "base")


def test_encrypt_column_resumes_after_interruption(alembic_env, keyring, monkeypatch):
    cfg, engine, versions = alembic_env
    (versions / "app_0001.py").write_text(USERS_REV)
    (versions / "app_0002.py").write_text(ENCRYPT_REV)
    command.upgrade(cfg, "app_0001")
    values = _insert_users(engine, 50)

    calls = {"n": 0}
    real = Keyring.seal_many

    def failing(self, plaintexts, context=b""):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("interrupted mid-migration")
        return real(self, plaintexts, context)

    monkeypatch.setattr(Keyring, "seal_many", failing)
    with pytest.raises(KeyboardInterrupt):
        command.upgrade(cfg, "app@head")
    monkeypatch.setattr(Keyring, "seal_many", real)
    cols = {c["name"] for c in sa.inspect(engine).get_columns("users")}
    assert cols == {
        "id",
        "ssn",
        "_ss_ssn",
    }  # the shadow column and two batches survived
    with engine.connect() as conn:
        done = conn.execute(
            sa.text("SELECT count(*) FROM users WHERE _ss_ssn IS NOT NULL")
        ).scalar()
    assert done == 14  # two committed batches of 7
    with engine.connect() as conn:
        kept = dict(
            conn.execute(sa.text("SELECT id, _ss_ssn FROM users WHERE _ss_ssn IS NOT NULL")).all()
        )

    command.upgrade(cfg, "app@head")  # the same migration again: resumes
    raw = _raw(engine)
    ctx = column_context("users", "ssn")
    for pk, plain in values.items():
        if plain is None:
            assert raw[pk] is None
        else:
            assert keyring.open(bytes(raw[pk]), ctx) == plain.encode()
    for (
        pk,
        sealed,
    ) in kept.items():  # values converted before the interruption were kept
        assert bytes(raw[pk]) == bytes(sealed)
    command.downgrade(cfg, "base")


def test_encrypt_column_refuses_a_suite_the_column_is_not_sized_for(alembic_env):
    """A keyring sealing with AEGIS-256 and 32-byte tags (71 bytes of overhead) meets a column
    sized for the default 55: ValueTooLong before the first batch is written; the plaintext
    column is untouched and, with 16-byte tags, the same migration completes."""
    from sealstore.errors import ValueTooLong

    cfg, engine, versions = alembic_env
    (versions / "app_0001.py").write_text(USERS_REV)
    (versions / "app_0002.py").write_text(ENCRYPT_REV)
    command.upgrade(cfg, "app_0001")
    values = _insert_users(engine, 20)
    use_keyring(Keyring.generate("AEGIS-256X4", tag_size=32))
    try:
        with pytest.raises(ValueTooLong, match=r"users\.ssn is sized for 55 bytes"):
            command.upgrade(cfg, "app@head")
        with engine.connect() as conn:
            plain = dict(conn.execute(sa.text("SELECT id, ssn FROM users")).all())
        assert plain == values
        ring = use_keyring(Keyring.generate("AEGIS-256X4", tag_size=16))
        command.upgrade(cfg, "app@head")
        raw = _raw(engine)
        ctx = column_context("users", "ssn")
        for pk, v in values.items():
            if v is not None:
                assert bytes(raw[pk])[1] == 0x04 and ring.open(bytes(raw[pk]), ctx) == v.encode()
        command.downgrade(cfg, "base")
    finally:
        forget_keyring()


def test_decrypt_column_stops_at_a_value_that_does_not_decode(alembic_env, keyring):
    """A stored value that opens but is not UTF-8 stops decrypt_column with UndecodableValue
    (no plaintext in it); the encrypted column is untouched, and once the value is mended the
    same downgrade completes."""
    from sealstore.errors import UndecodableValue

    cfg, engine, versions = alembic_env
    (versions / "app_0001.py").write_text(USERS_REV)
    (versions / "app_0002.py").write_text(ENCRYPT_REV)
    command.upgrade(cfg, "app_0001")
    values = _insert_users(engine, 30)
    command.upgrade(cfg, "app@head")
    ctx = column_context("users", "ssn")
    bad = keyring.seal(b"\xff\xfe secret bytes", ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE users SET ssn = :v WHERE id = 17"), {"v": bad})
    with pytest.raises(UndecodableValue) as caught:
        command.downgrade(cfg, "app_0001")
    assert "secret" not in str(caught.value)
    raw = _raw(engine)
    assert bytes(raw[17]) == bad
    for pk, plain in values.items():
        if pk != 17 and plain is not None:
            assert keyring.open(bytes(raw[pk]), ctx) == plain.encode()
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE users SET ssn = :v WHERE id = 17"), {"v": keyring.seal(b"mended", ctx)}
        )
    command.downgrade(cfg, "app_0001")
    assert _raw(engine) == values | {17: "mended"}
    command.downgrade(cfg, "base")


def test_autogenerate_writes_encrypt_and_decrypt_ops(alembic_env, keyring):
    cfg, engine, versions = alembic_env
    (versions / "app_0001.py").write_text(USERS_REV)
    command.upgrade(cfg, "heads")
    values = _insert_users(engine, 12)

    target = sa.MetaData()
    sa.Table("users", target, sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("ssn", EncryptedString(11), nullable=True))  # fmt: skip
    for t in schema.metadata.tables.values():
        t.to_metadata(target)
    cfg.attributes["target_metadata"] = target
    script = command.revision(
        cfg, "encrypt ssn", autogenerate=True, head="app@head", rev_id="app_0002"
    )
    text = Path(script.path).read_text()
    upgrade = text.split("def upgrade")[1].split("def downgrade")[0]
    downgrade = text.split("def downgrade")[1]
    assert (
        "op.encrypt_column('users', 'ssn', sealstore.adapters.sqlalchemy.EncryptedString(11)"
        in upgrade
    )
    assert (
        "op.decrypt_column('users', 'ssn', sealstore.adapters.sqlalchemy.EncryptedString(11)"
        in downgrade
    )
    assert re.search(r"plain_type=(sa|mysql)\.VARCHAR\(length=11\)\)", downgrade)
    assert "alter_column" not in text
    assert "import sealstore.adapters.sqlalchemy" in text

    command.upgrade(cfg, "app@head")  # the generated file runs
    raw = _raw(engine)
    assert all(
        (v is None and raw[k] is None)
        or keyring.open(bytes(raw[k]), column_context("users", "ssn")) == v.encode()
        for k, v in values.items()
    )
    command.downgrade(cfg, "app_0001")
    assert _raw(engine) == values
    command.downgrade(cfg, "base")


def test_sealed_header_size_is_what_status_reads():
    """The SQL key-id offset the tools use is the format's (header bytes 2..5)."""
    assert KEY_ID_OFFSET == 2 and HEADER_SIZE == 7
