"""The rotation commands' scripting surface: ``status`` exits 1 while values remain under old
keys, and ``--json`` prints exactly one JSON document on stdout (progress, warnings and
refusals on stderr) with no key material, plaintext or stored bytes in it."""

from __future__ import annotations

import base64
import json
import sys
import uuid

import pytest
import sqlalchemy as sa
from cli_runner import key_file_project
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.migrations.schema import create_tables

MODELS = """
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString
metadata = sa.MetaData()
people = sa.Table("json_people", metadata, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("email", EncryptedString(60)))
"""
PLAINTEXTS = [f"person-{i}@example.org" for i in range(30)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    config = key_file_project(tmp_path, monkeypatch)
    module = f"json_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(MODELS)
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = sa.create_engine(url)
    models = __import__(module)
    models.metadata.create_all(engine)
    create_tables(engine)
    kr = use_keyring(load_config(config).load_keyring())
    with engine.begin() as conn:
        conn.execute(
            sa.insert(models.people), [{"id": i, "email": v} for i, v in enumerate(PLAINTEXTS)]
        )
    forget_keyring()
    kr.close()
    yield tmp_path, ["--db", url, "--models", module], engine
    engine.dispose()
    sys.modules.pop(module, None)


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config", "c.json", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def secrets(tmp_path, engine) -> list[str]:
    """Every form of key material and of stored or plain values that must never be printed."""
    out = list(PLAINTEXTS)
    for k in json.loads((tmp_path / "keys.json").read_text())["keys"]:
        raw = base64.b64decode(k["material"])
        out += [k["material"], raw.hex(), raw.hex().upper(), repr(raw)[2:-1]]
    with engine.connect() as conn:
        for (value,) in conn.exec_driver_sql("SELECT email FROM json_people"):
            stored = bytes(value)
            out += [base64.b64encode(stored).decode(), stored.hex(), stored[7:23].hex()]
    return out


def assert_clean(text: str, forbidden: list[str]) -> None:
    for secret in forbidden:
        assert secret not in text


def test_status_exits_1_while_values_are_under_an_old_key(project, capsys):
    tmp_path, cols, engine = project
    assert run(capsys, "status", *cols)[0] == 0  # every value under the primary
    code, out, _ = run(capsys, "status", "--json", *cols)
    assert code == 0 and json.loads(out)["columns"][0]["not_primary"] == 0

    assert run(capsys, "keys", "rotate")[0] == 0
    code, out, err = run(capsys, "status", *cols)
    assert code == 1
    assert "json_people.email" in out and "30 values are not under their primary key" in err
    code, out, err = run(capsys, "status", "--json", *cols)
    assert code == 1 and json.loads(out)["columns"][0]["not_primary"] == 30
    assert "not under their primary key" in err  # the note is on stderr, stdout is the JSON

    assert run(capsys, "rotate", "--progress", "none", *cols)[0] == 0
    assert run(capsys, "status", *cols)[0] == 0
    assert run(capsys, "status", "--json", *cols)[0] == 0


def test_status_counts_retired_keys_and_malformed_values_as_left(project, capsys):
    tmp_path, cols, engine = project
    old = json.loads(run(capsys, "keys", "rotate", "--json")[1])["previous"]["id"]
    with engine.begin() as conn:  # one value too short to hold a key id
        conn.exec_driver_sql("UPDATE json_people SET email = x'01' WHERE id = 0")
    code, out, _ = run(capsys, "status", "--json", *cols)
    (col,) = json.loads(out)["columns"]
    assert code == 1 and col["by_key"] == {old: 29, "-": 1}
    assert run(capsys, "rotate", "--progress", "none", *cols)[0] == 1  # the short value fails
    code, out, _ = run(capsys, "status", "--json", *cols)
    assert code == 1 and json.loads(out)["columns"][0]["not_primary"] == 1


def test_every_json_output_is_one_document_without_secrets(project, capsys):
    tmp_path, cols, engine = project
    before = secrets(tmp_path, engine)
    code, out, err = run(capsys, "keys", "rotate", "--json")
    doc = json.loads(out)
    old, new = doc["previous"]["id"], doc["primary"]["id"]
    assert code == 0 and doc["previous"]["state"] == "active" and old != new

    code, out, err = run(capsys, "rotate", "--json", "--progress", "log", "--batch-size", "7",
                         *cols)  # fmt: skip
    (col,) = json.loads(out)
    assert code == 0 and (col["column"], col["rewritten"], col["remaining"]) == (
        "json_people.email", 30, 0,
    )  # fmt: skip
    assert err == ""  # --json turns the progress off
    code, out, _ = run(capsys, "status", "--json", *cols)
    assert code == 0 and json.loads(out)["columns"][0]["by_key"] == {new: 30}
    code, out, _ = run(capsys, "verify", "--json", *cols)
    assert code == 0 and json.loads(out) == [
        {"column": "json_people.email", "checked": 30, "failed": 0, "failures": []}
    ]
    code, out, _ = run(capsys, "keys", "retire", old, "--json", *cols)
    doc = json.loads(out)
    assert code == 0 and (doc["key_id"], doc["done"], doc["state"], doc["references"]) == (
        old, True, "retired", [],
    )  # fmt: skip
    assert doc["checked"] == ["json_people.email"]
    code, out, _ = run(capsys, "db", "init", "--json", *cols[:2])
    assert code == 0 and json.loads(out)["tables"] == "ready"
    code, out, _ = run(capsys, "keys", "list", "--json")
    assert code == 0 and {r["id"]: r["state"] for r in json.loads(out)} == {
        old: "retired", new: "primary",
    }  # fmt: skip
    printed = capsys.readouterr()
    assert_clean(printed.out + printed.err, before + secrets(tmp_path, engine))


def test_refused_retire_is_a_json_document_too(project, capsys):
    tmp_path, cols, engine = project
    old = json.loads(run(capsys, "keys", "rotate", "--json")[1])["previous"]["id"]
    code, out, err = run(capsys, "keys", "destroy", old, "--json", *cols)
    doc = json.loads(out)
    assert code == 1 and "refusing to destroy" in err
    assert (doc["done"], doc["state"], doc["references"]) == (
        False, "active", [{"name": "json_people.email", "count": 30, "kind": "encrypted"}],
    )  # fmt: skip
    assert_clean(out + err, secrets(tmp_path, engine))


def test_encrypt_column_json(tmp_path, monkeypatch, capsys):
    key_file_project(tmp_path, monkeypatch)
    url = f"sqlite:///{tmp_path / 'conv.db'}"
    engine = sa.create_engine(url)
    plain = sa.Table("conv", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("ssn", sa.String(20)))  # fmt: skip
    plain.create(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(plain), [{"id": i, "ssn": f"SSN-{i}"} for i in range(12)])
    argv = ["encrypt-column", "conv.ssn", "--db", url, "--type", "string:20", "--json"]
    code, out, err = run(capsys, *argv)
    doc = json.loads(out)
    assert code == 0 and "sealstore cannot clean" in doc.pop("medium")  # docs/MEDIUM.md
    assert doc == {"column": "conv.ssn", "operation": "encrypt-column",
                   "values": 12, "already_done": False}  # fmt: skip
    assert "SSN-" not in err
    code, out, _ = run(capsys, *argv)
    assert code == 0 and json.loads(out)["already_done"] is True
    assert "SSN-" not in out
    engine.dispose()
