"""The rotation commands of the ``sealstore`` CLI: status, rotate (dry run, progress), verify,
reindex and ``keys retire`` (refused while referenced by rows or S3 objects, ``--force``)."""

from __future__ import annotations

import json
import re
import sys
import uuid

import pytest
import sqlalchemy as sa
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.migrations.schema import create_tables, drop_tables

MODELS = """
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString


class Base(DeclarativeBase):
    pass


class Person(Base):
    __tablename__ = "cli_people"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[str | None] = mapped_column(EncryptedString(100))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email"), index=True)
"""


@pytest.fixture
def app(tmp_path, monkeypatch, sql_engine):
    """A project directory: two key files (columns, blind index), a models module, a database."""
    import os

    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    module = f"cli_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, keys in (("main.json", "keys.json"), ("index.json", "index-keys.json")):
        (tmp_path / name).write_text(
            json.dumps({"key_source": {"type": "file", "path": str(tmp_path / keys)}})
        )
    assert main(["--config", "main.json", "keys", "init"]) == 0
    assert main(["--config", "index.json", "keys", "init"]) == 0
    url = sql_engine.url.render_as_string(hide_password=False)

    class App:
        engine = sql_engine
        models = __import__(module)
        cols = ("--db", url, "--models", module)

        @staticmethod
        def keyrings():
            """Register the current keyrings (the CLI closes the ones it loads)."""
            main_kr = use_keyring(load_config(tmp_path / "main.json").load_keyring())
            index_kr = use_keyring(load_config(tmp_path / "index.json").load_keyring(), "index")
            return main_kr, index_kr

    App.models.Base.metadata.create_all(sql_engine)
    create_tables(sql_engine)  # alembic upgrade sealstore@head
    yield App
    forget_keyring()
    forget_keyring("index")
    sys.modules.pop(module, None)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def add_people(app, n: int = 50) -> dict[int, str | None]:
    from sqlalchemy.orm import Session

    app.keyrings()
    values = {i: (None if i % 10 == 0 else f"person{i}@example.org") for i in range(n)}
    with Session(app.engine) as s:
        s.add_all([app.models.Person(id=k, email=v) for k, v in values.items()])
        s.commit()
    return values


def test_status_rotate_verify_retire(app, capsys):
    values = add_people(app)
    old = app.keyrings()[0].primary.id_hex
    code, out, _ = cli(capsys, "--config", "main.json", "keys", "rotate")
    new = re.search(r"new primary key ([0-9a-f]{8})", out).group(1)

    code, out, _ = cli(capsys, "--config", "main.json", "status", *app.cols)
    assert code == 1  # values left under the old key
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["COLUMN", "KEY", "ID", "STATE", "ROWS"]
    assert ["cli_people.email", old, "active", "45"] in rows
    assert ["cli_people.email", "NULL", "-", "5"] in rows
    assert "no running jobs" in out

    code, _, err = cli(capsys, "--config", "main.json", "keys", "retire", old, *app.cols)
    assert code == 1
    assert (
        f"refusing to retire key {old}: 45 values still use it (cli_people.email: 45 rows)" in err
    )

    code, out, _ = cli(capsys, "--config", "main.json", "rotate", "--dry-run", *app.cols)
    assert (code, out.strip()) == (
        0,
        f"cli_people.email: would re-seal 45 values ({old}: 45)",
    )

    code, out, err = cli(
        capsys,
        "--config",
        "main.json",
        "rotate",
        "--progress",
        "log",
        "--batch-size",
        "8",
        *app.cols,
    )
    assert code == 0, err
    assert re.search(
        r"cli_people\.email: job \d+ done; this worker re-sealed 45 values in 7 batches",
        out,
    )
    assert f"0 values not under {new}" in out
    assert re.search(r"rotate cli_people\.email: 45/45 rows \(100\.0%\), [\d,]+ rows/s, ETA", err)

    code, out, _ = cli(capsys, "--config", "main.json", "status", "--json", *app.cols)
    doc = json.loads(out)
    (email,) = [c for c in doc["columns"] if c["column"] == "cli_people.email"]
    assert (
        email["by_key"],
        email["nulls"],
        email["not_primary"],
        email["primary"],
    ) == ({new: 45}, 5, 0, new)

    code, out, _ = cli(capsys, "--config", "main.json", "verify", *app.cols)
    assert (code, out.strip()) == (0, "cli_people.email: 45 values checked, 0 failed")

    code, out, err = cli(capsys, "--config", "main.json", "keys", "retire", old, *app.cols)
    assert code == 0, err
    assert f"key {old} retired; checked cli_people.email, cli_people.email_index" in out
    code, out, _ = cli(capsys, "--config", "main.json", "keys", "list", "--json")
    assert {k["id"]: k["state"] for k in json.loads(out)} == {
        old: "retired",
        new: "primary",
    }

    with app.engine.begin() as conn:  # corrupt one stored value
        raw = bytes(conn.execute(sa.text("SELECT email FROM cli_people WHERE id = 3")).scalar())
        conn.execute(
            sa.text("UPDATE cli_people SET email = :v WHERE id = 3"),
            {"v": raw[:-1] + bytes([raw[-1] ^ 4])},
        )
    code, out, err = cli(capsys, "--config", "main.json", "verify", "--batch-size", "16", *app.cols)
    assert code == 1
    assert "cli_people.email: 45 values checked, 1 failed" in out
    assert f"failed: cli_people.email row 3 (key {new}): InvalidTag" in out
    for v in values.values():
        assert v is None or v not in out + err


def test_retire_force_says_what_breaks(app, capsys):
    add_people(app, 20)
    old = app.keyrings()[0].primary.id_hex
    cli(capsys, "--config", "main.json", "keys", "rotate")
    code, out, err = cli(
        capsys, "--config", "main.json", "keys", "retire", old, "--force", *app.cols
    )
    assert code == 0
    assert (
        f"--force: retiring key {old} while 18 values still use it (cli_people.email: 18 rows)"
        in err
    )
    assert "fail to open (KeyNotUsable: retired)" in err
    assert f"key {old} retired (forced)" in out
    code, _, err = cli(capsys, "--config", "main.json", "verify", *app.cols)
    assert code == 1  # exactly what --force announced


def test_retire_needs_something_to_check(app, capsys):
    old = app.keyrings()[0].primary.id_hex
    code, _, err = cli(capsys, "--config", "main.json", "keys", "retire", old)
    assert code == 2 and "nothing to check" in err
    code, _, err = cli(capsys, "--config", "main.json", "keys", "retire", "xyz", *app.cols)
    assert code == 2 and "8 hex digits" in err


def test_reindex_with_the_index_keyring(app, capsys):
    add_people(app, 30)
    _, index_kr = app.keyrings()
    old_index = index_kr.primary.id_hex
    code, out, _ = cli(capsys, "--config", "index.json", "keys", "rotate")
    new_index = re.search(r"new primary key ([0-9a-f]{8})", out).group(1)
    code, out, err = cli(capsys, "--config", "main.json", "reindex", "--index-config", "index.json",
                         "--progress", "none", *app.cols)  # fmt: skip
    assert code == 0, err
    assert re.search(
        r"cli_people\.email_index: job \d+ done; this worker re-indexed 27 values", out
    )
    code, out, _ = cli(capsys, "--config", "main.json", "status", "--json", *app.cols)
    (index,) = [c for c in json.loads(out)["columns"] if c["column"] == "cli_people.email_index"]
    assert index["by_key"] == {new_index: 27} and old_index not in index["by_key"]
    # lookups through the index work with the new key alone
    from sqlalchemy.orm import Session

    _, index_kr = app.keyrings()
    index_kr.retire(int(old_index, 16))
    with Session(app.engine) as s:
        person = s.scalars(
            sa.select(app.models.Person).where(app.models.Person.email == "person7@example.org")
        ).one()
        assert person.id == 7


def test_retire_refused_while_s3_objects_use_the_key(app, capsys, s3_endpoint, raw_s3, bucket):
    from fixtures_s3 import make_client
    from sealstore.adapters.s3 import encrypt_client
    from sealstore.migrations.rotation.retire import register_s3_prefix

    main_kr, _ = app.keyrings()
    old = main_kr.primary.id_hex
    s3 = encrypt_client(make_client(s3_endpoint), main_kr)
    s3.put_object(Bucket=bucket, Key="data/a", Body=b"sealed under the old key")
    s3.put_object(Bucket=bucket, Key="data/b", Body=b"this one too")
    raw_s3.put_object(Bucket=bucket, Key="data/plain", Body=b"not sealed")
    cli(capsys, "--config", "main.json", "keys", "rotate")
    s3_args = ["--endpoint-url", s3_endpoint, "--region", "us-east-1"]

    code, _, err = cli(
        capsys,
        "--config",
        "main.json",
        "keys",
        "retire",
        old,
        "--s3",
        f"s3://{bucket}/data",
        *s3_args,
    )
    assert code == 1
    assert f"2 values still use it (s3://{bucket}/data: 2 objects)" in err

    register_s3_prefix(app.engine, f"s3://{bucket}/data")  # registered: checked with the columns
    code, _, err = cli(capsys, "--config", "main.json", "keys", "retire", old, *app.cols, *s3_args)
    assert code == 1 and f"s3://{bucket}/data: 2 objects" in err
    raw_s3.delete_object(Bucket=bucket, Key="data/a")
    raw_s3.delete_object(Bucket=bucket, Key="data/b")
    code, out, err = cli(
        capsys, "--config", "main.json", "keys", "retire", old, *app.cols, *s3_args
    )
    assert code == 0, err
    assert f"s3://{bucket}/data" in out


def test_rotate_without_the_job_tables_says_so(app, capsys):
    drop_tables(app.engine)
    add_people(app, 5)
    cli(capsys, "--config", "main.json", "keys", "rotate")
    code, _, err = cli(capsys, "--config", "main.json", "rotate", *app.cols)
    assert code == 1
    assert (
        "sealstore_jobs/sealstore_job_batches do not exist: run `alembic upgrade sealstore@head`"
        in err
    )
