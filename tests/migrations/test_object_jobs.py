"""Object rotation coordinated by the database (``sealstore rotate --objects``): batches of
object keys claimed through the job tables, on SQLite (one worker) and PostgreSQL (several
worker processes on moto's S3 server sharing one job, SKIP LOCKED), no object re-sealed twice
(every object ends with exactly one new version in a versioned bucket), a SIGKILLed worker's
batch taken over, and the checkpoint file as the no-database fallback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
from fixtures_s3 import make_client
from sealstore.adapters.objects import MemoryStore, ObjectSealing
from sealstore.adapters.s3 import encrypt_client
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keyring import Keyring
from sealstore.migrations import create_tables, drop_tables
from sealstore.migrations.rotation.objects import rotate_prefix
from sealstore.migrations.schema import sealstore_job_batches, sealstore_jobs


class _S3Named(MemoryStore):
    scheme = "s3"  # an in-memory store standing in for s3:// URLs


def test_one_worker_on_sqlite(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    create_tables(engine)
    kr = Keyring.generate("AEGIS-128L", 16)
    store = _S3Named()
    store.create_bucket("b")
    sealing = ObjectSealing(kr)
    data = {f"p/{i:03d}": os.urandom(50 + i) for i in range(23)}
    for key, value in data.items():
        sealing.seal(store, "b", key, value)
    sealing.seal(store, "b", "q/outside", b"not under the prefix")
    store.put("b", "p/plain", b"never sealed", length=12)
    kr.rotate()
    seen = []
    result = rotate_prefix(engine, sealing, store, "s3://b/p/", batch_size=5,
                           progress=lambda report, key, outcome: seen.append((key, outcome)))  # fmt: skip
    assert result.complete and result.ok and result.batches == 5
    assert (result.scanned, result.resealed, result.not_sealed) == (24, 23, 1)
    assert sorted(k for k, _ in seen) == sorted([*data, "p/plain"])
    for key, value in data.items():
        opened = sealing.open(store, "b", key)
        assert opened.read() == value and opened.header.key_id == kr.primary.key_id
    assert sealing.open(store, "b", "q/outside").header.key_id != kr.primary.key_id
    with engine.connect() as conn:
        job = conn.execute(sa.select(sealstore_jobs)).one()
        assert (job.kind, job.table_name, job.column_name, job.status) == (
            "objects", "s3://b", "p/", "done")  # fmt: skip
        assert (job.rows_resealed, job.rows_failed, job.batches) == (23, 0, 5)
        states = conn.execute(sa.select(sealstore_job_batches.c.state)).scalars().all()
        assert set(states) == {"done"}
    again = rotate_prefix(engine, sealing, store, "s3://b/p/", batch_size=5)
    assert (again.resealed, again.current, again.complete) == (0, 23, True)


class _CountedLists(_S3Named):
    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list(self, bucket, prefix="", *, start_after=None):
        self.lists += 1
        return super().list(bucket, prefix, start_after=start_after)


def _counted_world(tmp_path, n):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    create_tables(engine)
    kr = Keyring.generate("AEGIS-128L", 16)
    store = _CountedLists()
    store.create_bucket("b")
    sealing = ObjectSealing(kr)
    for i in range(n):
        sealing.seal(store, "b", f"p/{i:03d}", b"value %d" % i)
    kr.rotate()
    return engine, sealing, store


def test_a_claimed_batch_runs_from_its_claims_listing(tmp_path):
    # one listing request per batch (the claim's), and one that finds nothing left: the worker
    # that claimed a batch does not list it again
    engine, sealing, store = _counted_world(tmp_path, 23)
    result = rotate_prefix(engine, sealing, store, "s3://b/p/", batch_size=5)
    assert (result.batches, result.resealed, result.complete) == (5, 23, True)
    assert store.lists == 5 + 1


def test_a_batch_claimed_by_another_worker_is_listed_again(tmp_path):
    from sealstore.migrations.rotation.jobs import start_job
    from sealstore.migrations.rotation.objects import KIND, _claim

    engine, sealing, store = _counted_world(tmp_path, 12)
    job, _ = start_job(engine, KIND, "s3://b", "p/", sealing.keyring.primary.key_id, 5)
    with engine.begin() as conn:  # a worker that claimed a batch and died
        _, batch, keys = _claim(conn, job, store, "b", "p/")
    assert batch is not None and keys == [f"p/{i:03d}" for i in range(5)]
    store.lists = 0
    result = rotate_prefix(engine, sealing, store, "s3://b/p/", batch_size=5)
    assert (result.batches, result.resealed, result.current, result.complete) == (3, 12, 0, True)
    assert store.lists == 1 + 2 + 1  # the orphan batch listed again, two claims, the last look
    primary = sealing.keyring.primary.key_id
    for i in range(12):
        assert sealing.open(store, "b", f"p/{i:03d}").header.key_id == primary


def test_a_failing_object_is_reported_and_the_rest_done(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    create_tables(engine)
    kr = Keyring.generate("AEGIS-128L", 16)
    store = _S3Named()
    store.create_bucket("b")
    sealing = ObjectSealing(kr)
    for i in range(6):
        sealing.seal(store, "b", f"k{i}", b"value %d" % i)
    store.copy("b", "k0", "b", "k3")  # another tool's copy: bound to k0, refused at k3
    kr.rotate()
    result = rotate_prefix(engine, sealing, store, "s3://b/", batch_size=4)
    assert result.complete and result.resealed == 5
    assert [f["key"] for f in result.failures] == ["k3"]
    assert "WrongLocation" in result.failures[0]["error"]
    with engine.connect() as conn:
        messages = conn.execute(sa.select(sealstore_job_batches.c.rows_failed)).scalars().all()
    assert sum(messages) == 1


# ---- several processes on PostgreSQL and moto's S3 server ------------------------------------


@pytest.fixture
def world(tmp_path, pg_url, s3_endpoint, raw_s3, bucket):
    """A key file config, a versioned bucket of objects under its first key, the keyring
    rotated, sealstore's tables in PostgreSQL; (config, env, objects)."""
    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SEALSTORE_") or k == "SEALSTORE_KERNEL"}  # fmt: skip
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1")  # fmt: skip
    assert main(["-c", str(config), "keys", "init"]) == 0
    raw_s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    keyring = load_config(str(config)).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), keyring, segment_size=4096)
    objects = {f"data/{i:03d}": os.urandom(2000 + i) for i in range(60)}
    for key, value in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=value)
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    engine = sa.create_engine(pg_url)
    drop_tables(engine)
    create_tables(engine)
    try:
        yield config, env, objects, engine
    finally:
        drop_tables(engine)
        engine.dispose()


def _worker(config, env, pg_url, s3_endpoint, bucket, *extra):
    cmd = [sys.executable, "-m", "sealstore", "-c", str(config), "rotate", "--objects",
           f"s3://{bucket}/data/", "--db", pg_url, "--endpoint-url", s3_endpoint,
           "--objects-batch-size", "4", "--json", *extra]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _check_bucket(config, s3_endpoint, raw_s3, bucket, objects) -> None:
    """Every object opens under the new primary and has exactly two versions: the original
    and ONE re-sealed version (no object was re-sealed twice)."""
    keyring = load_config(str(config)).load_keyring()
    reader = encrypt_client(make_client(s3_endpoint), keyring)
    versions: dict[str, int] = {}
    for page in raw_s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            versions[v["Key"]] = versions.get(v["Key"], 0) + 1
    assert versions == {key: 2 for key in objects}
    for key, value in objects.items():
        head = raw_s3.head_object(Bucket=bucket, Key=key)
        assert head["Metadata"]["sealstore-key-id"] == keyring.primary.id_hex
        assert reader.get_object(Bucket=bucket, Key=key)["Body"].read() == value


def test_workers_share_one_job(world, pg_url, s3_endpoint, raw_s3, bucket):
    config, env, objects, engine = world
    procs = [_worker(config, env, pg_url, s3_endpoint, bucket, "--pause", "0.05")
             for _ in range(3)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
    docs = [json.loads(out)["objects"][0] for out, _ in outs]
    assert sum(d["resealed"] for d in docs) == len(objects)  # each object once, in all
    assert len({d["job_id"] for d in docs}) == 1 and any(d["complete"] for d in docs)
    with engine.connect() as conn:
        batches = conn.execute(sa.select(sealstore_job_batches)).all()
        job = conn.execute(sa.select(sealstore_jobs)).one()
    assert {b.state for b in batches} == {"done"} and job.status == "done"
    assert sum(b.rows_resealed for b in batches) == len(objects) == job.rows_resealed
    assert len({b.worker for b in batches}) >= 2  # the work was shared
    _check_bucket(config, s3_endpoint, raw_s3, bucket, objects)


def test_a_killed_workers_batch_is_taken_over(world, pg_url, s3_endpoint, raw_s3, bucket):
    config, env, objects, engine = world
    victim = _worker(config, env, pg_url, s3_endpoint, bucket, "--pause", "0.2")
    try:
        deadline = time.monotonic() + 120
        done = 0
        while time.monotonic() < deadline and done < 2:
            assert victim.poll() is None, victim.stderr.read().decode()
            with engine.connect() as conn:
                done = conn.execute(
                    sa.select(sa.func.count()).where(sealstore_job_batches.c.state == "done")
                ).scalar_one()
            time.sleep(0.1)
        time.sleep(0.3)  # inside its next batch: some objects re-sealed, the batch not done
        victim.send_signal(signal.SIGKILL)
    finally:
        victim.wait(10)
    with engine.connect() as conn:
        job = conn.execute(sa.select(sealstore_jobs)).one()
        assert job.status == "running" and 8 <= job.rows_resealed < len(objects)
    survivor = _worker(config, env, pg_url, s3_endpoint, bucket)
    out, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err.decode()
    doc = json.loads(out)["objects"][0]
    assert doc["complete"] and doc["job_id"] == job.job_id
    # what the killed worker had re-sealed in its unfinished batch is found current (and the
    # versions below show it was not written again)
    assert doc["resealed"] + job.rows_resealed + doc["current"] == len(objects)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sealstore_jobs.c.status)).scalar_one() == "done"
    _check_bucket(config, s3_endpoint, raw_s3, bucket, objects)


def test_without_a_database_the_checkpoint_file_serves(tmp_path, s3_endpoint, raw_s3, bucket,
                                                       monkeypatch, capsys):  # fmt: skip
    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["-c", str(config), "keys", "init"]) == 0
    keyring = load_config(str(config)).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), keyring)
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"d/{i}", Body=b"x" * i)
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    capsys.readouterr()
    code = main(["-c", str(config), "rotate", "--objects", f"s3://{bucket}/d/",
                 "--endpoint-url", s3_endpoint, "--json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)["objects"][0]
    assert (doc["coordinated"], doc["resealed"], doc["complete"]) == (False, 5, True)
    assert list((tmp_path / "state" / "sealstore").glob("rotate-*.json"))
