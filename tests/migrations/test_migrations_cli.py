"""``sealstore encrypt-column`` / ``decrypt-column``: the in-place conversions from the CLI,
with progress, resumable, and a second run that finds nothing to do (never sealing twice)."""

from __future__ import annotations

import sys
import uuid

import pytest
import sqlalchemy as sa
from cli_runner import key_file_project
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.migrations.alembic import ops

MODELS = """
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString
metadata = sa.MetaData()
users = sa.Table("cli_conv", metadata, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("ssn", EncryptedString(20)))
"""


@pytest.fixture
def project(tmp_path, monkeypatch, sql_engine):
    key_file_project(tmp_path, monkeypatch)
    module = f"conv_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(MODELS)
    plain = sa.Table("cli_conv", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True,
                     autoincrement=False), sa.Column("ssn", sa.String(20)))  # fmt: skip
    plain.create(sql_engine)
    values = {i: (None if i % 9 == 0 else f"SECRET-{i:04d}") for i in range(1, 121)}
    with sql_engine.begin() as conn:
        conn.execute(sa.insert(plain), [{"id": k, "ssn": v} for k, v in values.items()])
    url = sql_engine.url.render_as_string(hide_password=False)
    yield tmp_path, module, url, values
    sys.modules.pop(module, None)


def read(engine, tmp_path, module):
    kr = use_keyring(load_config(tmp_path / "c.json").load_keyring())
    try:
        table = sys.modules[module].users
        with engine.connect() as conn:
            return dict(conn.execute(sa.select(table.c.id, table.c.ssn)).all())
    finally:
        forget_keyring()
        kr.close()


def test_encrypt_then_decrypt_column_from_the_cli(project, sql_engine, capsys, monkeypatch):
    tmp_path, module, url, values = project
    calls = []
    real = ops._Converter._pass
    monkeypatch.setattr(
        ops._Converter, "_pass", lambda self, *a, **k: (calls.append(1), real(self, *a, **k))[1]
    )
    argv = ["--config", "c.json", "encrypt-column", "cli_conv.ssn", "--db", url,
            "--models", module, "--batch-size", "25", "--progress", "log"]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "cli_conv.ssn: encrypted (107 values)" in out and "encrypt cli_conv.ssn" in err
    assert "SECRET" not in out + err
    assert read(sql_engine, tmp_path, module) == values
    before = len(calls)
    assert main(argv) == 0  # run again: already done, nothing sealed twice
    out, _ = capsys.readouterr()
    assert "already encrypted" in out and len(calls) == before
    assert read(sql_engine, tmp_path, module) == values

    argv = ["--config", "c.json", "decrypt-column", "cli_conv.ssn", "--db", url,
            "--models", module, "--plain-type", "string:20", "--progress", "none"]  # fmt: skip
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "cli_conv.ssn: decrypted (107 values)" in out
    with sql_engine.connect() as conn:
        assert dict(conn.exec_driver_sql("SELECT id, ssn FROM cli_conv").all()) == values
    assert main(argv) == 0
    assert "already decrypted" in capsys.readouterr()[0]


def test_an_interrupted_encrypt_column_resumes(project, sql_engine, capsys, monkeypatch):
    tmp_path, module, url, values = project
    argv = ["--config", "c.json", "encrypt-column", "cli_conv.ssn", "--db", url,
            "--models", module, "--batch-size", "10", "--progress", "none"]  # fmt: skip
    real, seen = ops._seal_rows, []

    def dies_at_the_fourth_batch(bound, items):
        seen.append(len(items))
        if len(seen) == 4:
            raise KeyboardInterrupt
        return real(bound, items)

    monkeypatch.setattr(ops, "_seal_rows", dies_at_the_fourth_batch)
    assert main(argv) == 130  # Ctrl-C: one line, exit 130 (sealstore.cli.EXIT_STATUSES)
    assert capsys.readouterr().err.endswith("sealstore: interrupted\n")
    with sql_engine.connect() as conn:
        done = conn.exec_driver_sql(
            "SELECT count(*) FROM cli_conv WHERE _ss_ssn IS NOT NULL"
        ).scalar()
    assert done == 30
    monkeypatch.setattr(ops, "_seal_rows", real)
    assert main(argv) == 0
    assert read(sql_engine, tmp_path, module) == values


def test_bad_conversion_arguments(project, capsys):
    _, module, url, _ = project
    for argv, says in (
        (["encrypt-column", "nodot", "--db", url, "--type", "string:20"], "expected TABLE.COLUMN"),
        (["encrypt-column", "cli_conv.ssn", "--db", url], "name the encrypted type"),
        (["encrypt-column", "cli_conv.ssn", "--db", url, "--type", "string"], "expected string:N"),
        (["decrypt-column", "cli_conv.ssn", "--db", url, "--type", "text"], "needs --plain-type"),
        (["encrypt-column", "cli_conv.nope", "--db", url, "--type", "text"], "has no column nope"),
        (
            ["encrypt-column", "cli_conv.ssn", "--db", url, "--type", "text", "--batch-size", "0"],
            "--batch-size must be at least 1",
        ),
    ):
        assert main(["--config", "c.json", *argv]) == 2
        err = capsys.readouterr()[1]
        assert err.startswith("sealstore: error: ") and says in err and "Traceback" not in err
