"""An encrypted client answers as S3 answers for the plaintext object: every range (satisfiable
or not, empty objects included) is compared with what moto answers a plain client for the same
bytes stored in clear; bodies support ``tell()`` and ``set_socket_timeout()``; ``Body=None``
is botocore's ParamValidationError; ``plaintext_size`` reports the size from one HEAD."""

from __future__ import annotations

import os

import pytest
from botocore.exceptions import ClientError, ParamValidationError
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client, plaintext_size
from sealstore.errors import NotSealedObject
from sealstore.keyring import Keyring

SEG = 1024
TAG = 32
SIZES = [0, 1, 10, SEG, 3 * SEG + 5]
RANGES = ["bytes=0-", "bytes=0-0", "bytes=5-", "bytes=3-7", "bytes=-1", "bytes=-3",
          "bytes=-100000", "bytes=9-", "bytes=10-", "bytes=100-200", "bytes=3000-",
          "bytes=3077-", "bytes=1000000-", "bytes=-0"]  # fmt: skip


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X2", TAG)


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)


def answer(client, bucket, key, rng):
    """What a GetObject with ``rng`` answers, in the terms a caller sees."""
    try:
        resp = client.get_object(Bucket=bucket, Key=key, Range=rng)
    except ClientError as exc:
        err = exc.response["Error"]
        return ("error", exc.response["ResponseMetadata"]["HTTPStatusCode"],
                err.get("Code"), err.get("ActualObjectSize"), err.get("RangeRequested"))  # fmt: skip
    return ("ok", resp["ResponseMetadata"]["HTTPStatusCode"], resp.get("ContentRange"),
            resp["ContentLength"], resp["Body"].read())  # fmt: skip


@pytest.mark.parametrize("n", SIZES)
def test_ranges_answer_as_plain_s3(s3, raw_s3, bucket, n):
    data = os.urandom(n)
    raw_s3.put_object(Bucket=bucket, Key="plain", Body=data)
    s3.put_object(Bucket=bucket, Key="sealed", Body=data)
    for rng in RANGES:
        expected = answer(raw_s3, bucket, "plain", rng)
        assert answer(s3, bucket, "sealed", rng) == expected, rng
        # a fresh client has no cached layout for the object: the same answers
        fresh = encrypt_client(
            make_client(raw_s3.meta.endpoint_url), s3.sealstore.keyring, segment_size=4096
        )
        assert answer(fresh, bucket, "sealed", rng) == expected, rng


@pytest.mark.parametrize("n", [0, 3 * SEG + 5])
def test_head_and_get_headers_are_plaintext(s3, raw_s3, bucket, n):
    data = os.urandom(n)
    raw_s3.put_object(Bucket=bucket, Key="plain", Body=data)
    s3.put_object(Bucket=bucket, Key="sealed", Body=data)
    for call in (s3.head_object, s3.get_object):
        plain = raw_s3.head_object(Bucket=bucket, Key="plain")["ResponseMetadata"]
        sealed = call(Bucket=bucket, Key="sealed")["ResponseMetadata"]
        assert sealed["HTTPHeaders"]["content-length"] == plain["HTTPHeaders"]["content-length"]
        assert sealed["HTTPStatusCode"] == plain["HTTPStatusCode"]


def test_416_details_are_plaintext_terms(s3, raw_s3, bucket):
    data = os.urandom(2 * SEG)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    stored = raw_s3.head_object(Bucket=bucket, Key="k")["ContentLength"]
    assert stored != len(data)
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key="k", Range=f"bytes={stored + 10}-")
    err = info.value.response["Error"]
    assert err["ActualObjectSize"] == str(len(data))
    assert err["RangeRequested"] == f"bytes={stored + 10}-"
    assert str(stored) not in str(info.value)


def test_416_without_metadata(s3, raw_s3, bucket):
    """The metadata was lost (a raw copy replaced it): the size comes from the header."""
    s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(100))
    raw_s3.copy_object(Bucket=bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k"},
                       MetadataDirective="REPLACE", Metadata={})  # fmt: skip
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key="k", Range="bytes=5000-")
    err = info.value.response["Error"]
    assert (err["ActualObjectSize"], err["RangeRequested"]) == ("100", "bytes=5000-")


def test_range_near_the_end_of_an_object_with_larger_segments(s3_endpoint, raw_s3, keyring, bucket):
    """A client with small segments maps a range of an object it has not seen with its own
    layout; near the end of an object with larger segments that lands past the stored bytes
    (S3: 416), yet the plaintext has the range: it is answered."""
    data = os.urandom(2 * 65536)
    writer = encrypt_client(make_client(s3_endpoint), keyring, segment_size=65536)
    writer.put_object(Bucket=bucket, Key="k", Body=data)
    raw_s3.put_object(Bucket=bucket, Key="plain", Body=data)
    for rng in ("bytes=131000-", "bytes=131000-131050", "bytes=131072-"):
        reader = encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)
        assert answer(reader, bucket, "k", rng) == answer(raw_s3, bucket, "plain", rng), rng


class TestBody:
    def test_tell_counts_plaintext(self, s3, bucket):
        data = os.urandom(3 * SEG + 7)
        s3.put_object(Bucket=bucket, Key="k", Body=data)
        for kw in ({}, {"Range": "bytes=100-2999"}):
            body = s3.get_object(Bucket=bucket, Key="k", **kw)["Body"]
            assert body.tell() == 0
            first = body.read(10)
            assert body.tell() == 10
            rest = body.read()
            assert body.tell() == len(first) + len(rest)
            assert first + rest == (data if not kw else data[100:3000])

    def test_set_socket_timeout(self, s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(SEG * 2))
        for kw in ({}, {"Range": "bytes=5-9"}):
            body = s3.get_object(Bucket=bucket, Key="k", **kw)["Body"]
            body.set_socket_timeout(7.5)
            sock = (
                body._sealed._raw._raw_stream._fp.fp.raw._sock
            )  # the sealed body, inside its Resuming
            assert sock.gettimeout() == 7.5
            body.read()

    def test_body_none_is_param_validation_error(self, s3, raw_s3, bucket):
        with pytest.raises(ParamValidationError) as plain:
            raw_s3.put_object(Bucket=bucket, Key="k", Body=None)
        with pytest.raises(ParamValidationError) as sealed:
            s3.put_object(Bucket=bucket, Key="k", Body=None)
        assert str(sealed.value) == str(plain.value)
        upload = s3.create_multipart_upload(
            Bucket=bucket, Key="m", Metadata={"sealstore-part-size": str(5 << 20)}
        )["UploadId"]
        with pytest.raises(ParamValidationError):
            s3.upload_part(Bucket=bucket, Key="m", UploadId=upload, PartNumber=1, Body=None)

    def test_body_none_without_validation_is_still_refused(
        self, s3_endpoint, keyring, bucket, raw_s3
    ):
        """With parameter validation off, botocore would send no body: nothing is stored."""
        s3 = encrypt_client(make_client(s3_endpoint, parameter_validation=False), keyring)
        with pytest.raises(ParamValidationError):
            s3.put_object(Bucket=bucket, Key="k", Body=None)
        assert raw_s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


class TestPlaintextSize:
    @pytest.mark.parametrize("n", [0, 5, SEG, 5 * SEG + 3])
    def test_from_one_head(self, s3, raw_s3, bucket, n):
        s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(n))
        listed = raw_s3.list_objects_v2(Bucket=bucket)["Contents"][0]["Size"]
        assert listed == S.sealed_size(n, SEG, TAG)  # listings show the sealed size
        calls = []
        raw_s3.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
        assert plaintext_size(raw_s3, Bucket=bucket, Key="k") == n  # a plain client, no key
        assert calls == ["HeadObject"]
        assert plaintext_size(s3, Bucket=bucket, Key="k") == n  # an encrypted client

    def test_without_metadata_reads_the_header_only(self, s3, raw_s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(3 * SEG))
        raw_s3.copy_object(Bucket=bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k"},
                           MetadataDirective="REPLACE", Metadata={})  # fmt: skip
        ranges = []
        raw_s3.meta.events.register(
            "before-call.s3.GetObject", lambda params, **kw: ranges.append(params["headers"].get("Range"))
        )  # fmt: skip
        assert plaintext_size(raw_s3, Bucket=bucket, Key="k") == 3 * SEG
        assert ranges == [f"bytes=0-{S.HEADER_SIZE - 1}"]

    def test_versions_and_not_sealed(self, s3, raw_s3, bucket):
        raw_s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 100)["VersionId"]
        s3.put_object(Bucket=bucket, Key="k", Body=b"y" * 7)
        assert plaintext_size(raw_s3, Bucket=bucket, Key="k", VersionId=v1) == 100
        assert plaintext_size(raw_s3, Bucket=bucket, Key="k") == 7
        raw_s3.put_object(Bucket=bucket, Key="plain", Body=b"not sealed at all")
        with pytest.raises(NotSealedObject):
            plaintext_size(raw_s3, Bucket=bucket, Key="plain")
