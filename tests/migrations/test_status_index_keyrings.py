"""``sealstore status`` knows the blind indexes' keyring (``--index-config`` and the named
``index`` configuration: ``$SEALSTORE_INDEX_CONFIG`` / ``SEALSTORE_INDEX_*``), counts index
values never filled (NULL while the source is set), exits 0 only once everything is done, so
``status && keys retire`` works in an application with a BlindIndex; ``keys retire`` of an old
index key names ``reindex``.  SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import os
import sys
import uuid

import pytest
import sqlalchemy as sa
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.errors import ConfigError
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.migrations.schema import create_tables

MODELS = """
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString


class Base(DeclarativeBase):
    pass


class Person(Base):
    __tablename__ = "idx_people"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[str | None] = mapped_column(EncryptedString(100))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email"), index=True)
"""
ROWS = 40  # every 8th email NULL: 35 values
UNFILLED = 7  # rows whose index is NULLed afterwards (an index added to existing rows)


@pytest.fixture
def app(tmp_path, monkeypatch, sql_engine):
    """A project directory with two key files, a models module and 40 people."""
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    module = f"idx_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, keys in (("main.json", "keys.json"), ("index.json", "index-keys.json")):
        (tmp_path / name).write_text(
            json.dumps({"key_source": {"type": "file", "path": str(tmp_path / keys)}})
        )
    assert main(["--config", "main.json", "keys", "init"]) == 0
    assert main(["--config-name", "index", "--config", "index.json", "keys", "init"]) == 0
    models = __import__(module)
    models.Base.metadata.create_all(sql_engine)
    create_tables(sql_engine)
    from sqlalchemy.orm import Session

    main_kr = use_keyring(load_config(tmp_path / "main.json", name="default").load_keyring())
    index_kr = use_keyring(
        load_config(tmp_path / "index.json", name="index").load_keyring(), "index"
    )
    with Session(sql_engine) as s:
        s.add_all(
            [
                models.Person(id=i, email=None if i % 8 == 0 else f"person{i}@example.org")
                for i in range(ROWS)
            ]
        )
        s.commit()
    forget_keyring()
    forget_keyring("index")
    main_kr.close()
    index_kr.close()
    url = sql_engine.url.render_as_string(hide_password=False)

    class App:
        engine = sql_engine
        cols = ("--db", url, "--models", module)
        person = models.Person

    yield App
    forget_keyring()
    forget_keyring("index")
    sys.modules.pop(module, None)


def cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def index_doc(out: str) -> dict:
    (index,) = [c for c in json.loads(out)["columns"] if c["kind"] == "blind index"]
    return index


def unfill(app) -> None:
    """NULL the index of UNFILLED rows whose email is set (as ``add_column`` leaves them)."""
    ids = [i for i in range(ROWS) if i % 8][:UNFILLED]
    with app.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE idx_people SET email_index = NULL WHERE id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": ids},
        )


def test_status_needs_the_index_keyring_and_exits_0_when_all_is_done(app, capsys, monkeypatch):
    # without the index keyring status cannot tell: exit 1, naming how to give it
    code, out, err = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1
    assert "--index-config PATH or set SEALSTORE_INDEX_CONFIG" in err
    assert "unknown-keyring" in out

    # --index-config: everything is under the primaries: exit 0
    code, out, err = cli(capsys, "--config", "main.json", "status", "--index-config", "index.json",
                         "--json", *app.cols)  # fmt: skip
    assert code == 0, err
    index = index_doc(out)
    primary = load_config("index.json", name="index").load_keyring().primary.id_hex
    assert (index["primary"], index["by_key"], index["unfilled"], index["not_primary"]) == (
        primary, {primary: 35}, 0, 0,
    )  # fmt: skip
    assert index["nulls"] == 5 and index["keyring"] == "index"
    (email,) = [c for c in json.loads(out)["columns"] if c["kind"] == "encrypted"]
    assert "unfilled" not in email and email["keyring"] == "default"

    # the named configuration, from the environment, is used without --index-config
    monkeypatch.setenv("SEALSTORE_INDEX_CONFIG", "index.json")
    code, out, err = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert ["idx_people.email_index", primary, "primary", "35"] in rows


def test_unfilled_index_values_keep_status_at_1_until_reindex(app, capsys, monkeypatch):
    monkeypatch.setenv("SEALSTORE_INDEX_CONFIG", "index.json")
    unfill(app)
    code, out, err = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1
    assert f"{UNFILLED} blind-index values are NULL while their source is set" in err
    assert "run sealstore reindex" in err
    rows = [line.split() for line in out.splitlines()]
    assert ["idx_people.email_index", "NULL", "unfilled", str(UNFILLED)] in rows
    assert ["idx_people.email_index", "NULL", "-", "5"] in rows
    code, out, _ = cli(capsys, "--config", "main.json", "status", "--json", *app.cols)
    index = index_doc(out)
    assert code == 1 and (index["unfilled"], index["nulls"], index["not_primary"]) == (
        UNFILLED, 5 + UNFILLED, 0,
    )  # fmt: skip
    # lookups would miss the unfilled rows (what status warns about): they raise instead,
    # unless the caller accepts partial results
    from sqlalchemy.orm import Session

    from sealstore.errors import IndexIncomplete

    use_keyring(load_config(name="default", path="main.json").load_keyring())
    use_keyring(load_config(name="index").load_keyring(), "index")
    lookup = sa.select(app.person).where(app.person.email == "person1@example.org")
    with Session(app.engine) as s:
        with pytest.raises(IndexIncomplete, match="sealstore reindex"):
            s.scalars(lookup).all()
        partial = {"sealstore_partial_index": True}
        assert s.scalars(lookup, execution_options=partial).all() == []

    code, _, err = cli(capsys, "--config", "main.json", "reindex", "--progress", "none", *app.cols)
    assert code == 0, err
    code, out, err = cli(capsys, "--config", "main.json", "status", "--json", *app.cols)
    assert code == 0, err
    assert index_doc(out)["unfilled"] == 0 and index_doc(out)["nulls"] == 5
    use_keyring(load_config(name="default", path="main.json").load_keyring())  # the CLI
    use_keyring(load_config(name="index").load_keyring(), "index")  # forgot its own copies
    with Session(app.engine) as s:
        assert [p.id for p in s.scalars(
            sa.select(app.person).where(app.person.email == "person1@example.org")
        )] == [1]  # fmt: skip


def test_status_and_retire_an_old_index_key(app, capsys, monkeypatch):
    """The documented idiom after an index-key rotation: reindex, then status && retire."""
    monkeypatch.setenv("SEALSTORE_INDEX_CONFIG", "index.json")
    # the column keyring's variables are set too: they must not reach the index keyring
    monkeypatch.setenv("SEALSTORE_CONFIG", "main.json")
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__PATH", str(os.path.abspath("keys.json")))
    code, out, _ = cli(capsys, "--config-name", "index", "keys", "rotate", "--json")
    assert code == 0
    old, new = json.loads(out)["previous"]["id"], json.loads(out)["primary"]["id"]
    main_ids = {k["id"] for k in json.loads(cli(capsys, "keys", "list", "--json")[1])}
    assert old not in main_ids and new not in main_ids  # the index keyring rotated, not this one

    code, out, err = cli(capsys, "status", "--json", *app.cols)
    index = index_doc(out)
    assert code == 1 and (index["primary"], index["by_key"], index["not_primary"]) == (
        new, {old: 35}, 35,
    )  # fmt: skip
    assert "35 blind-index values are not under the index keyring's primary key" in err
    assert "run sealstore reindex" in err

    code, _, err = cli(capsys, "--config-name", "index", "keys", "retire", old, *app.cols)
    assert code == 1
    assert f"refusing to retire key {old}: 35 values still use it" in err
    assert "idx_people.email_index: 35 rows" in err
    assert "`sealstore reindex`" in err and "`sealstore rotate`" not in err
    code, out, _ = cli(capsys, "--config-name", "index", "keys", "retire", old, "--json", *app.cols)
    assert code == 1 and json.loads(out)["references"] == [
        {"name": "idx_people.email_index", "count": 35, "kind": "blind index"}
    ]

    code, _, err = cli(capsys, "reindex", "--progress", "none", *app.cols)
    assert code == 0, err
    # status && keys retire
    code, _, err = cli(capsys, "status", *app.cols)
    assert code == 0, err
    code, out, err = cli(capsys, "--config-name", "index", "keys", "retire", old, *app.cols)
    assert code == 0, err
    assert f"key {old} retired" in out
    states = {k["id"]: k["state"] for k in json.loads(
        cli(capsys, "--config-name", "index", "keys", "list", "--json")[1]
    )}  # fmt: skip
    assert states == {old: "retired", new: "primary"}


def test_the_column_key_source_variable_never_reaches_the_index_keyring(app, capsys, monkeypatch):
    """Issue 26 item 2: SEALSTORE_KEY_SOURCE__PATH (the column key file) used to override the
    index configuration too, so both keyrings were one."""
    keys = str(os.path.abspath("keys.json"))
    monkeypatch.setenv("SEALSTORE_CONFIG", "main.json")
    monkeypatch.setenv("SEALSTORE_KEY_SOURCE__PATH", keys)
    column = load_config().load_keyring()
    index = load_config("index.json", name="index").load_keyring()
    assert {k.key_id for k in column.keys}.isdisjoint(k.key_id for k in index.keys)
    # the unnamed call of the documents' old example refuses instead of loading keys.json
    with pytest.raises(ConfigError) as info:
        load_config("index.json")
    assert "SEALSTORE_INDEX_KEY_SOURCE__PATH" in str(info.value)
    assert "name='index'" in str(info.value)
    # the CLI too: an unnamed --config that is not $SEALSTORE_CONFIG
    code, _, err = cli(capsys, "--config", "index.json", "keys", "list")
    assert code == 1 and "SEALSTORE_INDEX_KEY_SOURCE__PATH" in err
    # --index-config pointing at the column keyring's store: refused, nothing reported as done
    code, _, err = cli(capsys, "status", "--index-config", "main.json", *app.cols)
    assert code == 1 and "shares key id(s)" in err
    column.close()
    index.close()


def test_reindex_and_status_without_or_with_a_broken_index_configuration(app, capsys, monkeypatch):
    code, _, err = cli(capsys, "--config", "main.json", "reindex", "--progress", "none", *app.cols)
    assert code == 2
    assert "no configuration for the index keyring 'index'" in err
    assert "--index-config PATH or set SEALSTORE_INDEX_CONFIG" in err
    code, out, err = cli(capsys, "--config", "main.json", "status", "--index-config", "nope.toml",
                         *app.cols)  # fmt: skip
    assert (code, out) == (1, "") and err.count("\n") == 1 and "nope.toml does not exist" in err
    monkeypatch.setenv("SEALSTORE_INDEX_SUITE", "AEGIS-128L")  # a scoped variable, no key store
    code, _, err = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1 and "configuration 'index'" in err and "names no key store" in err
    monkeypatch.setenv("SEALSTORE_INDEX_CONFIG", "index.json")
    monkeypatch.setenv("SEALSTORE_INDEX_TAG_SIZE", "20")  # a bad scoped variable: named
    code, _, err = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1 and "SEALSTORE_INDEX_TAG_SIZE: tag_size: must be 16 or 32" in err
    assert "Traceback" not in err
