"""Objects sealed with the AEGIS-256 suites through the S3 client (moto's server over HTTP):
put/get of every size class, ranged reads, multipart uploads (low level and managed), the stored
header and metadata, tampering, and a bucket whose keyring moves from AEGIS-128X4 to AEGIS-256X4
keys (old objects keep opening, new ones are AEGIS-256X4)."""

from __future__ import annotations

import os

import pytest
from boto3.s3.transfer import TransferConfig
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client
from sealstore.errors import InvalidTag
from sealstore.keyring import Keyring

SEG = 4096
MiB = 1 << 20
SUITES = [("AEGIS-256", 16), ("AEGIS-256X2", 32), ("AEGIS-256X4", 32)]


@pytest.fixture(params=SUITES, ids=lambda p: f"{p[0]}-tag{p[1]}")
def sealing(request, s3_endpoint):
    suite, tag = request.param
    ring = Keyring.generate(suite, tag)
    return encrypt_client(make_client(s3_endpoint), ring, segment_size=SEG), ring, suite, tag


@pytest.mark.parametrize("n", [0, 1, SEG - 1, SEG, SEG + 1, 5 * SEG + 77])
def test_round_trip_and_stored_form(sealing, raw_s3, bucket, n):
    s3, _, suite, tag = sealing
    data = os.urandom(n)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data
    assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == n
    stored = raw_s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    header = S.parse_object_header(stored)
    assert (str(header.suite), header.tag_size, header.segment_size) == (suite, tag, SEG)
    assert len(stored) == S.sealed_size(n, SEG, tag)
    meta = raw_s3.head_object(Bucket=bucket, Key="k")["Metadata"]
    assert meta["sealstore-suite"] == suite
    if n >= 16:
        assert data[:16] not in stored


def test_ranged_reads(sealing, bucket):
    s3 = sealing[0]
    data = os.urandom(7 * SEG + 123)
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    for first, last in [(0, 0), (SEG - 1, SEG), (3 * SEG + 5, 6 * SEG), (len(data) - 10, None)]:
        text = f"bytes={first}-" + ("" if last is None else str(last))
        want = data[first : None if last is None else last + 1]
        assert s3.get_object(Bucket=bucket, Key="r", Range=text)["Body"].read() == want


def test_tampered_segment_is_refused(sealing, raw_s3, bucket):
    s3 = sealing[0]
    s3.put_object(Bucket=bucket, Key="t", Body=os.urandom(3 * SEG))
    stored = bytearray(raw_s3.get_object(Bucket=bucket, Key="t")["Body"].read())
    stored[S.HEADER_SIZE + SEG + 3] ^= 0x01
    raw_s3.put_object(Bucket=bucket, Key="t", Body=bytes(stored), Metadata={})
    with pytest.raises(InvalidTag):
        s3.get_object(Bucket=bucket, Key="t")["Body"].read()


def test_multipart_low_level_and_managed(s3_endpoint, raw_s3, bucket, tmp_path):
    ring = Keyring.generate("AEGIS-256X4", 32)
    s3 = encrypt_client(make_client(s3_endpoint), ring)
    part = 5 * MiB
    data = os.urandom(2 * part + 999)
    up = s3.create_multipart_upload(
        Bucket=bucket, Key="m", Metadata={"sealstore-part-size": str(part)}
    )
    etags = {}
    for number in (2, 3, 1):
        chunk = data[(number - 1) * part : number * part]
        r = s3.upload_part(
            Bucket=bucket, Key="m", UploadId=up["UploadId"], PartNumber=number, Body=chunk
        )
        etags[number] = r["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="m",
        UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 3)]},
    )
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == data
    window = f"bytes={part - 7}-{part + 7}"
    assert (
        s3.get_object(Bucket=bucket, Key="m", Range=window)["Body"].read()
        == data[part - 7 : part + 8]
    )

    src = tmp_path / "src.bin"
    src.write_bytes(data)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    s3.upload_file(str(src), bucket, "managed", Config=config)
    dst = tmp_path / "dst.bin"
    s3.download_file(bucket, "managed", str(dst), Config=config)
    assert dst.read_bytes() == data
    header = S.parse_object_header(
        raw_s3.get_object(Bucket=bucket, Key="managed", Range="bytes=0-127")["Body"].read()
    )
    assert str(header.suite) == "AEGIS-256X4"


def test_a_keyring_moving_to_aegis256_keeps_opening_old_objects(s3_endpoint, raw_s3, bucket):
    ring = Keyring.generate("AEGIS-128X4", 32)
    s3 = encrypt_client(make_client(s3_endpoint), ring, segment_size=SEG)
    old = os.urandom(2 * SEG + 5)
    s3.put_object(Bucket=bucket, Key="old", Body=old)
    ring.rotate(suite="AEGIS-256X4")
    new = os.urandom(2 * SEG + 5)
    s3.put_object(Bucket=bucket, Key="new", Body=new)
    assert s3.get_object(Bucket=bucket, Key="old")["Body"].read() == old
    assert s3.get_object(Bucket=bucket, Key="new")["Body"].read() == new
    suites = {
        k: raw_s3.head_object(Bucket=bucket, Key=k)["Metadata"]["sealstore-suite"]
        for k in ("old", "new")
    }
    assert suites == {"old": "AEGIS-128X4", "new": "AEGIS-256X4"}
