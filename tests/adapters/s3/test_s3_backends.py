"""The S3 adapter's core scenarios on two independent S3 implementations, moto's server and
LocalStack's S3 provider (``s3_backend`` in fixtures_s3.py), over HTTP on 127.0.0.1: put/get,
ranges, low-level multipart (every part full, the case LocalStack refused at completion),
managed transfers, copies, tampering and rotation.  Each test reads the stored bytes with a
plain client and shows the plaintext is not there."""

from __future__ import annotations

import io
import os
import uuid
from dataclasses import dataclass

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.rotate import rotate_objects
from sealstore.errors import InvalidTag, WrongLocation
from sealstore.keyring import Keyring

SEG = 4096
TAG = 32
MiB = 1 << 20
P = 5 * MiB  # the smallest part S3 accepts
MARK = b"PLAINTEXT"


def plaintext(n: int, seed: int = 0) -> bytes:
    """``n`` bytes of numbered lines (every line differs, each holds MARK)."""
    lines = (b"%s %07d %07d\n" % (MARK, seed, i) for i in range(n // 26 + 1))
    return b"".join(lines)[:n]


@dataclass
class Backend:
    name: str
    url: str
    raw: object  # a plain client: sealed bytes as stored
    bucket: str

    def client(self, keyring, **kw):
        return encrypt_client(make_client(self.url), keyring, segment_size=SEG, **kw)

    def stored(self, key: str) -> bytes:
        return self.raw.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def assert_sealed(self, key: str, data: bytes) -> bytes:
        """The stored bytes of ``key``: a sealed object of ``data``, holding none of it."""
        sealed = self.stored(key)
        assert sealed.startswith(b"SSOB")
        assert len(sealed) == S.sealed_size(len(data), SEG, TAG)
        if MARK in data:
            assert MARK not in sealed
        return sealed


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", TAG)


@pytest.fixture
def backend(s3_backend):
    name, url = s3_backend
    raw = make_client(url)
    bucket = f"t-{uuid.uuid4().hex[:20]}"
    raw.create_bucket(Bucket=bucket)
    return Backend(name, url, raw, bucket)


def get(s3, bucket, key, **kw) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


@pytest.mark.parametrize("n", [0, 1, SEG, 3 * SEG + 5, MiB + 3])
def test_put_get(backend, keyring, n):
    s3, data = backend.client(keyring), plaintext(n)
    s3.put_object(Bucket=backend.bucket, Key="k", Body=data, Metadata={"app": "x"})
    resp = s3.get_object(Bucket=backend.bucket, Key="k")
    assert (resp["ContentLength"], resp["Body"].read()) == (n, data)
    assert s3.head_object(Bucket=backend.bucket, Key="k")["ContentLength"] == n
    backend.assert_sealed("k", data)
    assert backend.raw.head_object(Bucket=backend.bucket, Key="k")["Metadata"]["app"] == "x"


def test_ranges_answer_as_for_a_plain_object(backend, keyring):
    s3, n = backend.client(keyring), 5 * SEG + 100
    data = plaintext(n)
    s3.put_object(Bucket=backend.bucket, Key="sealed", Body=data)
    backend.raw.put_object(Bucket=backend.bucket, Key="plain", Body=data)
    for rng in ("bytes=0-0", "bytes=5-4100", f"bytes={SEG - 1}-{SEG}", "bytes=-100",
                f"bytes=-{n + 5}", "bytes=10-", f"bytes={n - 1}-", f"bytes=100-{n + 50}"):  # fmt: skip
        want = backend.raw.get_object(Bucket=backend.bucket, Key="plain", Range=rng)
        got = s3.get_object(Bucket=backend.bucket, Key="sealed", Range=rng)
        assert got["Body"].read() == want["Body"].read(), rng
        assert got["ContentRange"] == want["ContentRange"], rng
        assert got["ContentLength"] == want["ContentLength"], rng
    backend.assert_sealed("sealed", data)


def _multipart(s3, bucket, data, *, checksum=None):
    """A low-level multipart upload of ``data`` in parts of P, completed; returns the parts."""
    algo = {"ChecksumAlgorithm": checksum} if checksum else {}
    up = s3.create_multipart_upload(
        Bucket=bucket, Key="k", Metadata={"sealstore-part-size": str(P)}, **algo
    )
    parts = []
    for number, offset in enumerate(range(0, len(data), P), 1):
        r = s3.upload_part(Bucket=bucket, Key="k", UploadId=up["UploadId"], PartNumber=number,
                           Body=data[offset : offset + P], **algo)  # fmt: skip
        part = {"PartNumber": number, "ETag": r["ETag"]}
        if checksum:
            part[f"Checksum{checksum}"] = r[f"Checksum{checksum}"]
        parts.append(part)
    s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=up["UploadId"], MultipartUpload={"Parts": parts}
    )
    return parts


@pytest.mark.parametrize("checksum", [None, "CRC32", "SHA256"])
@pytest.mark.parametrize("size", [2 * P, 2 * P + 1000], ids=["all-full", "short-last"])
def test_low_level_multipart(backend, keyring, size, checksum):
    """Every part full: sealstore adds a last part holding the final segment, listed with the
    checksum the upload uses and no other (LocalStack refused a CRC32 the upload lacked)."""
    s3, data = backend.client(keyring), plaintext(size)
    _multipart(s3, backend.bucket, data, checksum=checksum)
    head = backend.raw.head_object(Bucket=backend.bucket, Key="k")
    assert head["ETag"].endswith(f'-{-(-size // P) + (size % P == 0)}"')  # + the final part
    assert get(s3, backend.bucket, "k") == data
    assert get(s3, backend.bucket, "k", Range=f"bytes={P - 5}-{P + 5}") == data[P - 5 : P + 6]
    backend.assert_sealed("k", data)
    assert not backend.raw.list_multipart_uploads(Bucket=backend.bucket).get("Uploads")


class Unsized(io.RawIOBase):
    """A readable stream of unknown length (no seek, no tell)."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        return self._f.readinto(b)


@pytest.mark.parametrize("size", [2 * P, 2 * P + 12345])
def test_managed_transfers(backend, keyring, tmp_path, size):
    """upload_file / upload_fileobj in parallel parts, download_file in parallel ranges.  A
    stream of unknown length whose parts are all full gets the extra final part."""
    s3, data = backend.client(keyring), plaintext(size)
    config = TransferConfig(multipart_threshold=P, multipart_chunksize=P, max_concurrency=3)
    src, out = tmp_path / "src", tmp_path / "out"
    src.write_bytes(data)
    s3.upload_file(str(src), backend.bucket, "file", Config=config)
    s3.upload_fileobj(io.BytesIO(data), backend.bucket, "sized", Config=config)
    s3.upload_fileobj(Unsized(data), backend.bucket, "unsized", Config=config)
    parts = -(-size // P)
    for key, n in (("file", parts), ("sized", parts), ("unsized", parts + (size % P == 0))):
        etag = backend.raw.head_object(Bucket=backend.bucket, Key=key)["ETag"]
        assert etag.endswith(f'-{n}"'), key
        backend.assert_sealed(key, data)
        s3.download_file(backend.bucket, key, str(out), Config=config)
        assert out.read_bytes() == data, key


def test_copies(backend, keyring):
    s3, data = backend.client(keyring), plaintext(3 * SEG + 7)
    s3.put_object(Bucket=backend.bucket, Key="src", Body=data, ContentType="x/y")
    sealed = backend.stored("src")
    s3.copy_object(Bucket=backend.bucket, Key="copy", CopySource=f"{backend.bucket}/src")
    s3.copy_object(Bucket=backend.bucket, Key="replaced", CopySource=f"{backend.bucket}/src",
                   MetadataDirective="REPLACE", Metadata={"n": "1"})  # fmt: skip
    s3.copy({"Bucket": backend.bucket, "Key": "src"}, backend.bucket, "managed")
    for key in ("copy", "replaced", "managed"):
        assert backend.stored(key) != sealed, key  # re-sealed: bound to the destination
        assert MARK not in backend.stored(key), key
        assert get(s3, backend.bucket, key) == data, key
    backend.raw.copy_object(Bucket=backend.bucket, Key="moved", CopySource=f"{backend.bucket}/src")
    with pytest.raises(WrongLocation):  # a copy by another tool keeps the source's binding
        get(s3, backend.bucket, "moved")
    meta = backend.raw.head_object(Bucket=backend.bucket, Key="replaced")["Metadata"]
    assert meta["n"] == "1" and meta["sealstore-length"] == str(len(data))


def test_tampered_byte_raises(backend, keyring):
    s3, data = backend.client(keyring), plaintext(3 * SEG)
    s3.put_object(Bucket=backend.bucket, Key="k", Body=data)
    head = backend.raw.head_object(Bucket=backend.bucket, Key="k")
    sealed = bytearray(backend.stored("k"))
    sealed[S.HEADER_SIZE + SEG + TAG + 10] ^= 1  # in the second segment
    backend.raw.put_object(
        Bucket=backend.bucket, Key="k", Body=bytes(sealed), Metadata=head["Metadata"]
    )
    with pytest.raises(InvalidTag):
        get(s3, backend.bucket, "k")
    with pytest.raises(InvalidTag):
        get(s3, backend.bucket, "k", Range=f"bytes={SEG}-{SEG + 1}")


def test_rotate(backend):
    """Re-sealed under the new primary, never over a concurrent write (IfMatch is honoured)."""
    kr = Keyring.generate()
    s3 = backend.client(kr)
    contents = {f"d/{i}": plaintext(1000 * i + 7, i) for i in range(3)}
    for key, data in contents.items():
        s3.put_object(Bucket=backend.bucket, Key=key, Body=data)
    kr.rotate()
    stale = backend.raw.head_object(Bucket=backend.bucket, Key="d/0")["ETag"]
    report = rotate_objects(s3, backend.bucket, "d/")
    assert (report.resealed, report.failures, report.conflicts) == (3, [], [])
    for key, data in contents.items():
        meta = backend.raw.head_object(Bucket=backend.bucket, Key=key)["Metadata"]
        assert meta["sealstore-key-id"] == kr.primary.id_hex
        assert get(s3, backend.bucket, key) == data
        backend.assert_sealed(key, data)
    with pytest.raises(ClientError) as err:  # the condition rotation relies on
        s3.put_object(Bucket=backend.bucket, Key="d/0", Body=b"late", IfMatch=stale)
    assert err.value.response["Error"]["Code"] in ("PreconditionFailed", "412")
    assert get(s3, backend.bucket, "d/0") == contents["d/0"]


def _account(backend: Backend) -> str:
    """The account owning the backend's buckets (LocalStack runs no STS here: its default)."""
    import boto3

    if backend.name == "localstack":
        return "000000000000"
    url = backend.url

    sts = boto3.client("sts", endpoint_url=url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    return str(sts.get_caller_identity()["Account"])


@pytest.mark.parametrize("size", [3 * SEG + 7, 2 * P + 100])  # one request; parts (scaled down)
def test_copies_with_sse_c_and_request_extras(backend, keyring, monkeypatch, size):
    """SSE-C keys of the source and of the destination, RequestPayer and the expected owners
    reach every request of a re-sealing copy (the object engine's, with the store's options)
    and of a part copy; the answer repeats the destination's SSE-C fields."""
    from sealstore.adapters.objects import engine

    monkeypatch.setattr(engine, "SINGLE_COPY", P)
    monkeypatch.setattr(engine, "COPY_PART", P)
    s3, data, b = backend.client(keyring), plaintext(size), backend.bucket
    src = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32).hex()[:32]}
    dst = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32).hex()[:32]}
    source = {f"CopySource{k}": v for k, v in src.items()}
    account = _account(backend)
    extras = {"RequestPayer": "requester", "ExpectedBucketOwner": account,
              "ExpectedSourceBucketOwner": account}  # fmt: skip
    s3.put_object(Bucket=b, Key="src", Body=data, **src)
    resp = s3.copy_object(Bucket=b, Key="dst", CopySource=f"{b}/src", **source, **dst, **extras)
    assert resp["CopyObjectResult"]["ETag"]
    assert get(s3, b, "dst", **dst) == data
    sealed = backend.raw.get_object(Bucket=b, Key="dst", **dst)["Body"].read()
    assert sealed.startswith(b"SSOB") and MARK not in sealed
    if backend.name == "localstack" and size < P:  # moto (5.2) answers no SSE-C fields, nor
        # does S3's CompleteMultipartUpload (a copy in parts)
        assert resp["SSECustomerAlgorithm"] == "AES256" and resp["SSECustomerKeyMD5"]
    # a part copy: the source read with its key, the part sealed and sent with the upload's
    up = s3.create_multipart_upload(Bucket=b, Key="parts", **dst,
                                    Metadata={"sealstore-part-size": str(P)})  # fmt: skip
    last = min(size, P) - 1
    part = s3.upload_part_copy(Bucket=b, Key="parts", UploadId=up["UploadId"], PartNumber=1,
                               CopySource=f"{b}/src", CopySourceRange=f"bytes=0-{last}",
                               RequestPayer="requester", **source, **dst)  # fmt: skip
    s3.complete_multipart_upload(Bucket=b, Key="parts", UploadId=up["UploadId"], **dst,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]})  # fmt: skip
    assert get(s3, b, "parts", **dst) == data[: last + 1]
    assert not backend.raw.list_multipart_uploads(Bucket=b).get("Uploads")
