"""Object key rotation: rotate_objects and ``sealstore s3 rotate`` (resumes after a kill)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fixtures_s3 import make_client
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.rotate import parse_s3_url, rotate_objects
from sealstore.errors import KeyNotUsable
from sealstore.keyring import Keyring

SEG = 4096


def key_id(raw_s3, bucket, key) -> str:
    return raw_s3.head_object(Bucket=bucket, Key=key)["Metadata"].get("sealstore-key-id")


def get(client, bucket, key) -> bytes:
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.fixture
def setup(s3_endpoint, raw_s3, bucket):
    """Objects under an old key, one under the new primary, one that lost its metadata, and a
    plaintext one; returns (client, contents)."""
    kr = Keyring.generate()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
    contents = {}
    for i in range(5):
        data = os.urandom(1000 * i + 7)
        s3.put_object(
            Bucket=bucket,
            Key=f"data/old-{i}",
            Body=data,
            Metadata={"n": str(i)},
            ContentType="x/y",
        )
        contents[f"data/old-{i}"] = data
    kr.rotate()
    contents["data/new"] = b"already under the new primary"
    s3.put_object(Bucket=bucket, Key="data/new", Body=contents["data/new"])
    contents["data/bare"] = b"new key, metadata lost in a copy"
    s3.put_object(Bucket=bucket, Key="data/bare", Body=contents["data/bare"])
    raw_s3.copy_object(  # onto itself: a copy elsewhere would not open (bound to its key)
        Bucket=bucket,
        Key="data/bare",
        CopySource=f"{bucket}/data/bare",
        MetadataDirective="REPLACE",
    )
    raw_s3.put_object(Bucket=bucket, Key="data/plain", Body=b"never sealed")
    raw_s3.put_object(Bucket=bucket, Key="other/old", Body=b"outside the prefix")
    return s3, contents


def test_parse_url():
    assert parse_s3_url("s3://b/p/q") == ("b", "p/q")
    assert parse_s3_url("s3://b") == ("b", "")
    for bad in ("b/p", "s3://", "s3:///p"):
        with pytest.raises(ValueError):
            parse_s3_url(bad)


def test_rotate_objects(setup, raw_s3, bucket):
    s3, contents = setup
    primary = s3.sealstore.keyring.primary.id_hex
    report = rotate_objects(s3, bucket, "data/")
    assert (
        report.scanned,
        report.resealed,
        report.repaired,
        report.current,
        report.not_sealed,
    ) == (8, 5, 1, 1, 1)
    assert report.complete and report.ok and not report.conflicts
    for key, data in contents.items():
        assert key_id(raw_s3, bucket, key) == primary, key
        assert get(s3, bucket, key) == data
    head = raw_s3.head_object(Bucket=bucket, Key="data/old-3")
    assert head["Metadata"]["n"] == "3" and head["ContentType"] == "x/y"
    again = rotate_objects(s3, bucket, "data/")  # nothing left: HEAD requests only
    assert (again.resealed, again.repaired, again.current) == (0, 0, 7)


def test_old_key_retired(setup, raw_s3, bucket):
    s3, contents = setup
    kr = s3.sealstore.keyring
    old = [k for k in kr.keys if k.state.value == "active"][0]
    kr.retire(old.key_id)
    with pytest.raises(KeyNotUsable):
        get(s3, bucket, "data/old-0")  # retired keys do not open by default...
    report = rotate_objects(s3, bucket, "data/")
    assert report.resealed == 5  # ...but rotation opens them to re-seal
    assert get(s3, bucket, "data/old-0") == contents["data/old-0"]


def test_seal_plaintext_and_dry_run(setup, raw_s3, bucket):
    s3, contents = setup
    dry = rotate_objects(s3, bucket, "data/", dry_run=True, seal_plaintext=True)
    assert (dry.resealed, dry.sealed_plaintext) == (5, 1)
    assert key_id(raw_s3, bucket, "data/old-0") != s3.sealstore.keyring.primary.id_hex  # untouched
    report = rotate_objects(s3, bucket, "data/", seal_plaintext=True)
    assert report.sealed_plaintext == 1
    assert get(s3, bucket, "data/plain") == b"never sealed"
    assert raw_s3.get_object(Bucket=bucket, Key="data/plain")["Body"].read().startswith(b"SSOB")


def test_concurrent_writer_never_overwritten(setup, raw_s3, bucket, s3_endpoint):
    s3, contents = setup
    writer = encrypt_client(make_client(s3_endpoint), s3.sealstore.keyring)
    done = []

    def race(params, **kwargs):  # another writer updates old-2 between our read and write
        if params.get("Key") == "data/old-2" and not done:
            done.append(1)
            writer.put_object(Bucket=bucket, Key="data/old-2", Body=b"written concurrently")

    s3.meta.events.register("before-parameter-build.s3.PutObject", race)
    report = rotate_objects(s3, bucket, "data/")
    assert report.conflicts == ["data/old-2"] and report.resealed == 4
    assert get(s3, bucket, "data/old-2") == b"written concurrently"


def test_checkpoint_resume(setup, raw_s3, bucket, tmp_path):
    s3, contents = setup
    path = str(tmp_path / "cp.json")

    def stop_after_three(report, key, outcome):
        if report.scanned == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rotate_objects(s3, bucket, "data/", checkpoint=path, progress=stop_after_three)
    with open(path) as f:
        state = json.load(f)
    assert state["last_key"] == "data/old-0" and not state["complete"]
    report = rotate_objects(s3, bucket, "data/", checkpoint=path)
    assert report.after == "data/old-0" and report.scanned == 5
    with open(path) as f:
        assert json.load(f)["complete"]
    primary = s3.sealstore.keyring.primary.id_hex
    assert all(key_id(raw_s3, bucket, k) == primary for k in contents)
    fresh = rotate_objects(s3, bucket, "data/", checkpoint=path)  # complete: starts over
    assert fresh.after is None and fresh.scanned == 8


def test_cli_resumes_after_kill(s3_endpoint, raw_s3, bucket, tmp_path):
    from sealstore.cli import main

    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SEALSTORE_") or k == "SEALSTORE_KERNEL"
    }
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert main(["-c", str(config), "keys", "init"]) == 0
    from sealstore.config import load_config

    keyring = load_config(str(config)).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)
    data = {f"obj-{i:02d}": os.urandom(3000 + i) for i in range(12)}
    for key, value in data.items():
        s3.put_object(Bucket=bucket, Key=key, Body=value)
    old = keyring.primary.id_hex
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    checkpoint = tmp_path / "cp.json"
    cmd = [
        sys.executable,
        "-m",
        "sealstore",
        "-c",
        str(config),
        "s3",
        "rotate",
        f"s3://{bucket}",
        "--endpoint-url",
        s3_endpoint,
        "--checkpoint",
        str(checkpoint),
    ]
    proc = subprocess.Popen(
        cmd + ["--pause", "0.3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if checkpoint.exists() and json.loads(checkpoint.read_text()).get("scanned", 0) >= 3:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
    state = json.loads(checkpoint.read_text())
    assert 3 <= state["scanned"] < 12 and not state["complete"]
    done = state["scanned"]
    out = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["after"] == state["last_key"] and report["complete"]
    assert report["scanned"] == 12 - done and report["resealed"] + report["current"] == 12 - done
    new = load_config(str(config)).load_keyring()
    assert new.primary.id_hex != old
    reader = encrypt_client(make_client(s3_endpoint), new)
    for key, value in data.items():
        assert key_id(raw_s3, bucket, key) == new.primary.id_hex
        assert get(reader, bucket, key) == value


# ---- objects above the 5 GiB single-request limit (scaled down: 6 MiB, 5 MiB parts) --------

MiB = 1 << 20


@pytest.fixture
def small_limits(monkeypatch):
    scale_down(monkeypatch)


def scale_down(monkeypatch) -> None:
    """S3's 5 GiB single-request limit as 6 MiB, with 5 MiB parts (re-seal and copy)."""
    import dataclasses

    from sealstore.adapters.objects import engine
    from sealstore.adapters.s3 import large
    from sealstore.adapters.s3.store import S3Store

    monkeypatch.setattr(S3Store, "limits", dataclasses.replace(S3Store.limits, max_single=6 * MiB))
    monkeypatch.setattr(large, "MAX_SINGLE_REQUEST", 6 * MiB)
    monkeypatch.setattr(engine, "RESEAL_PART", 5 * MiB)
    monkeypatch.setattr(large, "COPY_PART", 5 * MiB)


def _record(client, op):
    """The parameters of every ``op`` request ``client`` sends."""
    seen = []
    client.meta.events.register(f"before-call.s3.{op}", lambda params, **kw: seen.append(params))
    return seen


def test_large_object_is_resealed_with_a_conditional_multipart_upload(
    small_limits, s3_endpoint, raw_s3, bucket
):
    kr = Keyring.generate()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
    data = os.urandom(11 * MiB + 123)
    s3.put_object(Bucket=bucket, Key="big", Body=data, Metadata={"n": "1"}, ContentType="x/y")
    etag = raw_s3.head_object(Bucket=bucket, Key="big")["ETag"]
    kr.rotate()
    completes = _record(s3, "CompleteMultipartUpload")
    report = rotate_objects(s3, bucket, "big")
    assert (report.resealed, report.failures) == (1, [])
    head = raw_s3.head_object(Bucket=bucket, Key="big")
    assert head["ETag"].endswith('-3"')  # three parts: 5 + 5 + 1 MiB
    assert head["Metadata"]["n"] == "1" and head["ContentType"] == "x/y"
    assert key_id(raw_s3, bucket, "big") == kr.primary.id_hex
    assert get(s3, bucket, "big") == data
    assert [c["headers"].get("If-Match") for c in completes] == [etag]  # never over a new write
    assert not raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_large_object_that_fails_to_open_is_left_as_it_was(
    small_limits, s3_endpoint, raw_s3, bucket
):
    kr = Keyring.generate()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
    s3.put_object(Bucket=bucket, Key="big", Body=os.urandom(11 * MiB))
    head = raw_s3.head_object(Bucket=bucket, Key="big")
    sealed = bytearray(raw_s3.get_object(Bucket=bucket, Key="big")["Body"].read())
    sealed[8 * MiB] ^= 1  # a segment in the second part
    raw_s3.put_object(Bucket=bucket, Key="big", Body=bytes(sealed), Metadata=head["Metadata"])
    kr.rotate()
    report = rotate_objects(s3, bucket, "big")
    assert report.resealed == 0 and [f["key"] for f in report.failures] == ["big"]
    assert "InvalidTag" in report.failures[0]["error"]
    assert raw_s3.get_object(Bucket=bucket, Key="big")["Body"].read() == bytes(sealed)
    assert not raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads")  # aborted


def test_large_object_metadata_is_repaired_by_a_multipart_copy(
    small_limits, s3_endpoint, raw_s3, bucket
):
    kr = Keyring.generate()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
    data = os.urandom(13 * MiB)
    s3.put_object(Bucket=bucket, Key="big", Body=data)  # at its own key: objects are bound to it
    sealed = raw_s3.get_object(Bucket=bucket, Key="big")["Body"].read()
    raw_s3.put_object(Bucket=bucket, Key="big", Body=sealed, Metadata={"n": "2"}, ContentType="x/y")
    etag = raw_s3.head_object(Bucket=bucket, Key="big")["ETag"]
    with s3.sealstore.raw() as raw:
        part_copies = _record(raw, "UploadPartCopy")
    report = rotate_objects(s3, bucket, "big")
    assert (report.repaired, report.failures) == (1, [])
    head = raw_s3.head_object(Bucket=bucket, Key="big")
    assert head["ETag"].endswith('-3"') and head["ContentType"] == "x/y"
    assert head["Metadata"]["n"] == "2" and key_id(raw_s3, bucket, "big") == kr.primary.id_hex
    assert raw_s3.get_object(Bucket=bucket, Key="big")["Body"].read() == sealed  # byte for byte
    assert get(s3, bucket, "big") == data
    assert {c["headers"].get("x-amz-copy-source-if-match") for c in part_copies} == {etag}


@pytest.mark.parametrize("extra", [-1, 1])
def test_a_multipart_reseal_refuses_a_source_of_another_length(
    small_limits, s3_endpoint, raw_s3, bucket, extra
):
    """A source shorter or longer than declared raises SourceChanged; nothing is written and
    the upload is aborted."""
    import io

    from sealstore.adapters.s3.rotate import sealing_of
    from sealstore.adapters.s3.store import S3Store
    from sealstore.errors import SourceChanged

    s3 = encrypt_client(make_client(s3_endpoint), Keyring.generate(), segment_size=SEG)
    length = 11 * MiB
    body = io.BufferedReader(io.BytesIO(os.urandom(length + extra)))
    body.seekable = lambda: False  # a stream read once, as an opened object is
    with pytest.raises(SourceChanged):
        sealing_of(s3).seal(S3Store(s3), bucket, "k", body, length=length)
    assert "Contents" not in raw_s3.list_objects_v2(Bucket=bucket)
    assert not raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
