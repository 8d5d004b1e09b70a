"""Managed transfers and multipart uploads through an encrypted client (moto server over HTTP):
parts sealed independently in worker threads, parallel ranged downloads, bounded memory."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import tracemalloc

import pytest
from boto3.s3.transfer import TransferConfig
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.transfer import part_size
from sealstore.errors import UnsupportedOperation
from sealstore.keyring import Keyring

MiB = 1 << 20


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", 32)


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring)


class NonSeekable:
    """A readable stream of unknown length."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, n=-1):
        return self._f.read(n)


def parts_of(raw_s3, bucket, key) -> int:
    etag = raw_s3.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    return int(etag.split("-")[1]) if "-" in etag else 1


def test_part_size():
    seg = S.DEFAULT_SEGMENT_SIZE
    assert part_size(None, 8 * MiB, seg) == 8 * MiB
    assert part_size(None, 1, seg) == 5 * MiB  # S3's minimum, whole segments
    assert part_size(None, 6 * MiB + 1, seg) == 6 * MiB + seg
    assert part_size(200_000 * MiB, 8 * MiB, seg) == 20 * MiB  # at most 10,000 parts
    with pytest.raises(UnsupportedOperation):
        part_size(10_000 * (5 << 30) + 1, 8 * MiB, seg)


class TestManagedTransfers:
    def test_upload_file_parts_sealed_in_worker_threads(self, s3, raw_s3, bucket, tmp_path):
        data = os.urandom(21 * MiB + 12345)
        src = tmp_path / "src.bin"
        src.write_bytes(data)
        threads = []
        s3.meta.events.register(
            "before-send.s3.UploadPart",
            lambda **kw: threads.append(threading.get_ident()),
        )
        config = TransferConfig(
            multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4
        )
        seen = []
        s3.upload_file(str(src), bucket, "big", Config=config, Callback=seen.append)
        assert sum(seen) == len(data)  # progress in plaintext bytes, signing passes not counted
        assert parts_of(raw_s3, bucket, "big") == 5
        assert threads and threading.get_ident() not in threads  # sealed where it was sent
        meta = raw_s3.head_object(Bucket=bucket, Key="big")["Metadata"]
        assert meta["sealstore-length"] == str(len(data)) and "sealstore-part-size" not in meta
        sealed = raw_s3.get_object(Bucket=bucket, Key="big")["Body"].read()
        assert len(sealed) == S.sealed_size(len(data), S.DEFAULT_SEGMENT_SIZE, 32)
        out = tmp_path / "out.bin"
        s3.download_file(bucket, "big", str(out), Config=config)  # parallel ranged GETs
        assert out.read_bytes() == data
        assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == data

    @pytest.mark.parametrize("size", [0, 100, 5 * MiB - 1])
    def test_small_uploads_use_put_object(self, s3, raw_s3, bucket, tmp_path, size):
        data = os.urandom(size)
        src = tmp_path / "small.bin"
        src.write_bytes(data)
        s3.upload_file(str(src), bucket, "small")
        out = tmp_path / "small.out"
        s3.download_file(bucket, "small", str(out))
        assert out.read_bytes() == data
        assert parts_of(raw_s3, bucket, "small") == 1

    @pytest.mark.parametrize("size", [10 * MiB, 10 * MiB + 1, 12 * MiB + 3])
    def test_upload_fileobj_unknown_length(self, s3, raw_s3, bucket, size):
        """Parts are sealed as they come; when the last part was full, completing the upload
        adds one part holding only the final (empty) segment."""
        data = os.urandom(size)
        config = TransferConfig(
            multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=3
        )
        s3.upload_fileobj(NonSeekable(data), bucket, "k", Config=config)
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data
        assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == size
        assert "sealstore-length" not in raw_s3.head_object(Bucket=bucket, Key="k")["Metadata"]
        assert parts_of(raw_s3, bucket, "k") == -(-size // (5 * MiB)) + (size % (5 * MiB) == 0)
        buf = io.BytesIO()
        s3.download_fileobj(bucket, "k", buf, Config=config)
        assert buf.getvalue() == data

    def test_upload_fileobj_seekable(self, s3, bucket):
        data = os.urandom(11 * MiB)
        config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
        s3.upload_fileobj(
            io.BytesIO(data),
            bucket,
            "k",
            Config=config,
            ExtraArgs={"Metadata": {"x": "y"}},
        )
        resp = s3.get_object(Bucket=bucket, Key="k")
        assert resp["Metadata"]["x"] == "y" and resp["Body"].read() == data


class TestLowLevelMultipart:
    P = 5 * MiB

    def test_parts_in_any_order(self, s3, bucket):
        data = os.urandom(2 * self.P + 1000)
        up = s3.create_multipart_upload(
            Bucket=bucket, Key="k", Metadata={"sealstore-part-size": str(self.P)}
        )
        etags = {}
        for number in (3, 1, 2):
            chunk = data[(number - 1) * self.P : number * self.P]
            r = s3.upload_part(
                Bucket=bucket,
                Key="k",
                UploadId=up["UploadId"],
                PartNumber=number,
                Body=chunk,
            )
            etags[number] = r["ETag"]
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="k",
            UploadId=up["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 3)]},
        )
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data
        assert (
            s3.get_object(Bucket=bucket, Key="k", Range=f"bytes={self.P - 5}-{self.P + 5}")[
                "Body"
            ].read()
            == (data[self.P - 5 : self.P + 6])
        )

    def test_needs_part_size(self, s3, bucket):
        with pytest.raises(UnsupportedOperation):
            s3.create_multipart_upload(Bucket=bucket, Key="k")
        with pytest.raises(UnsupportedOperation):
            s3.create_multipart_upload(
                Bucket=bucket, Key="k", Metadata={"sealstore-part-size": "5000001"}
            )

    def test_bad_part_layout_refused(self, s3, bucket):
        up = s3.create_multipart_upload(
            Bucket=bucket,
            Key="k",
            Metadata={
                "sealstore-part-size": str(self.P),
                "sealstore-length": str(2 * self.P),
            },
        )
        uid = up["UploadId"]
        with pytest.raises(UnsupportedOperation):  # larger than the part size
            s3.upload_part(
                Bucket=bucket,
                Key="k",
                UploadId=uid,
                PartNumber=1,
                Body=b"x" * (self.P + 1),
            )
        with pytest.raises(UnsupportedOperation):  # short, but not the end of the declared length
            s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=b"x" * 10)
        r = s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=2, Body=b"x" * self.P)
        with pytest.raises(UnsupportedOperation):  # part 1 missing
            s3.complete_multipart_upload(
                Bucket=bucket,
                Key="k",
                UploadId=uid,
                MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": r["ETag"]}]},
            )
        s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=uid)
        with pytest.raises(UnsupportedOperation):  # forgotten after the abort
            s3.upload_part(Bucket=bucket, Key="k", UploadId=uid, PartNumber=1, Body=b"x")

    def test_unknown_upload(self, s3, raw_s3, bucket):
        up = raw_s3.create_multipart_upload(Bucket=bucket, Key="k")
        with pytest.raises(UnsupportedOperation):
            s3.upload_part(Bucket=bucket, Key="k", UploadId=up["UploadId"], PartNumber=1, Body=b"x")


def test_100_mib_multipart_upload(s3, raw_s3, bucket, tmp_path):
    size = 100 * MiB
    block = os.urandom(MiB)
    src = tmp_path / "100m.bin"
    digest = hashlib.sha256()
    with open(src, "wb") as f:
        for i in range(size // MiB):
            chunk = bytes([i & 0xFF]) + block[1:]
            f.write(chunk)
            digest.update(chunk)
    config = TransferConfig(
        multipart_threshold=8 * MiB, multipart_chunksize=16 * MiB, max_concurrency=4
    )
    s3.upload_file(str(src), bucket, "100m", Config=config)
    assert parts_of(raw_s3, bucket, "100m") == 7
    assert s3.head_object(Bucket=bucket, Key="100m")["ContentLength"] == size
    out = tmp_path / "100m.out"
    s3.download_file(bucket, "100m", str(out), Config=config)
    check = hashlib.sha256()
    with open(out, "rb") as f:
        while chunk := f.read(4 * MiB):
            check.update(chunk)
    assert check.digest() == digest.digest()


def test_peak_memory_is_bounded(s3_endpoint_process, keyring, tmp_path):
    """Putting and getting a 64 MiB object holds a few segments per stream, not the object.

    The server runs in another process so its copy of the object is not counted."""
    size = 64 * MiB
    client = encrypt_client(make_client(s3_endpoint_process), keyring)
    client.create_bucket(Bucket="memory")
    src = tmp_path / "src.bin"
    block = os.urandom(MiB)
    with open(src, "wb") as f:
        f.writelines(block for _ in range(size // MiB))
    tracemalloc.start()
    try:
        with open(src, "rb") as f:
            client.put_object(Bucket="memory", Key="k", Body=f)
        put_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        body = client.get_object(Bucket="memory", Key="k")["Body"]
        total = 0
        for chunk in body.iter_chunks(256 << 10):
            assert chunk == block[total % MiB : total % MiB + len(chunk)]
            total += len(chunk)
        get_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == size
    print(
        f"peak put {put_peak / MiB:.1f} MiB, get {get_peak / MiB:.1f} MiB of a {size // MiB} MiB object"
    )
    assert put_peak < size // 4, put_peak
    assert get_peak < size // 4, get_peak


def test_copy_above_the_single_request_limit_is_a_multipart_copy(
    s3_endpoint, keyring, raw_s3, bucket, monkeypatch
):
    """client.copy of an unbound sealed object (bind_location=False) larger than CopyObject
    takes (5 GiB, scaled down to 6 MiB here): the sealed bytes are copied in order, byte for
    byte, each range conditional on the source's ETag; metadata and headers follow CopyObject's
    rules.  (Bound objects are re-sealed instead: test_s3_binding.py.)"""
    from sealstore.adapters.s3 import large

    s3 = encrypt_client(make_client(s3_endpoint), keyring, bind_location=False)
    monkeypatch.setattr(large, "MAX_SINGLE_REQUEST", 6 * MiB)
    monkeypatch.setattr(large, "COPY_PART", 5 * MiB)
    data = os.urandom(12 * MiB + 5)
    s3.put_object(Bucket=bucket, Key="src", Body=data, Metadata={"a": "1"}, ContentType="x/y")
    src = raw_s3.head_object(Bucket=bucket, Key="src")
    sealed = raw_s3.get_object(Bucket=bucket, Key="src")["Body"].read()
    seen = []
    with s3.sealstore.raw() as raw:
        raw.meta.events.register(
            "before-call.s3.UploadPartCopy", lambda params, **kw: seen.append(params)
        )
    done = []
    s3.copy({"Bucket": bucket, "Key": "src"}, bucket, "dst", Callback=done.append)
    head = raw_s3.head_object(Bucket=bucket, Key="dst")
    assert head["ETag"].endswith('-3"') and done == [len(sealed)]
    assert raw_s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == sealed
    assert head["Metadata"] == src["Metadata"] and head["ContentType"] == "x/y"
    ranged = s3.get_object(Bucket=bucket, Key="dst", Range="bytes=7000000-7000009")["Body"].read()
    assert ranged == data[7000000:7000010]
    assert {p["headers"]["x-amz-copy-source-if-match"] for p in seen} == {src["ETag"]}

    s3.copy({"Bucket": bucket, "Key": "src"}, bucket, "replaced",
            ExtraArgs={"MetadataDirective": "REPLACE", "Metadata": {"b": "2"}, "ContentType": "a/b"})  # fmt: skip
    head = raw_s3.head_object(Bucket=bucket, Key="replaced")
    assert head["Metadata"]["b"] == "2" and "a" not in head["Metadata"]
    assert head["ContentType"] == "a/b"
    assert s3.get_object(Bucket=bucket, Key="replaced")["Body"].read() == data
    with pytest.raises(UnsupportedOperation, match="TaggingDirective"):
        s3.copy(
            {"Bucket": bucket, "Key": "src"}, bucket, "x", ExtraArgs={"TaggingDirective": "COPY"}
        )
    with pytest.raises(UnsupportedOperation):  # reserved sealstore metadata is refused, as ever
        s3.copy({"Bucket": bucket, "Key": "src"}, bucket, "x",
                ExtraArgs={"MetadataDirective": "REPLACE", "Metadata": {"sealstore-key-id": "0"}})  # fmt: skip
    assert not raw_s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
