"""Rotation and an application writer updating several rows per transaction, at the same time,
on PostgreSQL and MariaDB (issue 26, item 7): rotation locks each batch's rows in ascending
primary-key order before its compare-and-swap, so an application that also locks rows in
ascending primary-key order never sees a deadlock from it; rotation never aborts (its own
deadlocks are retried) and no application write is lost.  An application that locks rows in
another order can still deadlock (with rotation as with itself): the second test counts how
often, for the record, and checks that nothing is lost either way."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation.reseal import ResealTask, rotate
from sealstore.migrations.rotation.spec import ColumnSpec
from sealstore.migrations.schema import create_tables
from sealstore.migrations.transient import is_transient

ROWS = 2000
HOT = 600  # the writers update rows among the first HOT ids: the batches they meet
PASSES = 3  # rotations, each to a new primary key, while the writers run
WRITERS = 3
PER_TXN = 4


@pytest.fixture(params=["postgresql", "mariadb"])
def engine(request):
    url = request.getfixturevalue("pg_url" if request.param == "postgresql" else "mariadb_url")
    eng = sa.create_engine(url, pool_size=WRITERS + 2)
    create_tables(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def table(engine):
    keyring = use_keyring(Keyring.generate(tag_size=32))
    meta = sa.MetaData()
    t = sa.Table(
        f"rot_app_{uuid.uuid4().hex[:8]}", meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("body", EncryptedString(200), nullable=True),
    )  # fmt: skip
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(t), [{"id": i, "body": f"SEED-{i:05d}"} for i in range(ROWS)])
    yield t
    meta.drop_all(engine)
    forget_keyring()
    keyring.close()


def _is_deadlock(exc: BaseException) -> bool:
    """PostgreSQL's SQLSTATE 40P01, MySQL/MariaDB's error 1213 (whose SQLSTATE PyMySQL sets
    too: 40001, so the error number decides)."""
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) == "40P01":
        return True
    return bool(orig.args) and orig.args[0] == 1213


def _run(engine, t, *, ordered: bool) -> dict:
    """Writers in threads while rotation runs PASSES times; what each side saw."""
    stop = threading.Event()
    committed: dict[int, str] = {}
    lock = threading.Lock()
    counts = {"txns": 0, "deadlocks": 0, "other": 0}

    def writer(n: int) -> None:
        rng = random.Random(n)
        seq = 0
        while not stop.is_set():
            ids = rng.sample(range(HOT), PER_TXN)
            ids = sorted(ids) if ordered else ids
            values = {i: f"APP-{n}-{seq}-{i}" for i in ids}
            seq += 1
            try:
                with engine.begin() as conn:
                    for i in ids:
                        conn.execute(sa.update(t).where(t.c.id == i).values(body=values[i]))
                        time.sleep(0.0005)  # an application does some work between its writes
            except sa.exc.DBAPIError as exc:
                with lock:
                    counts["deadlocks" if _is_deadlock(exc) else "other"] += 1
                    if not _is_deadlock(exc) and not is_transient(exc):
                        raise
                continue
            with lock:
                counts["txns"] += 1
                committed.update(values)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for th in threads:
        th.start()
    results = []
    try:
        time.sleep(0.2)
        keyring = ColumnSpec.from_column(t.c.body).get_keyring()
        for _ in range(PASSES):
            keyring.rotate()
            results += rotate(engine, t, batch_size=200)  # raises if rotation aborts
    finally:
        stop.set()
        for th in threads:
            th.join()
    return {"counts": counts, "committed": committed, "results": results, "keyring": keyring}


def _check_nothing_lost(engine, t, run) -> None:
    with engine.connect() as conn:
        rows = dict(conn.execute(sa.select(t.c.id, t.c.body)).all())
    for i in range(ROWS):
        assert rows[i] == run["committed"].get(i, f"SEED-{i:05d}"), i
    # the writers stopped: one more pass leaves nothing behind
    rotate(engine, t, batch_size=200)
    with engine.connect() as conn:
        assert ResealTask(ColumnSpec.from_column(t.c.body)).count_stale(conn) == 0


def test_app_locking_in_primary_key_order_never_deadlocks_with_rotation(engine, table):
    run = _run(engine, table, ordered=True)
    assert all(r.status == "done" for r in run["results"])
    assert run["counts"]["txns"] > 0
    assert run["counts"]["deadlocks"] == 0, run["counts"]
    _check_nothing_lost(engine, table, run)


def test_app_locking_in_random_order_loses_nothing(engine, table, capsys):
    run = _run(engine, table, ordered=False)
    assert all(r.status == "done" for r in run["results"])
    _check_nothing_lost(engine, table, run)
    with capsys.disabled():  # the figure docs/ROTATION.md quotes
        c = run["counts"]
        print(f"\n{engine.dialect.name}: random-order writer: {c['deadlocks']} deadlocks in "
              f"{c['txns'] + c['deadlocks'] + c['other']} transactions, {c['other']} other "
              "transient errors")  # fmt: skip
