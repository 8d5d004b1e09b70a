"""Concurrent writers of one key store lose no key: processes rotating a key file at once,
threads rotating the database registry (SQLite and the PostgreSQL fixture), stale saves merged."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time

import pytest
from sealstore.errors import ConcurrentKeyChange, KeySourceError
from sealstore.keysources.file import KeyFile
from sealstore.keyring import KeyState
from sealstore.keysources.database import DatabaseKeySource
from sealstore.wrapping import MasterKeyWrapper
from sqlalchemy import create_engine

PROCESSES = 4
ROUNDS = 60  # 240 rotations racing on one file


def _rotate_many(path: str, rounds: int, start, out) -> None:
    source = KeyFile(path)
    keyring = source.load()
    start.wait()
    made = [source.rotate(keyring).key_id for _ in range(rounds)]
    out.put(made)


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_processes_rotating_one_key_file_lose_no_key(tmp_path):
    path = tmp_path / "keys.json"
    first = KeyFile(path).init().primary.key_id
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [
        ctx.Process(target=_rotate_many, args=(str(path), ROUNDS, start, out))
        for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    made = [k for _ in procs for k in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    stored = KeyFile(path).load()
    ids = {k.key_id for k in stored.keys}
    assert len(made) == PROCESSES * ROUNDS == len(set(made))
    assert ids == set(made) | {first}  # every key any process created is there
    assert sum(k.state is KeyState.PRIMARY for k in stored.keys) == 1
    assert stored.primary.key_id in made
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 + PROCESSES * ROUNDS  # one write per rotation, none overwritten
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_stale_save_merges_keys_added_by_another_writer(tmp_path):
    path = tmp_path / "keys.json"
    a, b = KeyFile(path), KeyFile(path)
    ring_a = a.init()
    ring_b = b.load()
    old = ring_a.primary.key_id
    new = a.rotate(ring_a)  # a adds a key
    staged = ring_b.new_key()  # b, stale, adds another and retires nothing
    b.save(ring_b)
    stored = {k.key_id: k.state for k in KeyFile(path).load().keys}
    assert stored == {
        old: KeyState.ACTIVE,
        new.key_id: KeyState.PRIMARY,
        staged.key_id: KeyState.ACTIVE,
    }
    assert new.key_id in ring_b and ring_b.primary.key_id == new.key_id  # b learnt a's rotation
    # a change on one side only wins: b retires the old key, a (stale) saves its unchanged view
    ring_b.retire(old)
    b.save(ring_b)
    a.save(ring_a)
    assert KeyFile(path).load(allow_retired=True).get(old).state is KeyState.RETIRED
    assert ring_a.get(old).state is KeyState.RETIRED


def test_conflicting_changes_to_one_key_are_refused_and_nothing_written(tmp_path):
    path = tmp_path / "keys.json"
    a, b = KeyFile(path), KeyFile(path)
    ring_a = a.init()
    old = a.rotate(ring_a) and ring_a.keys[0].key_id
    ring_b = b.load()
    ring_a.retire(old)
    a.save(ring_a)
    ring_b.destroy(old)  # b, stale, destroys what a retired
    before = path.read_bytes()
    with pytest.raises(ConcurrentKeyChange, match=f"key {old:08x} was changed concurrently"):
        b.save(ring_b)
    assert path.read_bytes() == before


def _registry_race(engine, wrapper, threads: int, rounds: int) -> None:
    DatabaseKeySource(engine, wrapper).init()
    made, errors = [], []
    barrier = threading.Barrier(threads)

    def work():
        try:
            source = DatabaseKeySource(engine, wrapper)
            ring = source.load()
            barrier.wait()
            for _ in range(rounds):
                made.append(source.rotate(ring).key_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    stored = DatabaseKeySource(engine, wrapper).load()
    assert set(made) <= {k.key_id for k in stored.keys}
    assert len(stored.keys) == threads * rounds + 1
    assert sum(k.state is KeyState.PRIMARY for k in stored.keys) == 1


def test_registry_concurrent_rotations_lose_no_key(sql_engine):
    """Threads, each with its own source and connection, on SQLite, PostgreSQL (and MariaDB)."""
    _registry_race(sql_engine, MasterKeyWrapper(os.urandom(32)), threads=4, rounds=15)


def _rotate_registry(url: str, master: bytes, rounds: int, start, out) -> None:
    source = DatabaseKeySource(create_engine(url), MasterKeyWrapper(master))
    ring = source.load()
    start.wait()
    out.put([source.rotate(ring).key_id for _ in range(rounds)])


def test_registry_processes_rotating_lose_no_key_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path / 'reg.db'}"
    master = os.urandom(32)
    DatabaseKeySource(url, MasterKeyWrapper(master)).init()
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_rotate_registry, args=(url, master, 20, start, out)) for _ in range(3)
    ]
    for p in procs:
        p.start()
    made = [k for _ in procs for k in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    stored = DatabaseKeySource(url, MasterKeyWrapper(master)).load()
    assert set(made) <= {k.key_id for k in stored.keys} and len(stored.keys) == 61


def _hold_sqlite_lock(path, seconds: float, started, releasing=None) -> None:
    import sqlite3

    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    started.set()
    time.sleep(seconds)
    if releasing is not None:
        releasing.set()  # before the lock goes: whoever gets it next sees this set
    con.execute("ROLLBACK")
    con.close()


def _sqlite_source(tmp_path, busy_timeout: float):
    path = tmp_path / "reg.db"
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": busy_timeout})
    source = DatabaseKeySource(engine, MasterKeyWrapper(os.urandom(32)))
    source.init()
    return path, source


def test_registry_sqlite_writer_outwaits_the_busy_timeout(tmp_path):
    """A writer held up longer than the driver's busy timeout keeps waiting (as on MySQL) instead
    of failing with 'database is locked': a loaded machine's rotations must all land."""
    path, source = _sqlite_source(tmp_path, busy_timeout=0.1)
    ring = source.load()
    started, releasing = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_sqlite_lock, args=(path, 1.0, started, releasing))
    holder.start()
    started.wait()
    new = source.rotate(ring)
    # an ordering, not a time: the rotation could only commit once the holder let go (10 times
    # the driver's busy timeout after it took the lock)
    assert releasing.is_set()
    holder.join()
    assert new.key_id in {k.key_id for k in source.load().keys}


def test_registry_sqlite_lock_held_too_long_is_a_key_source_error(tmp_path, monkeypatch):
    from sealstore.keysources import database

    monkeypatch.setattr(database, "_LOCK_WAIT", 0.5)
    path, source = _sqlite_source(tmp_path, busy_timeout=0.1)
    ring = source.load()
    before = {k.key_id for k in ring.keys}
    started = threading.Event()
    holder = threading.Thread(target=_hold_sqlite_lock, args=(path, 2.0, started))
    holder.start()
    started.wait()
    with pytest.raises(KeySourceError, match="held the lock"):
        source.rotate(ring)
    holder.join()
    assert {k.key_id for k in source.load().keys} == before  # nothing half-written
