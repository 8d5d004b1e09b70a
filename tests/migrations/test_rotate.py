"""Online rotation (sealstore.migrations.rotation.reseal) on SQLite and PostgreSQL: every value ends under
the primary key, concurrent writers are never overwritten, a worker killed with SIGKILL at
any point is resumed from the checkpoint, and parallel workers on PostgreSQL share the work
without doing any of it twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedBinary, EncryptedString
from sealstore.errors import InvalidTag
from sealstore.format import KEY_ID_OFFSET, column_context
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation import jobs as jobs_mod
from sealstore.migrations.rotation.status import Reference, references, status
from sealstore.migrations.rotation.reseal import rotate
from sealstore.migrations.schema import (
    create_tables,
    drop_tables,
    sealstore_job_batches,
)
from sealstore.migrations.rotation.spec import ColumnSpec
from sealstore.migrations.rotation.verify import verify

metadata = sa.MetaData()
secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("body", EncryptedString(200), nullable=True),
)
pairs = sa.Table(  # composite key, row-bound values
    "pairs",
    metadata,
    sa.Column("tenant", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("payload", EncryptedBinary(bind_row=True), nullable=True),
)
raw_secrets = sa.Table(
    "secrets",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("body", sa.LargeBinary),
)
SECRETS_CTX = column_context("secrets", "body")


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate(tag_size=32))
    yield kr
    forget_keyring()


@pytest.fixture
def db(sql_engine):
    """An engine with the sealstore tables and the test tables."""
    create_tables(sql_engine)
    metadata.create_all(sql_engine)
    yield sql_engine
    metadata.drop_all(sql_engine)
    drop_tables(sql_engine)


def fill(engine, keyring, n: int, *, start: int = 0, null_every: int = 10) -> dict[int, str | None]:
    values = {}
    for i in range(start, start + n):
        values[i] = None if i % null_every == 0 else f"value {i} " + "x" * (i % 50)
    with engine.begin() as conn:
        conn.execute(sa.insert(secrets), [{"id": k, "body": v} for k, v in values.items()])
    return values


def key_ids(engine) -> dict[int, int | None]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(raw_secrets.c.id, raw_secrets.c.body)).all()
    return {
        pk: None
        if v is None
        else int.from_bytes(bytes(v)[KEY_ID_OFFSET : KEY_ID_OFFSET + 4], "big")
        for pk, v in rows
    }


def read_all(engine) -> dict[int, str | None]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(secrets.c.id, secrets.c.body)).all())


def spec_of(table=secrets, column="body") -> ColumnSpec:
    return ColumnSpec.from_column(table.c[column])


# ---- one worker ------------------------------------------------------------------------------


def test_rotation_moves_every_value_to_the_primary(db, keyring):
    first = keyring.primary.key_id
    values = fill(db, keyring, 150)
    second = keyring.rotate().key_id
    values.update(fill(db, keyring, 150, start=150))
    primary = keyring.rotate().key_id

    dry = rotate(db, metadata.tables["secrets"], dry_run=True)[0]
    non_null = lambda r: sum(1 for k in r if r[k] is not None)
    assert dry.by_key == {first: non_null({k: values[k] for k in range(150)}),
                          second: non_null({k: values[k] for k in range(150, 300)})}  # fmt: skip
    assert set(key_ids(db).values()) == {
        None,
        first,
        second,
    }  # a dry run writes nothing

    result = rotate(db, spec_of(), batch_size=32)[0]
    stale = sum(dry.by_key.values())
    assert (result.status, result.resealed, result.sealed, result.failed) == (
        "done",
        stale,
        stale,
        0,
    )
    assert result.remaining == 0 and result.batches == 10  # 300 keys / 32
    assert set(key_ids(db).values()) == {None, primary}
    assert read_all(db) == values
    with db.connect() as conn:
        job = jobs_mod.get_job(conn, result.job_id)
        assert (job.status, job.rows_resealed, job.total_estimate, job.target_key_id) == (
            "done", stale, stale, primary)  # fmt: skip
        assert jobs_mod.load_key(job.checkpoint) == (299,)
        states = conn.execute(sa.select(sealstore_job_batches.c.state).distinct()).scalars().all()
        assert states == ["done"]

    again = rotate(db, spec_of())[0]  # nothing left: a new job that rewrites nothing
    assert (again.resealed, again.sealed, again.remaining) == (0, 0, 0)
    assert read_all(db) == values


def test_status_counts_rows_per_key_in_sql(db, keyring):
    old = keyring.primary.key_id
    fill(db, keyring, 60)  # NULL at 0, 10, ..., 50
    new = keyring.rotate().key_id
    with db.begin() as conn:  # the application rewrites rows 0..19 under the new key
        conn.execute(sa.update(secrets).where(secrets.c.id < 20).values(body="rewritten"))
    report = status(db, [spec_of()])
    (col,) = report.columns
    assert (col.name, col.rows, col.nulls, col.primary_key_id) == (
        "secrets.body",
        60,
        4,
        new,
    )
    assert col.by_key == {new: 20, old: 36} and col.not_primary == 36
    assert references(db, [spec_of()], old) == [Reference("secrets.body", 36)]
    assert references(db, [spec_of()], 0x12345678) == []
    rotate(db, spec_of())
    assert references(db, [spec_of()], old) == []
    assert status(db, [spec_of()]).columns[0].by_key == {new: 56}


def test_composite_key_and_row_bound_values(db, keyring):
    from sealstore.adapters.sqlalchemy import seal_for_row

    rows = {(t, f"n{i}"): os.urandom(i % 40) for t in (1, 2, 3) for i in range(25)}
    with db.begin() as conn:
        conn.execute(sa.insert(pairs), [
            {"tenant": t, "name": n, "payload": seal_for_row(pairs.c.payload, v, (t, n))}
            for (t, n), v in rows.items()
        ])  # fmt: skip
    keyring.rotate()
    result = rotate(db, spec_of(pairs, "payload"), batch_size=10)[0]
    assert (result.resealed, result.failed, result.remaining) == (75, 0, 0)
    with db.connect() as conn:
        got = {(t, n): v.open((t, n)) for t, n, v in conn.execute(sa.select(pairs))}
    assert got == rows
    # the values stay bound to their rows: swapping two ciphertexts makes both fail
    with db.connect() as conn:
        a, b = conn.execute(
            sa.text("SELECT payload FROM pairs WHERE tenant = 1 ORDER BY name LIMIT 2")
        ).scalars()
    with pytest.raises(InvalidTag):
        keyring.open(bytes(a), column_context("pairs", "payload", (1, "n1")))
    assert b is not None


def test_failing_values_are_reported_and_left_alone(db, keyring):
    values = fill(db, keyring, 40)
    old = keyring.primary.key_id
    with db.begin() as conn:
        sealed = bytes(
            conn.execute(sa.select(raw_secrets.c.body).where(raw_secrets.c.id == 7)).scalar()
        )
        broken = sealed[:-1] + bytes([sealed[-1] ^ 0x01])
        conn.execute(sa.update(raw_secrets).where(raw_secrets.c.id == 7).values(body=broken))
    keyring.rotate()
    result = rotate(db, spec_of(), batch_size=16)[0]
    assert result.failed == 1 and result.failures == [((7,), old, "InvalidTag")]
    assert result.remaining == 1 and result.status == "done"
    with db.connect() as conn:
        assert (
            bytes(conn.execute(sa.select(raw_secrets.c.body).where(raw_secrets.c.id == 7)).scalar())
            == broken
        )
        job = jobs_mod.get_job(conn, result.job_id)
    assert job.rows_failed == 1 and "(7,)" in job.message and "value 7" not in job.message

    report = verify(db, spec_of(), batch_size=8)[0]
    assert (report.checked, report.failed) == (
        sum(v is not None for v in values.values()),
        1,
    )
    assert report.failures[0].pk == (7,) and report.failures[0].key_id_hex == f"{old:08x}"
    assert report.failures[0].error == "InvalidTag"


def test_a_new_primary_during_a_run_supersedes_the_job(db, keyring):
    fill(db, keyring, 80)
    keyring.rotate()
    seen = []

    def hook(name, **info):
        seen.append(name)
        if name == "committed" and seen.count("committed") == 2:
            keyring.rotate()

    first = rotate(db, spec_of(), batch_size=10, on_event=hook)[0]
    assert first.status == "superseded" and first.batches == 2
    second = rotate(db, spec_of(), batch_size=10)[0]
    assert second.job_id != first.job_id and second.status == "done" and second.remaining == 0
    assert set(key_ids(db).values()) == {None, keyring.primary.key_id}
    with db.connect() as conn:
        assert jobs_mod.get_job(conn, first.job_id).status == "superseded"


# ---- concurrent writers ------------------------------------------------------------------------


def test_compare_and_swap_never_overwrites_a_concurrent_write(db, keyring):
    """A writer changes one row of each batch in flight between the worker's read and its write
    (the hook runs then); those rows keep the writer's value and are re-read, not clobbered."""
    if db.dialect.name == "sqlite":  # one writer at a time: the batch holds the database lock
        pytest.skip("SQLite serializes writers; see the threaded writers test")
    values = fill(db, keyring, 60, start=1, null_every=1000)  # ids 1..60, batches of 10
    keyring.rotate()
    written = {}
    writer = sa.create_engine(db.url)

    def hook(name, **info):
        if name == "sealed" and len(written) < 6:
            pk = len(written) * 10 + 1  # the first row of the batch being rewritten
            written[pk] = f"writer {pk}"
            with writer.begin() as conn:
                conn.execute(sa.update(secrets).where(secrets.c.id == pk).values(body=written[pk]))

    try:
        result = rotate(db, spec_of(), batch_size=10, on_event=hook)[0]
    finally:
        writer.dispose()
    assert result.conflicted == len(written) == 6
    assert result.resealed == 60 - 6 and result.remaining == 0 and result.batches == 6
    assert read_all(db) == {**values, **written}
    assert set(key_ids(db).values()) == {keyring.primary.key_id}


def test_rotation_with_concurrent_writer_threads(db, keyring):
    values = fill(db, keyring, 400, start=1, null_every=1000)  # ids 1..400, no NULLs
    keyring.rotate()
    stop = threading.Event()
    latest: dict[int, str] = {}
    errors = []

    # each thread owns the keys of its parity, so the latest value of a key is well defined
    threads = []
    for seed in (0, 1):

        def run(seed=seed):
            rnd = random.Random(seed)
            eng = sa.create_engine(db.url)
            n = 0
            try:
                while not stop.is_set() or n < 20:
                    pk = rnd.randrange(200) * 2 + seed + 1
                    value = f"w{seed}-{n}"
                    for _ in range(100):
                        try:
                            with eng.begin() as conn:
                                conn.execute(
                                    sa.update(secrets).where(secrets.c.id == pk).values(body=value)
                                )
                            break
                        except sa.exc.OperationalError:
                            time.sleep(0.01)
                    else:
                        raise RuntimeError("writer could not get the lock")
                    latest[pk] = value
                    n += 1
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                eng.dispose()

        threads.append(threading.Thread(target=run))
    for t in threads:
        t.start()
    try:
        result = rotate(db, spec_of(), batch_size=16)[0]
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert result.status == "done"
    final = read_all(db)
    for pk in values:
        assert final[pk] == latest.get(pk, values[pk])
    assert set(key_ids(db).values()) == {keyring.primary.key_id}
    assert rotate(db, spec_of())[0].remaining == 0


# ---- workers in other processes: SIGKILL and parallel -------------------------------------------

WORKER = r"""
import json, os, signal, sys, time
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.keyring import Key, Keyring, use_keyring
from sealstore.migrations.rotation.reseal import rotate
from sealstore.migrations.rotation.spec import ColumnSpec

url, keys_path, batch_size, kill_at, out_path, barrier = sys.argv[1:7]
keys = [Key(k["id"], k["suite"], bytes.fromhex(k["material"]), state=k["state"])
        for k in json.load(open(keys_path))]
use_keyring(Keyring(keys, tag_size=32))
table = sa.Table("secrets", sa.MetaData(),
                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                 sa.Column("body", EncryptedString(200)))
kill_at = int(kill_at)
count = [0]

def hook(name, **info):
    count[0] += 1
    if count[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

engine = sa.create_engine(url)
if barrier != "-":
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.005)
r = rotate(engine, ColumnSpec.from_column(table.c.body), batch_size=int(batch_size), on_event=hook,
           worker_id=f"w{os.getpid()}")[0]
json.dump({"job_id": r.job_id, "status": r.status, "resealed": r.resealed, "sealed": r.sealed,
           "conflicted": r.conflicted, "batches": r.batches, "events": count[0]}, open(out_path, "w"))
"""


@pytest.fixture
def worker_script(tmp_path, keyring):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return script


def dump_keys(keyring, path) -> None:
    path.write_text(json.dumps([
        {"id": k.key_id, "suite": str(k.suite), "state": k.state.value, "material": k.reveal_material().hex()}
        for k in keyring.keys
    ]))  # fmt: skip


def spawn(script, engine, keys_path, out_path, *, batch_size=25, kill_at=-1, barrier="-"):
    url = engine.url.render_as_string(hide_password=False)
    args = [
        sys.executable,
        str(script),
        url,
        str(keys_path),
        str(batch_size),
        str(kill_at),
        str(out_path),
        str(barrier),
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_worker_killed_at_random_points_resumes(db, keyring, worker_script, tmp_path, seed):
    values = fill(db, keyring, 300, null_every=7)
    keyring.rotate()
    stale = sum(v is not None for v in values.values())
    keys_path = tmp_path / "keys.json"
    dump_keys(keyring, keys_path)
    rnd = random.Random(seed)
    # the events of one batch are claimed, taken, sealed, rewritten, committed (after "joined"):
    # each process is killed at a random one of its first 16 steps (at most three batches of the
    # twelve), so kills land mid-transaction, between transactions and right after commits
    kills = [rnd.randrange(1, 17) for _ in range(3)]
    job_ids = set()
    for i, kill_at in enumerate(kills):
        proc = spawn(worker_script, db, keys_path, tmp_path / f"out{i}.json", kill_at=kill_at)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, err
        with db.connect() as conn:
            (job,) = jobs_mod.running_jobs(conn)
            job_ids.add(job.job_id)
            # what is committed is consistent: every batch marked done rewrote its rows
            done = conn.execute(sa.select(sa.func.sum(sealstore_job_batches.c.rows_resealed)).where(
                sealstore_job_batches.c.state == "done")).scalar() or 0  # fmt: skip
            assert done == job.rows_resealed
        assert sum(1 for k in key_ids(db).values() if k == keyring.primary.key_id) == done
    proc = spawn(worker_script, db, keys_path, tmp_path / "final.json")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    final = json.loads((tmp_path / "final.json").read_text())
    job_ids.add(final["job_id"])
    assert len(job_ids) == 1 and final["status"] == "done"  # every run resumed the same job
    assert read_all(db) == values  # none lost, none double-sealed (each opens to its value)
    assert set(key_ids(db).values()) == {None, keyring.primary.key_id}
    with db.connect() as conn:
        job = jobs_mod.get_job(conn, final["job_id"])
        assert job.rows_resealed == stale and job.rows_conflicted == 0
        states = conn.execute(sa.select(sealstore_job_batches.c.state, sa.func.count()).group_by(
            sealstore_job_batches.c.state)).all()  # fmt: skip
        assert dict(states) == {"done": 12}


@pytest.mark.parametrize("workers", [2, 4])
def test_parallel_workers_share_one_job_without_double_work(
    pg_url, keyring, worker_script, tmp_path, workers
):
    engine = sa.create_engine(pg_url)
    create_tables(engine)
    metadata.create_all(engine)
    try:
        values = fill(engine, keyring, 6000, null_every=11)
        keyring.rotate()
        stale = sum(v is not None for v in values.values())
        keys_path = tmp_path / "keys.json"
        dump_keys(keyring, keys_path)
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        procs = [spawn(worker_script, engine, keys_path, tmp_path / f"out{i}.json", batch_size=50,
                       barrier=barrier) for i in range(workers)]  # fmt: skip
        deadline = time.monotonic() + 120
        while len(list(barrier.glob("ready-*"))) < workers and time.monotonic() < deadline:
            time.sleep(0.01)
        (barrier / "go").touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        results = [json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(workers)]
        assert len({r["job_id"] for r in results}) == 1  # they all joined one job
        # no double work: every stale value was sealed exactly once, by exactly one worker
        assert sum(r["sealed"] for r in results) == stale
        assert sum(r["resealed"] for r in results) == stale
        assert sum(r["conflicted"] for r in results) == 0
        with engine.connect() as conn:
            rows = conn.execute(sa.select(sealstore_job_batches)).all()
            job = jobs_mod.get_job(conn, results[0]["job_id"])
        assert len(rows) == 120 and {r.state for r in rows} == {"done"}
        assert sum(r.rows_resealed for r in rows) == stale == job.rows_resealed
        assert sum(r["batches"] for r in results) == 120
        assert len({r.worker for r in rows}) >= 2  # the work was shared
        assert read_all(engine) == values
        assert set(key_ids(engine).values()) == {None, keyring.primary.key_id}
    finally:
        metadata.drop_all(engine)
        drop_tables(engine)
        engine.dispose()
