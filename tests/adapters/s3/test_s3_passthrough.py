"""``encrypt_client(..., passthrough=True)`` (issue 27): an object that is not sealed comes back
as stored, so its answer must be told apart from an opened one: ``response["SealstoreSealed"]``
(GetObject and HeadObject), ``response["Body"].sealstore_sealed``, and one WARNING record per
passthrough read naming the object (never its contents).  Opened objects say True."""

from __future__ import annotations

import logging

import pytest
from fixtures_s3 import make_client

from sealstore.adapters.s3 import encrypt_client
from sealstore.errors import NotSealedObject
from sealstore.keyring import Keyring

SEG = 1024
PLANTED = b"PLANTED-BY-SOMEONE-WITH-WRITE-ACCESS " * 100


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", 32)


@pytest.fixture
def client(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG, passthrough=True)


def warnings_for(caplog, key: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name.startswith("sealstore.adapters.s3")
        and f"/{key}:" in r.getMessage()
    ]  # fmt: skip


@pytest.mark.parametrize("rng", [None, "bytes=10-99", "bytes=3000-", "bytes=-5"])
def test_a_planted_plaintext_object_is_marked_and_warned(client, raw_s3, bucket, caplog, rng):
    raw_s3.put_object(Bucket=bucket, Key="planted", Body=PLANTED)
    caplog.set_level(logging.DEBUG, logger="sealstore")
    kw = {"Range": rng} if rng else {}
    resp = client.get_object(Bucket=bucket, Key="planted", **kw)
    data = resp["Body"].read()
    want = {None: PLANTED, "bytes=10-99": PLANTED[10:100], "bytes=3000-": PLANTED[3000:],
            "bytes=-5": PLANTED[-5:]}[rng]  # fmt: skip
    assert data == want
    assert resp["SealstoreSealed"] is False
    assert resp["Body"].sealstore_sealed is False
    (record,) = warnings_for(caplog, "planted")
    message = record.getMessage()
    assert f"{bucket}/planted" in message and "NOT authenticated" in message
    assert b"PLANTED" not in message.encode()
    assert head_sealed(client, bucket, "planted") is False


def head_sealed(client, bucket, key):
    return client.head_object(Bucket=bucket, Key=key)["SealstoreSealed"]


@pytest.mark.parametrize("rng", [None, "bytes=10-99"])
def test_sealed_objects_say_so_and_log_no_warning(client, bucket, caplog, rng):
    client.put_object(Bucket=bucket, Key="sealed", Body=PLANTED)
    caplog.set_level(logging.DEBUG, logger="sealstore")
    kw = {"Range": rng} if rng else {}
    resp = client.get_object(Bucket=bucket, Key="sealed", **kw)
    assert resp["Body"].read() == (PLANTED[10:100] if rng else PLANTED)
    assert resp["SealstoreSealed"] is True and resp["Body"].sealstore_sealed is True
    assert head_sealed(client, bucket, "sealed") is True
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_empty_planted_object(client, raw_s3, bucket, caplog):
    raw_s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    caplog.set_level(logging.WARNING, logger="sealstore")
    resp = client.get_object(Bucket=bucket, Key="empty")
    assert resp["Body"].read() == b"" and resp["SealstoreSealed"] is False
    assert len(warnings_for(caplog, "empty")) == 1


def test_without_passthrough_nothing_unsealed_is_returned(s3_endpoint, keyring, raw_s3, bucket):
    strict = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)
    raw_s3.put_object(Bucket=bucket, Key="planted", Body=PLANTED)
    with pytest.raises(NotSealedObject):
        strict.get_object(Bucket=bucket, Key="planted")
    with pytest.raises(NotSealedObject):
        strict.head_object(Bucket=bucket, Key="planted")


def test_upload_part_copy_of_a_planted_source_warns(client, raw_s3, bucket, caplog):
    raw_s3.put_object(Bucket=bucket, Key="planted", Body=PLANTED)
    caplog.set_level(logging.WARNING, logger="sealstore")
    part = 5 * 1024 * 1024
    up = client.create_multipart_upload(Bucket=bucket, Key="dst",
                                        Metadata={"sealstore-part-size": str(part)})  # fmt: skip
    p1 = client.upload_part_copy(Bucket=bucket, Key="dst", UploadId=up["UploadId"], PartNumber=1,
                                 CopySource=f"{bucket}/planted")  # fmt: skip
    client.complete_multipart_upload(
        Bucket=bucket, Key="dst", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}]},
    )  # fmt: skip
    # the source read through the engine (its open) and the copy itself both say so
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith(f"{bucket}/planted: not a sealstore object") for m in messages)
    copy = [m for m in messages if m.startswith(f"UploadPartCopy {bucket}/planted -> ")]
    assert len(copy) == 1 and "NOT authenticated" in copy[0]
    resp = client.get_object(Bucket=bucket, Key="dst")
    assert resp["Body"].read() == PLANTED and resp["SealstoreSealed"] is True
