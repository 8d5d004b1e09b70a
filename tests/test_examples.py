"""The applications in examples/ run: the FastAPI one through its TestClient (the lifespan
loads the keyrings from configuration files), the asyncio one on aiosqlite.  Both store only
sealed bytes and find rows through the blind index."""

from __future__ import annotations

import asyncio
import importlib.util
import sqlite3
import sys
from pathlib import Path

import pytest
import sealstore
from sealstore.config import load_config
from sealstore.keyring import forget_keyring, get_keyring
from sealstore.wrapping import MasterKeyWrapper

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def configs(tmp_path, monkeypatch):
    """Two wrapped key files (columns, blind indexes) with their configuration files."""
    tmp_path.chmod(0o700)
    monkeypatch.chdir(tmp_path)
    MasterKeyWrapper.create_file("master.key")
    paths = []
    for name in ("sealstore", "sealstore-index"):
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'[key_source]\npath = "{name}-keys.json"\n'
            '[key_source.wrapping]\ntype = "master-key"\npath = "master.key"\n'
        )
        load_config(path, env={}).key_source_object().init()
        paths.append(str(path))
    yield paths
    forget_keyring()
    forget_keyring("index")


def _stored(db: Path, table: str, column: str) -> list[bytes]:
    with sqlite3.connect(db) as conn:
        return [bytes(v) for (v,) in conn.execute(f"SELECT {column} FROM {table}")]


def test_fastapi_example(configs, tmp_path):
    from fastapi.testclient import TestClient

    app_module = _load("fastapi_app")
    db = tmp_path / "app.db"
    app = app_module.create_app(f"sqlite:///{db}", *configs)
    ada = {"name": "Ada", "ssn": "123-45-6789", "email": "ada@example.org"}
    with TestClient(app) as client:
        created = client.post("/patients", json=ada)
        assert created.status_code == 201, created.text
        pid = created.json()["id"]
        client.post("/patients", json={**ada, "name": "Alan", "email": "alan@example.org"})
        assert client.get(f"/patients/{pid}").json() == {**ada, "id": pid}
        found = client.get("/patients", params={"email": "ada@example.org"}).json()
        assert [p["name"] for p in found] == ["Ada"]
        assert client.get("/patients", params={"email": "nobody@example.org"}).json() == []
        assert client.get("/patients/999").status_code == 404
        assert get_keyring().primary is not None  # registered by the lifespan
    with pytest.raises(sealstore.errors.UnknownKeyring):
        get_keyring()  # and forgotten when the app stopped
    for column in ("ssn", "email"):
        assert not any(
            b"123-45-6789" in v or b"example.org" in v for v in _stored(db, "patients", column)
        )


def test_async_example(configs, tmp_path):
    app_module = _load("async_app")
    db = tmp_path / "notes.db"
    app_module.load_keyrings(*configs)
    bodies = asyncio.run(app_module.main(f"sqlite+aiosqlite:///{db}"))
    assert sorted(b["n"] for b in bodies) == [1, 3]
    for column in ("owner", "body"):
        assert not any(b"ada@" in v or b"notes" in v for v in _stored(db, "notes", column))
    # the same rows open synchronously, with the same keys
    from sqlalchemy import create_engine, select
    from sqlalchemy.orm import Session

    engine = create_engine(f"sqlite:///{db}")
    with Session(engine) as s:
        owners = sorted(n.owner for n in s.scalars(select(app_module.Note)))
    engine.dispose()
    assert owners == ["ada@example.org", "ada@example.org", "alan@example.org"]
