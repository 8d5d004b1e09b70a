"""sealstore.adapters.s3 against moto's S3 server over HTTP: put/get/head, ranges, tampering,
metadata, objects not written by sealstore, copies."""

from __future__ import annotations

import base64
import io
import os

import pytest
from botocore.exceptions import ClientError
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client
from sealstore.errors import (
    InvalidTag,
    KeyCommitmentMismatch,
    MalformedObject,
    NotSealedObject,
    SourceChanged,
    TruncatedObject,
    UnknownKeyId,
    UnsupportedOperation,
)
from sealstore.keyring import Keyring

SEG = 4096
TAG = 32


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", TAG)


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)


def stored(raw_s3, bucket, key) -> bytes:
    return raw_s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def get(s3, bucket, key, **kw) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


class TestRoundTrip:
    @pytest.mark.parametrize("n", [0, 1, SEG - 1, SEG, SEG + 1, 3 * (1 << 20) + 5])
    def test_sizes(self, s3, raw_s3, bucket, n):
        data = os.urandom(n)
        s3.put_object(Bucket=bucket, Key="k", Body=data)
        resp = s3.get_object(Bucket=bucket, Key="k")
        assert resp["ContentLength"] == n
        assert resp["Body"].read() == data
        assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == n
        sealed = stored(raw_s3, bucket, "k")
        assert len(sealed) == S.sealed_size(n, SEG, TAG)
        assert raw_s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == len(sealed)

    def test_stored_bytes_hold_no_plaintext(self, s3, raw_s3, bucket):
        data = b"ACCOUNT-NUMBER-0123456789;" * 5000
        s3.put_object(Bucket=bucket, Key="k", Body=data)
        sealed = stored(raw_s3, bucket, "k")
        assert sealed.startswith(b"SSOB") and b"ACCOUNT-NUMBER" not in sealed
        assert get(s3, bucket, "k") == data

    @pytest.mark.parametrize("kind", ["bytearray", "str", "bytesio", "file", "iterable", "stream"])
    def test_body_kinds(self, s3, bucket, kind, tmp_path):
        data = os.urandom(3 * SEG + 11)

        class Stream:  # readable, not seekable, unknown length
            def __init__(self):
                self._f = io.BytesIO(data)

            def read(self, n=-1):
                return self._f.read(min(n, 1000) if n and n > 0 else n)

        if kind == "file":
            path = tmp_path / "f.bin"
            path.write_bytes(data)
            body = open(path, "rb")
        elif kind == "str":
            data = "héllo wörld " * 1000
            body = data
            data = data.encode("utf-8")
        else:
            body = {
                "bytearray": bytearray(data),
                "bytesio": io.BytesIO(data),
                "iterable": (data[i : i + 777] for i in range(0, len(data), 777)),
                "stream": Stream(),
            }[kind]
        s3.put_object(Bucket=bucket, Key="k", Body=body)
        assert get(s3, bucket, "k") == data
        assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == len(data)

    def test_metadata(self, s3, raw_s3, bucket, keyring):
        s3.put_object(
            Bucket=bucket,
            Key="k",
            Body=b"x" * 100,
            Metadata={"owner": "me"},
            ContentType="text/plain",
        )
        meta = raw_s3.head_object(Bucket=bucket, Key="k")["Metadata"]
        assert meta["owner"] == "me"
        assert meta["sealstore-version"] == "1"
        assert meta["sealstore-suite"] == "AEGIS-128X4"
        assert meta["sealstore-key-id"] == keyring.primary.id_hex
        assert meta["sealstore-segment-size"] == str(SEG)
        assert meta["sealstore-length"] == "100"
        header = base64.b64decode(meta["sealstore-header"])
        assert header == stored(raw_s3, bucket, "k")[: S.HEADER_SIZE]
        resp = s3.get_object(Bucket=bucket, Key="k")
        assert resp["ContentType"] == "text/plain" and resp["Metadata"]["owner"] == "me"

    def test_declared_length(self, s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=iter([b"ab", b"cd"]), ContentLength=4)
        assert get(s3, bucket, "k") == b"abcd"
        with pytest.raises(SourceChanged):  # the stream is not the declared length
            s3.put_object(Bucket=bucket, Key="k", Body=iter([b"ab"]), ContentLength=4)

    def test_checksums_of_plaintext_refused(self, s3, bucket):
        with pytest.raises(UnsupportedOperation):
            s3.put_object(
                Bucket=bucket,
                Key="k",
                Body=b"abc",
                ContentMD5="kAFQmDzST7DWlj99KOF/cg==",
            )
        with pytest.raises(UnsupportedOperation):
            s3.put_object(Bucket=bucket, Key="k", Body=b"abc", Metadata={"sealstore-key-id": "00"})
        s3.put_object(Bucket=bucket, Key="k", Body=b"abc", ChecksumAlgorithm="SHA256")
        assert get(s3, bucket, "k") == b"abc"

    def test_other_calls_unchanged(self, s3, bucket):
        s3.put_object(Bucket=bucket, Key="a", Body=b"1")
        s3.put_object(Bucket=bucket, Key="b", Body=b"2")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
        assert keys == ["a", "b"]
        s3.delete_object(Bucket=bucket, Key="a")
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["b"]
        with pytest.raises(ClientError) as err:
            s3.get_object(Bucket=bucket, Key="missing")
        assert err.value.response["Error"]["Code"] == "NoSuchKey"

    def test_aes_gcm_keyring(self, s3_endpoint, bucket):
        client = encrypt_client(
            make_client(s3_endpoint), Keyring.generate("AES-256-GCM"), segment_size=SEG
        )
        data = os.urandom(2 * SEG + 3)
        client.put_object(Bucket=bucket, Key="g", Body=data)
        assert get(client, bucket, "g") == data
        assert get(client, bucket, "g", Range="bytes=4000-4200") == data[4000:4201]

    def test_old_key_opens_after_keyring_rotation(self, s3_endpoint, bucket):
        kr = Keyring.generate()
        client = encrypt_client(make_client(s3_endpoint), kr, segment_size=SEG)
        client.put_object(Bucket=bucket, Key="old", Body=b"sealed under the first key")
        kr.rotate()
        client.put_object(Bucket=bucket, Key="new", Body=b"sealed under the second key")
        assert get(client, bucket, "old") == b"sealed under the first key"
        assert get(client, bucket, "new") == b"sealed under the second key"

    def test_unknown_key(self, s3, s3_endpoint, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=b"abc")
        stranger = encrypt_client(make_client(s3_endpoint), Keyring.generate())
        with pytest.raises(UnknownKeyId):
            stranger.get_object(Bucket=bucket, Key="k")

    def test_double_encrypt_refused(self, s3, keyring):
        with pytest.raises(ValueError):
            encrypt_client(s3, keyring)


class TestRanges:
    N = 3 * SEG + 100

    @pytest.fixture
    def objects(self, s3, raw_s3, bucket):
        data = os.urandom(self.N)
        s3.put_object(Bucket=bucket, Key="sealed", Body=data)
        raw_s3.put_object(Bucket=bucket, Key="plain", Body=data)
        return data

    def ranges(self):
        n = self.N
        points = sorted(
            {0, 1, n // 2, n - 2, n - 1} | {k * SEG + d for k in range(1, 4) for d in (-1, 0, 1)}
        )
        out = []
        for a in points:
            for b in (a, a + 1, SEG - 1, SEG, 2 * SEG, n - 1, n, n + 1000):
                if b >= a:
                    out.append(f"bytes={a}-{b}")
            out.append(f"bytes={a}-")
        out += [f"bytes=-{k}" for k in (1, 99, 100, 101, SEG, SEG + 1, n - 1, n, n + 5)]
        out += [f"bytes={n}-", f"bytes={n + 10}-{n + 20}", f"bytes={n}-{n}"]
        return out

    def test_same_answers_as_plain_object(self, s3, raw_s3, bucket, objects):
        """Every range, exact at every boundary, and the same errors S3 gives a plain object."""
        for text in self.ranges():
            try:
                want = raw_s3.get_object(Bucket=bucket, Key="plain", Range=text)
            except ClientError as exc:
                with pytest.raises(ClientError) as err:
                    s3.get_object(Bucket=bucket, Key="sealed", Range=text)
                assert err.value.response["Error"]["Code"] == exc.response["Error"]["Code"], text
                continue
            got = s3.get_object(Bucket=bucket, Key="sealed", Range=text)
            assert got["ContentRange"] == want["ContentRange"], text
            assert got["ContentLength"] == want["ContentLength"], text
            assert got["Body"].read() == want["Body"].read(), text

    def test_fetches_only_covering_segments(self, s3, raw_s3, bucket, objects):
        sent = []
        s3.meta.events.register(
            "before-send.s3.GetObject",
            lambda request, **kw: sent.append(request.headers["Range"]),
        )
        assert (
            get(s3, bucket, "sealed", Range=f"bytes={SEG + 5}-{SEG + 10}")
            == objects[SEG + 5 : SEG + 11]
        )
        step = SEG + TAG
        assert sent == [f"bytes={S.HEADER_SIZE + step}-{S.HEADER_SIZE + 2 * step - 1}".encode()]

    def test_empty_object(self, s3, raw_s3, bucket):
        s3.put_object(Bucket=bucket, Key="e", Body=b"")
        raw_s3.put_object(Bucket=bucket, Key="pe", Body=b"")
        for text in ("bytes=0-0", "bytes=0-", "bytes=-1"):
            try:
                want = raw_s3.get_object(Bucket=bucket, Key="pe", Range=text)["Body"].read()
            except ClientError as exc:
                with pytest.raises(ClientError) as err:
                    s3.get_object(Bucket=bucket, Key="e", Range=text)
                assert err.value.response["Error"]["Code"] == exc.response["Error"]["Code"]
            else:
                assert get(s3, bucket, "e", Range=text) == want

    def test_other_segment_size(self, s3_endpoint, s3, bucket):
        """An object written with another segment size: the first guess is corrected."""
        data = os.urandom(10 * 1024 + 7)
        writer = encrypt_client(make_client(s3_endpoint), s3.sealstore.keyring, segment_size=1024)
        writer.put_object(Bucket=bucket, Key="k", Body=data)
        for a, b in ((0, 5), (1500, 4000), (9000, 10 * 1024 + 6), (5000, None)):
            text = f"bytes={a}-" + ("" if b is None else str(b))
            assert get(s3, bucket, "k", Range=text) == data[a : None if b is None else b + 1]

    def test_range_tampered_segment(self, s3, raw_s3, bucket, objects):
        sealed = bytearray(stored(raw_s3, bucket, "sealed"))
        meta = raw_s3.head_object(Bucket=bucket, Key="sealed")["Metadata"]
        sealed[S.HEADER_SIZE + (SEG + TAG) + 10] ^= 1  # segment 1
        raw_s3.put_object(Bucket=bucket, Key="sealed", Body=bytes(sealed), Metadata=meta)
        assert get(s3, bucket, "sealed", Range="bytes=0-100") == objects[:101]  # segment 0 fine
        with pytest.raises(InvalidTag):
            get(s3, bucket, "sealed", Range=f"bytes={SEG}-{SEG}")

    def test_unsupported(self, s3, bucket, objects):
        with pytest.raises(UnsupportedOperation):
            s3.get_object(Bucket=bucket, Key="sealed", Range="bytes=0-1,5-6")
        with pytest.raises(UnsupportedOperation):
            s3.get_object(Bucket=bucket, Key="sealed", PartNumber=1)


class TestTampering:
    DATA = os.urandom(4 * SEG + 50)

    @pytest.fixture
    def obj(self, s3, raw_s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=self.DATA)
        return stored(raw_s3, bucket, "k"), raw_s3.head_object(Bucket=bucket, Key="k")["Metadata"]

    def replace(self, raw_s3, bucket, body, meta):
        raw_s3.put_object(Bucket=bucket, Key="k", Body=body, Metadata=meta)

    @pytest.mark.parametrize("segment", range(5))
    def test_one_byte_of_any_segment(self, s3, raw_s3, bucket, obj, segment):
        body, meta = obj
        bad = bytearray(body)
        bad[S.HEADER_SIZE + segment * (SEG + TAG) + 7] ^= 0x40
        self.replace(raw_s3, bucket, bytes(bad), meta)
        resp = s3.get_object(Bucket=bucket, Key="k")
        with pytest.raises(InvalidTag) as err:
            resp["Body"].read()
        assert err.value.index == segment

    @pytest.mark.parametrize("offset", [0, 4, 5, 7, 9, 20, 50])
    def test_one_byte_of_the_header(self, s3, raw_s3, bucket, obj, offset):
        body, meta = obj
        bad = bytearray(body)
        bad[offset] ^= 0x01
        self.replace(raw_s3, bucket, bytes(bad), meta)
        with pytest.raises((MalformedObject, NotSealedObject, InvalidTag, UnknownKeyId)):
            get(s3, bucket, "k")
        meta_only = {k: v for k, v in meta.items() if not k.startswith("sealstore-")}
        self.replace(raw_s3, bucket, bytes(bad), meta_only)  # body alone: still refused
        with pytest.raises((MalformedObject, NotSealedObject, InvalidTag, UnknownKeyId)):
            get(s3, bucket, "k")

    @pytest.mark.parametrize(
        "field,value",
        [
            ("sealstore-length", "1"),
            ("sealstore-segment-size", "8192"),
            ("sealstore-suite", "AEGIS-128L"),
            ("sealstore-key-id", "00000000"),
            ("sealstore-version", "2"),
            ("sealstore-header", None),
        ],
    )
    def test_metadata(self, s3, raw_s3, bucket, obj, field, value):
        body, meta = obj
        meta = dict(meta)
        if value is None:  # one byte of the header copy (the salt)
            head = bytearray(base64.b64decode(meta[field]))
            head[20] ^= 1
            value = base64.b64encode(bytes(head)).decode()
        meta[field] = value
        self.replace(raw_s3, bucket, body, meta)
        with pytest.raises((MalformedObject, KeyCommitmentMismatch)):
            get(s3, bucket, "k")
        with pytest.raises((MalformedObject, KeyCommitmentMismatch)):
            get(s3, bucket, "k", Range="bytes=5000-5010")
        with pytest.raises(MalformedObject):
            if field in (
                "sealstore-length",
                "sealstore-segment-size",
                "sealstore-suite",
                "sealstore-key-id",
                "sealstore-version",
            ):
                s3.head_object(Bucket=bucket, Key="k")
            else:
                raise MalformedObject("the header copy is checked when the key is derived")

    @pytest.mark.parametrize("cut", [1, TAG, TAG + 50, SEG + TAG + 50])
    def test_truncated(self, s3, raw_s3, bucket, obj, cut):
        body, meta = obj
        self.replace(
            raw_s3,
            bucket,
            body[:-cut],
            {k: v for k, v in meta.items() if k != "sealstore-length"},
        )
        with pytest.raises(
            InvalidTag
        ):  # TruncatedObject for impossible lengths, a tag failure otherwise
            get(s3, bucket, "k")

    def test_truncated_at_segment_boundary_raises_at_the_end(self, s3, raw_s3, bucket, obj):
        body, meta = obj
        whole = S.HEADER_SIZE + 2 * (SEG + TAG)
        # two full segments and one byte short of the third's tag: an impossible length
        self.replace(raw_s3, bucket, body[:whole], {})
        with pytest.raises(TruncatedObject):
            get(s3, bucket, "k")

    def test_swap_two_segments(self, s3, raw_s3, bucket, obj):
        body, meta = obj
        h, step = S.HEADER_SIZE, SEG + TAG
        swapped = (
            body[:h] + body[h + step : h + 2 * step] + body[h : h + step] + body[h + 2 * step :]
        )
        self.replace(raw_s3, bucket, swapped, meta)
        with pytest.raises(InvalidTag):
            get(s3, bucket, "k")

    @pytest.mark.parametrize("extra", [b"x", os.urandom(TAG), os.urandom(SEG + TAG)])
    def test_appended(self, s3, raw_s3, bucket, obj, extra):
        body, meta = obj
        self.replace(
            raw_s3,
            bucket,
            body + extra,
            {k: v for k, v in meta.items() if k != "sealstore-length"},
        )
        with pytest.raises(InvalidTag):
            get(s3, bucket, "k")

    def test_nothing_released_before_the_tag(self, s3, raw_s3, bucket, obj):
        body, meta = obj
        bad = bytearray(body)
        bad[S.HEADER_SIZE + SEG - 1] ^= 1  # last plaintext byte of segment 0
        self.replace(raw_s3, bucket, bytes(bad), meta)
        stream = s3.get_object(Bucket=bucket, Key="k")["Body"]
        with pytest.raises(InvalidTag):
            stream.read(1)


class TestNotSealed:
    def test_refused_by_default(self, s3, raw_s3, bucket):
        raw_s3.put_object(Bucket=bucket, Key="plain", Body=b"legacy plaintext object " * 10)
        raw_s3.put_object(Bucket=bucket, Key="tiny", Body=b"ab")
        for key in ("plain", "tiny"):
            with pytest.raises(NotSealedObject):
                s3.get_object(Bucket=bucket, Key=key)
            with pytest.raises(NotSealedObject):
                s3.head_object(Bucket=bucket, Key=key)

    def test_passthrough(self, s3_endpoint, raw_s3, bucket, keyring):
        client = encrypt_client(
            make_client(s3_endpoint), keyring, segment_size=SEG, passthrough=True
        )
        data = b"legacy plaintext object " * 1000
        raw_s3.put_object(Bucket=bucket, Key="plain", Body=data)
        raw_s3.put_object(Bucket=bucket, Key="empty", Body=b"")
        assert get(client, bucket, "plain") == data
        assert get(client, bucket, "empty") == b""
        assert client.head_object(Bucket=bucket, Key="plain")["ContentLength"] == len(data)
        assert get(client, bucket, "plain", Range="bytes=10000-10100") == data[10000:10101]
        assert get(client, bucket, "plain", Range="bytes=10-20") == data[10:21]
        client.put_object(Bucket=bucket, Key="new", Body=b"new objects are sealed")
        assert stored(raw_s3, bucket, "new").startswith(b"SSOB")

    def test_metadata_says_sealed_but_body_is_not(self, s3, raw_s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=b"abc")
        meta = raw_s3.head_object(Bucket=bucket, Key="k")["Metadata"]
        raw_s3.put_object(
            Bucket=bucket,
            Key="k",
            Body=b"not sealed at all, but claims to be",
            Metadata=meta,
        )
        client = encrypt_client(
            make_client(s3.meta.endpoint_url), s3.sealstore.keyring, passthrough=True
        )
        with pytest.raises(MalformedObject):
            client.get_object(Bucket=bucket, Key="k")


class TestCopies:
    def test_copy_object_keeps_objects_readable(self, s3, raw_s3, bucket):
        data = os.urandom(2 * SEG + 9)
        s3.put_object(Bucket=bucket, Key="src", Body=data, Metadata={"a": "1"})
        s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "src"})
        s3.copy_object(
            Bucket=bucket,
            Key="replaced",
            CopySource=f"{bucket}/src",
            MetadataDirective="REPLACE",
            Metadata={"b": "2"},
        )
        for key in ("copy", "replaced"):
            assert get(s3, bucket, key) == data
            assert get(s3, bucket, key, Range="bytes=5000-5005") == data[5000:5006]
        assert s3.head_object(Bucket=bucket, Key="replaced")["Metadata"]["b"] == "2"
        s3.copy({"Bucket": bucket, "Key": "src"}, bucket, "managed")
        assert get(s3, bucket, "managed") == data

    def test_metadata_lost_body_still_opens(self, s3, raw_s3, bucket):
        """Another tool copied the object onto itself and dropped the metadata: the body names
        everything (a copy to another key fails: test_s3_binding.py)."""
        data = os.urandom(3 * SEG + 1)
        s3.put_object(Bucket=bucket, Key="bare", Body=data)
        raw_s3.copy_object(
            Bucket=bucket,
            Key="bare",
            CopySource=f"{bucket}/bare",
            MetadataDirective="REPLACE",
            Metadata={},
        )
        assert "sealstore-header" not in raw_s3.head_object(Bucket=bucket, Key="bare")["Metadata"]
        assert get(s3, bucket, "bare") == data
        assert s3.head_object(Bucket=bucket, Key="bare")["ContentLength"] == len(data)
        assert (
            get(s3, bucket, "bare", Range=f"bytes={2 * SEG}-{2 * SEG + 10}")
            == data[2 * SEG : 2 * SEG + 11]
        )
        assert get(s3, bucket, "bare", Range="bytes=-5") == data[-5:]

    def test_part_copy_refused(self, s3, bucket):
        s3.put_object(Bucket=bucket, Key="src", Body=b"abc")
        upload = s3.sealstore.client.create_multipart_upload
        with pytest.raises(UnsupportedOperation):
            s3.upload_part_copy(
                Bucket=bucket,
                Key="dst",
                UploadId="x",
                PartNumber=1,
                CopySource=f"{bucket}/src",
            )
        assert callable(upload)
