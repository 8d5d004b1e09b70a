"""Objects bound to their bucket and key, over HTTP on moto's S3 server: copies and moves by
other tools fail with WrongLocation, copies through the encrypted client are re-sealed to the
destination, the opt-out, ranged reads, multipart uploads and rotation."""

from __future__ import annotations

import hashlib
import os

import pytest
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.objects import engine
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.location import object_location
from sealstore.adapters.s3.rotate import rotate_objects
from sealstore.errors import (
    InvalidTag,
    KeyCommitmentMismatch,
    ObjectChanged,
    UnsupportedOperation,
    WrongLocation,
)
from sealstore.keyring import Keyring

SEG = 4096
MiB = 1 << 20


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", 32)


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)


@pytest.fixture
def other_bucket(raw_s3, bucket):
    name = f"{bucket}-b"
    raw_s3.create_bucket(Bucket=name)
    return name


def get(client, bucket, key, **kw) -> bytes:
    return client.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def stored(raw_s3, bucket, key) -> bytes:
    return raw_s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def header(raw_s3, bucket, key) -> S.ObjectHeader:
    return S.parse_object_header(stored(raw_s3, bucket, key)[: S.HEADER_SIZE])


def test_location_encoding_is_unambiguous():
    assert object_location("a", "b/c") != object_location("a/b", "c")
    assert object_location("ab", "c") != object_location("a", "bc")
    assert object_location("b", "k") == (
        b"\x00\x00\x00\x16sealstore/v1/s3-object\x00\x00\x00\x01b\x00\x00\x00\x01k"
    )
    with pytest.raises(TypeError):
        object_location(b"b", "k")
    with pytest.raises(ValueError):
        object_location("b", "")


def test_objects_are_bound_by_default(s3, raw_s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    assert header(raw_s3, bucket, "k").bound
    assert get(s3, bucket, "k") == b"hello"


def test_raw_copy_over_another_key_fails_with_wrong_location(s3, raw_s3, bucket):
    """Bob's object copied over alice's key by a plain client: alice's get raises, no data."""
    alice, bob = os.urandom(3 * SEG + 5), os.urandom(2 * SEG + 1)
    s3.put_object(Bucket=bucket, Key="alice", Body=alice)
    s3.put_object(Bucket=bucket, Key="bob", Body=bob)
    raw_s3.copy_object(Bucket=bucket, Key="alice", CopySource={"Bucket": bucket, "Key": "bob"})
    with pytest.raises(WrongLocation, match="another location") as info:
        s3.get_object(Bucket=bucket, Key="alice")
    assert isinstance(info.value, InvalidTag) and not isinstance(info.value, KeyCommitmentMismatch)
    with pytest.raises(WrongLocation):
        get(s3, bucket, "alice", Range=f"bytes={SEG}-{SEG + 9}")
    assert get(s3, bucket, "bob") == bob  # the source still opens where it lives


def test_metadata_lost_in_a_move_still_wrong_location(s3, raw_s3, bucket):
    """A move that also drops the metadata: the header comes from the body, same error."""
    s3.put_object(Bucket=bucket, Key="src", Body=os.urandom(SEG + 3))
    raw_s3.copy_object(Bucket=bucket, Key="moved", CopySource=f"{bucket}/src",
                       MetadataDirective="REPLACE", Metadata={})  # fmt: skip
    with pytest.raises(WrongLocation):
        get(s3, bucket, "moved")
    with pytest.raises(WrongLocation):
        get(s3, bucket, "moved", Range="bytes=5000-5001")
    with pytest.raises(WrongLocation):
        get(s3, bucket, "moved", Range="bytes=-3")


def test_server_side_copy_to_another_bucket_fails(s3, raw_s3, bucket, other_bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"secret payload")
    raw_s3.copy_object(Bucket=other_bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k"})
    with pytest.raises(WrongLocation):
        get(s3, other_bucket, "k")


def test_tampered_location_check_is_tampering_not_a_move(s3, raw_s3, bucket):
    """The location check sits in the salt, which the commitment covers: editing it is a
    KeyCommitmentMismatch, never reported as a move."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 100)
    body = bytearray(stored(raw_s3, bucket, "k"))
    body[43] ^= 1  # last byte of the salt: the location check
    raw_s3.put_object(Bucket=bucket, Key="k", Body=bytes(body))
    with pytest.raises(KeyCommitmentMismatch):
        get(s3, bucket, "k")


@pytest.mark.parametrize("n", [0, 1, SEG, 5 * SEG + 17])
def test_copy_object_reseals_to_the_destination(s3, raw_s3, bucket, other_bucket, n):
    data = os.urandom(n)
    s3.put_object(Bucket=bucket, Key="src", Body=data, Metadata={"a": "1"}, ContentType="x/y")
    src_salt = header(raw_s3, bucket, "src").salt
    resp = s3.copy_object(Bucket=other_bucket, Key="dst", CopySource=f"{bucket}/src")
    assert (
        resp["CopyObjectResult"]["ETag"]
        == raw_s3.head_object(Bucket=other_bucket, Key="dst")["ETag"]
    )
    h = header(raw_s3, other_bucket, "dst")
    assert h.bound and h.salt != src_salt  # a new object, sealed for where it lives
    assert get(s3, other_bucket, "dst") == data
    assert get(s3, bucket, "src") == data
    head = raw_s3.head_object(Bucket=other_bucket, Key="dst")
    assert head["Metadata"]["a"] == "1" and head["ContentType"] == "x/y"
    assert s3.head_object(Bucket=other_bucket, Key="dst")["ContentLength"] == n
    if n > 10:
        assert get(s3, other_bucket, "dst", Range="bytes=3-9") == data[3:10]


def test_copy_object_replace_and_tags(s3, raw_s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"abc", Metadata={"a": "1"},
                  ContentType="x/y", Tagging="t=1")  # fmt: skip
    s3.copy_object(Bucket=bucket, Key="copy", CopySource=f"{bucket}/src")
    assert raw_s3.get_object_tagging(Bucket=bucket, Key="copy")["TagSet"] == [
        {"Key": "t", "Value": "1"}
    ]
    s3.copy_object(Bucket=bucket, Key="rep", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", Metadata={"b": "2"}, ContentType="a/b",
                   TaggingDirective="REPLACE", Tagging="u=2")  # fmt: skip
    head = raw_s3.head_object(Bucket=bucket, Key="rep")
    assert "a" not in head["Metadata"] and head["Metadata"]["b"] == "2"
    assert head["ContentType"] == "a/b"
    assert raw_s3.get_object_tagging(Bucket=bucket, Key="rep")["TagSet"] == [
        {"Key": "u", "Value": "2"}
    ]
    for key in ("copy", "rep"):
        assert get(s3, bucket, key) == b"abc"
    with pytest.raises(UnsupportedOperation):  # reserved sealstore metadata, as ever
        s3.copy_object(Bucket=bucket, Key="x", CopySource=f"{bucket}/src",
                       MetadataDirective="REPLACE", Metadata={"sealstore-key-id": "0"})  # fmt: skip


def test_copy_object_source_conditions(s3, raw_s3, bucket):
    from botocore.exceptions import ClientError

    s3.put_object(Bucket=bucket, Key="src", Body=b"abc")
    with pytest.raises(ClientError):
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=f"{bucket}/src",
                       CopySourceIfMatch='"0000"')  # fmt: skip
    assert "Contents" not in raw_s3.list_objects_v2(Bucket=bucket, Prefix="dst")


def test_large_copy_is_resealed_in_parallel_parts(s3, raw_s3, bucket, other_bucket, monkeypatch):
    """Above the engine's SINGLE_COPY (scaled down) the copy is a multipart upload of ranged
    reads, each conditional on the source's ETag; the destination is bound to where it lives."""
    monkeypatch.setattr(engine, "SINGLE_COPY", 5 * MiB)
    monkeypatch.setattr(engine, "COPY_PART", 5 * MiB)
    data = os.urandom(12 * MiB + 7)
    s3.put_object(Bucket=bucket, Key="src", Body=data, Metadata={"a": "1"})
    etag = raw_s3.head_object(Bucket=bucket, Key="src")["ETag"]
    gets = []
    s3.meta.events.register("before-call.s3.GetObject",
                            lambda params, **kw: gets.append(params["headers"]))  # fmt: skip
    s3.copy({"Bucket": bucket, "Key": "src"}, other_bucket, "dst")
    head = raw_s3.head_object(Bucket=other_bucket, Key="dst")
    assert head["ETag"].endswith('-3"') and head["Metadata"]["a"] == "1"
    assert header(raw_s3, other_bucket, "dst").bound
    ranged = [g for g in gets if g.get("Range")]
    assert len(ranged) == 3 and {g.get("If-Match") for g in ranged} == {etag}
    assert get(s3, other_bucket, "dst") == data
    assert get(s3, other_bucket, "dst", Range="bytes=7000000-7000009") == data[7000000:7000010]
    assert not raw_s3.list_multipart_uploads(Bucket=other_bucket).get("Uploads")


def test_large_copy_of_a_changed_source_aborts(s3, raw_s3, bucket, monkeypatch):
    monkeypatch.setattr(engine, "SINGLE_COPY", 5 * MiB)
    monkeypatch.setattr(engine, "COPY_PART", 5 * MiB)
    monkeypatch.setattr(engine, "COPY_WORKERS", 1)
    s3.put_object(Bucket=bucket, Key="src", Body=os.urandom(11 * MiB))
    rewritten = []

    def racing(params, **kw):  # the source is rewritten after the first part was read
        if params["headers"].get("Range", "bytes=0-").startswith("bytes=0-") or rewritten:
            return
        rewritten.append(raw_s3.put_object(Bucket=bucket, Key="src", Body=b"changed"))

    s3.meta.events.register("before-call.s3.GetObject", racing)
    with pytest.raises(ObjectChanged):
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=f"{bucket}/src")
    assert rewritten
    assert "Contents" not in raw_s3.list_objects_v2(Bucket=bucket, Prefix="dst")
    assert not raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_upload_part_copy_reseals_into_the_upload(s3, raw_s3, bucket, other_bucket):
    part = 5 * MiB
    a, b = os.urandom(part + 100), os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="a", Body=a)
    s3.put_object(Bucket=other_bucket, Key="b", Body=b)
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst",
                                    Metadata={"sealstore-part-size": str(part)})  # fmt: skip
    p1 = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=up["UploadId"], PartNumber=1,
                             CopySource=f"{bucket}/a", CopySourceRange=f"bytes=0-{part - 1}")  # fmt: skip
    p2 = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=up["UploadId"], PartNumber=2,
                             CopySource={"Bucket": other_bucket, "Key": "b"})  # fmt: skip
    s3.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]},
                                     {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})  # fmt: skip
    assert header(raw_s3, bucket, "dst").bound
    assert get(s3, bucket, "dst") == a[:part] + b
    assert get(s3, bucket, "a") == a and get(s3, other_bucket, "b") == b
    up = s3.create_multipart_upload(Bucket=bucket, Key="big",
                                    Metadata={"sealstore-part-size": str(part)})  # fmt: skip
    with pytest.raises(UnsupportedOperation, match="part size"):  # more than a part: refused
        s3.upload_part_copy(Bucket=bucket, Key="big", UploadId=up["UploadId"], PartNumber=1,
                            CopySource=f"{bucket}/a")  # fmt: skip
    with pytest.raises(UnsupportedOperation, match="not inside"):  # past the source's plaintext
        s3.upload_part_copy(Bucket=bucket, Key="big", UploadId=up["UploadId"], PartNumber=1,
                            CopySource=f"{bucket}/a",
                            CopySourceRange=f"bytes={len(a)}-{len(a) + 9}")  # fmt: skip
    assert not raw_s3.list_parts(Bucket=bucket, Key="big", UploadId=up["UploadId"]).get("Parts")


def test_multipart_uploads_are_bound(s3, raw_s3, bucket, tmp_path):
    path = tmp_path / "big"
    data = os.urandom(11 * MiB + 3)
    path.write_bytes(data)
    s3.upload_file(str(path), bucket, "mp")
    assert "-" in raw_s3.head_object(Bucket=bucket, Key="mp")["ETag"]  # a multipart upload
    assert header(raw_s3, bucket, "mp").bound
    assert get(s3, bucket, "mp", Range="bytes=6000000-6000100") == data[6000000:6000101]
    raw_s3.copy_object(Bucket=bucket, Key="mp2", CopySource=f"{bucket}/mp")
    with pytest.raises(WrongLocation):
        get(s3, bucket, "mp2")


def test_opt_out_objects_are_unbound_and_movable(
    s3_endpoint, keyring, raw_s3, bucket, other_bucket
):
    free = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG, bind_location=False)
    bound = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)
    data = os.urandom(2 * SEG + 1)
    free.put_object(Bucket=bucket, Key="k", Body=data)
    assert not header(raw_s3, bucket, "k").bound
    raw_s3.copy_object(Bucket=other_bucket, Key="moved", CopySource=f"{bucket}/k")
    assert get(free, other_bucket, "moved") == data
    assert get(bound, other_bucket, "moved") == data  # unflagged objects open anywhere
    stored_src = stored(raw_s3, bucket, "k")
    free.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/k")
    assert stored(raw_s3, bucket, "copied") == stored_src  # S3 copied the bytes
    bound.copy_object(Bucket=bucket, Key="rebound", CopySource=f"{bucket}/k")
    assert header(raw_s3, bucket, "rebound").bound  # a binding client binds its copies
    bound.put_object(Bucket=bucket, Key="b", Body=data)
    free.copy_object(Bucket=bucket, Key="b2", CopySource=f"{bucket}/b")  # re-sealed, unbound
    assert not header(raw_s3, bucket, "b2").bound and get(free, bucket, "b2") == data
    raw_s3.copy_object(Bucket=bucket, Key="b3", CopySource=f"{bucket}/b")
    with pytest.raises(WrongLocation):  # the opt-out writes unbound, it does not unbind
        get(free, bucket, "b3")


def test_rotation_keeps_objects_bound(s3_endpoint, raw_s3, bucket):
    kr = Keyring.generate()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
    data = {f"d/{i}": os.urandom(1000 * i + 3) for i in range(3)}
    for key, value in data.items():
        s3.put_object(Bucket=bucket, Key=key, Body=value)
    kr.rotate()
    report = rotate_objects(s3, bucket, "d/")
    assert report.ok and report.resealed == 3
    for key, value in data.items():
        h = header(raw_s3, bucket, key)
        assert h.bound and h.key_id == kr.primary.key_id
        assert get(s3, bucket, key) == value
    raw_s3.copy_object(Bucket=bucket, Key="d/moved", CopySource=f"{bucket}/d/1")
    report = rotate_objects(s3, bucket, "d/")
    assert [f["key"] for f in report.failures] == ["d/moved"]
    assert "WrongLocation" in report.failures[0]["error"]


def test_frozen_bound_vectors_use_the_s3_encoding():
    """The bound golden objects were sealed for object_location("vectors-bucket", "alice/...")
    (tests/vectors/objects/objects-v1-bound.json): the S3 encoding is frozen with them."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "vectors" / "objects" / "objects-v1-bound.json"
    for case in json.loads(path.read_text()):
        assert bytes.fromhex(case["location"]) == object_location(
            "vectors-bucket", "alice/report.bin"
        )


def _golden(name):
    import json
    from pathlib import Path

    from sealstore.keyring import Key

    path = Path(__file__).resolve().parents[2] / "vectors" / "objects" / name
    for case in json.loads(path.read_text()):
        key = Key(int(case["key_id"], 16), case["suite"], bytes.fromhex(case["material"]),
                  state="primary")  # fmt: skip
        yield case, Keyring([key], tag_size=case["tag_size"])


def test_old_unbound_golden_objects_open_and_move_over_http(
    s3_endpoint, raw_s3, bucket, other_bucket
):
    """Objects written before the binding (objects-v1.json, no flag) open through a binding
    client as they did, also after a raw copy elsewhere, whole and by range."""
    for i, (case, kr) in enumerate(_golden("objects-v1.json")):
        client = encrypt_client(make_client(s3_endpoint), kr,
                                context=bytes.fromhex(case["context"]))  # fmt: skip
        sealed, plain = bytes.fromhex(case["sealed"]), bytes.fromhex(case["plaintext"])
        raw_s3.put_object(Bucket=bucket, Key=f"old-{i}", Body=sealed)
        raw_s3.copy_object(Bucket=other_bucket, Key=f"moved-{i}", CopySource=f"{bucket}/old-{i}")
        for b, k in ((bucket, f"old-{i}"), (other_bucket, f"moved-{i}")):
            assert get(client, b, k) == plain
            assert get(client, b, k, Range="bytes=100-300") == plain[100:301]


def test_bound_golden_objects_open_only_at_their_location_over_http(s3_endpoint, raw_s3, bucket):
    """objects-v1-bound.json was sealed for vectors-bucket/alice/report.bin."""
    try:
        raw_s3.create_bucket(Bucket="vectors-bucket")
    except raw_s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    for case, kr in _golden("objects-v1-bound.json"):
        client = encrypt_client(make_client(s3_endpoint), kr,
                                context=bytes.fromhex(case["context"]))  # fmt: skip
        sealed, plain = bytes.fromhex(case["sealed"]), bytes.fromhex(case["plaintext"])
        raw_s3.put_object(Bucket="vectors-bucket", Key="alice/report.bin", Body=sealed)
        assert get(client, "vectors-bucket", "alice/report.bin") == plain
        assert get(client, "vectors-bucket", "alice/report.bin", Range="bytes=-10") == plain[-10:]
        raw_s3.put_object(Bucket=bucket, Key="alice/report.bin", Body=sealed)
        with pytest.raises(WrongLocation):
            get(client, bucket, "alice/report.bin")


def test_large_copy_memory_is_bounded(s3_endpoint_process, keyring, monkeypatch):
    """A re-sealing copy of a 32 MiB object holds a few parts, not the object (the server runs
    in another process so its copy is not counted)."""
    import tracemalloc

    monkeypatch.setattr(engine, "SINGLE_COPY", 5 * MiB)
    monkeypatch.setattr(engine, "COPY_PART", 5 * MiB)
    monkeypatch.setattr(engine, "COPY_WORKERS", 1)
    size = 32 * MiB
    client = encrypt_client(make_client(s3_endpoint_process), keyring)
    client.create_bucket(Bucket="copy-memory")
    block = os.urandom(MiB)
    client.put_object(
        Bucket="copy-memory", Key="src", Body=b"".join(block for _ in range(size // MiB))
    )
    tracemalloc.start()
    try:
        client.copy_object(Bucket="copy-memory", Key="dst", CopySource="copy-memory/src")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert client.head_object(Bucket="copy-memory", Key="dst")["ContentLength"] == size
    body = client.get_object(Bucket="copy-memory", Key="dst")["Body"]
    got, want = hashlib.sha256(), hashlib.sha256(block * (size // MiB))
    while chunk := body.read(4 * MiB):
        got.update(chunk)
    assert got.digest() == want.digest()
    print(f"copy peak {peak / MiB:.1f} MiB of a {size // MiB} MiB object")
    assert peak < 4 * 5 * MiB, peak


def test_versions_share_their_location_and_copies_take_the_asked_version(s3, raw_s3, bucket):
    """The version id is not part of the location: every version of a key opens, and a copy
    of an old version (CopySource VersionId) re-seals that version to the destination."""
    raw_s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"first")["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"second")
    assert get(s3, bucket, "k", VersionId=v1) == b"first"
    assert get(s3, bucket, "k") == b"second"
    resp = s3.copy_object(Bucket=bucket, Key="old",
                          CopySource={"Bucket": bucket, "Key": "k", "VersionId": v1})  # fmt: skip
    assert resp["CopySourceVersionId"] == v1 and resp.get("VersionId")
    assert get(s3, bucket, "old") == b"first"
    assert get(s3, bucket, "old", VersionId=resp["VersionId"]) == b"first"


def test_copy_checksum_algorithm_is_kept_or_refused(s3, raw_s3, bucket, monkeypatch):
    s3.put_object(Bucket=bucket, Key="src", Body=b"abc" * 1000)
    s3.copy_object(Bucket=bucket, Key="dst", CopySource=f"{bucket}/src", ChecksumAlgorithm="SHA256")
    head = raw_s3.head_object(Bucket=bucket, Key="dst", ChecksumMode="ENABLED")
    assert head.get("ChecksumSHA256") and get(s3, bucket, "dst") == b"abc" * 1000
    monkeypatch.setattr(engine, "SINGLE_COPY", 100)  # a multipart copy: refused, not dropped
    with pytest.raises(UnsupportedOperation, match="ChecksumAlgorithm"):
        s3.copy_object(
            Bucket=bucket, Key="x", CopySource=f"{bucket}/src", ChecksumAlgorithm="SHA256"
        )
    assert "Contents" not in raw_s3.list_objects_v2(Bucket=bucket, Prefix="x")


def test_cli_rotate_binds_unless_told_not_to(s3_endpoint, raw_s3, bucket, tmp_path):
    """``sealstore s3 rotate`` re-seals bound to where objects live; ``--no-bind-location``
    re-seals them unbound (applications that move objects themselves)."""
    from sealstore.cli import main
    from sealstore.config import load_config

    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    assert main(["-c", str(config), "keys", "init"]) == 0
    kr = load_config(str(config)).load_keyring()
    free = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG, bind_location=False)
    for key in ("a/1", "b/1"):
        free.put_object(Bucket=bucket, Key=key, Body=key.encode() * 100)
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    base = ["-c", str(config), "s3", "rotate", "--endpoint-url", s3_endpoint,
            "--region", "us-east-1", "--json"]  # fmt: skip
    assert main([*base, f"s3://{bucket}/a", "--checkpoint", str(tmp_path / "a"),
                 "--no-bind-location"]) == 0  # fmt: skip
    assert main([*base, f"s3://{bucket}/b", "--checkpoint", str(tmp_path / "b")]) == 0
    new = load_config(str(config)).load_keyring()
    for key, bound in (("a/1", False), ("b/1", True)):
        h = header(raw_s3, bucket, key)
        assert (h.key_id, h.bound) == (new.primary.key_id, bound), key
        assert get(encrypt_client(make_client(s3_endpoint), new), bucket, key) == key.encode() * 100


def test_download_file_of_a_moved_object_fails(s3, raw_s3, bucket, tmp_path):
    """The managed download (parallel ranged GETs) raises the same error and leaves no file."""
    s3.put_object(Bucket=bucket, Key="src", Body=os.urandom(9 * MiB))
    raw_s3.copy_object(Bucket=bucket, Key="moved", CopySource=f"{bucket}/src")
    out = tmp_path / "out.bin"
    with pytest.raises(WrongLocation):
        s3.download_file(bucket, "moved", str(out))
    assert not out.exists()
    with open(tmp_path / "fileobj", "wb") as f, pytest.raises(WrongLocation):
        s3.download_fileobj(bucket, "moved", f)
    assert (tmp_path / "fileobj").stat().st_size == 0  # nothing of the object was written


def test_resource_copies_are_resealed(s3, raw_s3, bucket, other_bucket):
    """boto3's resource API copies through the same client methods: Object.copy_from
    (CopyObject) and Bucket.copy (the managed copy) give destinations bound to themselves."""
    import boto3

    resource = boto3.resource("s3", region_name="us-east-1")
    resource.meta.client = s3
    s3.put_object(Bucket=bucket, Key="src", Body=b"resource data")
    resource.Object(other_bucket, "from").copy_from(CopySource={"Bucket": bucket, "Key": "src"})
    resource.Bucket(other_bucket).copy({"Bucket": bucket, "Key": "src"}, "managed")
    for key in ("from", "managed"):
        assert header(raw_s3, other_bucket, key).bound
        assert get(s3, other_bucket, key) == b"resource data"


def test_copy_onto_itself(s3_endpoint, keyring, s3, raw_s3, bucket):
    """A bound object copied onto its own key (new metadata) is S3's copy of the same bytes;
    an unbound one copied onto itself by a binding client is re-sealed, bound."""
    s3.put_object(Bucket=bucket, Key="b", Body=b"bound")
    before = stored(raw_s3, bucket, "b")
    s3.copy_object(Bucket=bucket, Key="b", CopySource=f"{bucket}/b",
                   MetadataDirective="REPLACE", Metadata={"x": "1"})  # fmt: skip
    assert stored(raw_s3, bucket, "b") == before and get(s3, bucket, "b") == b"bound"
    assert raw_s3.head_object(Bucket=bucket, Key="b")["Metadata"]["x"] == "1"
    free = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG, bind_location=False)
    free.put_object(Bucket=bucket, Key="u", Body=b"unbound")
    s3.copy_object(Bucket=bucket, Key="u", CopySource=f"{bucket}/u",
                   MetadataDirective="REPLACE", Metadata={"x": "2"})  # fmt: skip
    assert header(raw_s3, bucket, "u").bound and get(s3, bucket, "u") == b"unbound"


def test_golden_objects_open_through_the_engine_over_http(s3_endpoint, raw_s3, bucket):
    """The object engine (S3Store + ObjectSealing) opens the frozen objects as the handlers do:
    unbound ones anywhere, bound ones only at vectors-bucket/alice/report.bin, whole and by
    range, with no sealstore metadata (the body's header serves)."""
    from sealstore.adapters.objects import ObjectSealing
    from sealstore.adapters.s3.store import S3Store

    store = S3Store(raw_s3)
    try:
        raw_s3.create_bucket(Bucket="vectors-bucket")
    except raw_s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    for name, where in (("objects-v1.json", (bucket, "old")),
                        ("objects-v1-bound.json", ("vectors-bucket", "alice/report.bin"))):  # fmt: skip
        for case, kr in _golden(name):
            sealing = ObjectSealing(kr, context=bytes.fromhex(case["context"]))
            sealed, plain = bytes.fromhex(case["sealed"]), bytes.fromhex(case["plaintext"])
            raw_s3.put_object(Bucket=where[0], Key=where[1], Body=sealed)
            assert sealing.open(store, *where).read() == plain
            assert sealing.open(store, *where, first=100, last=300).read() == plain[100:301]
            assert sealing.open(store, *where, suffix=10).read() == plain[-10:]
            raw_s3.put_object(Bucket=bucket, Key="elsewhere", Body=sealed)
            if name == "objects-v1-bound.json":
                with pytest.raises(WrongLocation):
                    sealing.open(store, bucket, "elsewhere")
            else:
                assert sealing.open(store, bucket, "elsewhere").read() == plain
