"""encrypt_column / decrypt_column beside a live writer process (an old application server that
keeps inserting and updating the plaintext column): every committed insert and update is in
the converted column afterwards, on SQLite, PostgreSQL and MariaDB; the triggers are gone; and
after encrypt_column the database refuses a plaintext write into the encrypted column where it
supports CHECK constraints."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.alembic import inplace

from sealstore.migrations.alembic import ops

ROWS = 4000

WRITER = r"""
import json, os, random, sys, time
import sqlalchemy as sa
url, stop, ready, out, rows, keys_path = sys.argv[1:7]
rows = int(rows)
engine = sa.create_engine(url, connect_args={"timeout": 30} if url.startswith("sqlite") else {})
kind = sa.String(40)
if keys_path != "-":  # a new application server: it seals what it writes
    from sealstore.adapters.sqlalchemy import EncryptedString
    from sealstore.keyring import Key, Keyring, use_keyring
    keys = [Key(k["id"], k["suite"], bytes.fromhex(k["material"]), state=k["state"])
            for k in json.load(open(keys_path))]
    use_keyring(Keyring(keys, tag_size=32))
    kind = EncryptedString(40)
t = sa.Table("live_users", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True,
             autoincrement=False), sa.Column("ssn", kind))
rnd = random.Random(7)
committed, errors, n = {}, [], 0
open(ready, "w").close()
sqlite = engine.dialect.name == "sqlite"
while True:
    n += 1
    if rnd.random() < 0.4:
        pk, value = rows + n + (100000 if keys_path != "-" else 0), f"ins-{n}"
        stmt = sa.insert(t).values(id=pk, ssn=value)
    else:
        pk = rnd.randrange(rows if rnd.random() < 0.5 else rows // 8)  # early rows: converted first
        value = f"upd-{n}"
        stmt = sa.update(t).where(t.c.id == pk).values(ssn=value)
    try:
        with engine.connect() as conn:
            if sqlite:  # take the lock first, then look for the stop file under it
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            if os.path.exists(stop):
                conn.rollback()
                break
            conn.execute(stmt)
            conn.commit()
        committed[pk] = value
    except sa.exc.DBAPIError as exc:
        if os.path.exists(stop):
            break  # the column was swapped under us: the write was refused, not committed
        errors.append(type(exc.orig).__name__)
        time.sleep(0.01)
    time.sleep(0.01 if sqlite else 0.001)  # SQLite: leave the converter gaps to take the lock
engine.dispose()
json.dump({"committed": committed, "errors": errors, "n": n}, open(out, "w"))
"""


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate(tag_size=32))
    yield kr
    forget_keyring()


def _triggers(engine) -> list:
    q = {
        "sqlite": "SELECT name FROM sqlite_master WHERE type = 'trigger'",
        "postgresql": "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal",
        "mysql": "SELECT trigger_name FROM information_schema.triggers "
        "WHERE trigger_schema = DATABASE()",
    }[engine.dialect.name]
    with engine.connect() as conn:
        return [r[0] for r in conn.exec_driver_sql(q)]


def _convert(engine, direction: str, monkeypatch, stop):
    """Run the operation; the stop file appears once the final pass holds the writers' lock."""
    real = inplace.lock_writers

    def lock_then_stop(conn, *args):
        real(conn, *args)
        stop.touch()

    monkeypatch.setattr(inplace, "lock_writers", lock_then_stop)
    batches = []
    real_committed = ops._committed
    monkeypatch.setattr(ops, "_committed", lambda *a: (batches.append(1), real_committed(*a))[1])
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"transaction_per_migration": True})
        op = Operations(ctx)
        with ctx.begin_transaction(_per_migration=True):  # as Alembic runs one migration
            if direction == "encrypt":
                op.encrypt_column("live_users", "ssn", EncryptedString(40), batch_size=50)
            else:
                op.decrypt_column("live_users", "ssn", EncryptedString(40),
                                  plain_type=sa.String(40), batch_size=50)  # fmt: skip
    monkeypatch.setattr(inplace, "lock_writers", real)
    assert batches  # the batches committed one by one (the writer was not locked out)


def _run_beside_writer(engine, keyring, tmp_path, monkeypatch, direction, tag):
    url = engine.url.render_as_string(hide_password=False)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    stop, ready, out = (tmp_path / f"{tag}-{n}" for n in ("stop", "ready", "out"))
    keys = "-"
    if direction == "decrypt":
        keys = tmp_path / "keys.json"
        keys.write_text(json.dumps([
            {"id": k.key_id, "suite": str(k.suite), "state": k.state.value,
             "material": k.reveal_material().hex()} for k in keyring.keys
        ]))  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(script), url, str(stop), str(ready), str(out),
                             str(ROWS), str(keys)])  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        _convert(engine, direction, monkeypatch, stop)
    finally:
        stop.touch()
        proc.wait(120)
    return json.loads(out.read_text())


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql", "mariadb"], indirect=True)
def test_no_committed_write_is_lost_either_way(sql_engine, keyring, tmp_path, monkeypatch):
    plain = sa.Table("live_users", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True,
                     autoincrement=False), sa.Column("ssn", sa.String(40)))  # fmt: skip
    sealed = sa.Table("live_users", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True,
                      autoincrement=False), sa.Column("ssn", EncryptedString(40)))  # fmt: skip
    plain.create(sql_engine)
    expected = {i: f"SECRET-{i:04d}" for i in range(ROWS)}
    with sql_engine.begin() as conn:
        conn.execute(sa.insert(plain), [{"id": k, "ssn": v} for k, v in expected.items()])

    report = _run_beside_writer(sql_engine, keyring, tmp_path, monkeypatch, "encrypt", "enc")
    expected.update({int(k): v for k, v in report["committed"].items()})
    inserted = sum(1 for k in report["committed"] if int(k) >= ROWS)
    assert inserted and len(report["committed"]) > inserted  # inserts and updates happened
    assert not report["errors"]
    with sql_engine.connect() as conn:
        assert dict(conn.execute(sa.select(sealed.c.id, sealed.c.ssn)).all()) == expected
    assert _triggers(sql_engine) == []

    if sql_engine.dialect.name != "sqlite":  # the header CHECK refuses plaintext
        with pytest.raises(sa.exc.DBAPIError), sql_engine.begin() as conn:
            conn.execute(sa.text("UPDATE live_users SET ssn = :v WHERE id = 1"),
                         {"v": b"SECRET-PLAINTEXT-WRITTEN-BY-AN-OLD-SERVER"})  # fmt: skip

    report = _run_beside_writer(sql_engine, keyring, tmp_path, monkeypatch, "decrypt", "dec")
    expected.update({int(k): v for k, v in report["committed"].items()})
    assert len(report["committed"]) > sum(1 for k in report["committed"] if int(k) >= ROWS) > 0
    assert not report["errors"]
    with sql_engine.connect() as conn:
        assert dict(conn.execute(sa.select(plain.c.id, plain.c.ssn)).all()) == expected
    assert _triggers(sql_engine) == []
