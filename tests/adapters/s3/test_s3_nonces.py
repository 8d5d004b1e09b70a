"""No segment nonce of an object key ever covers two plaintexts: a multipart part number sent
again with other bytes (a retry with regenerated data, two racing workers) is refused before
anything sealed from it leaves; the same bytes again give the same ciphertext.

Every body the encrypted client sends is captured at ``before-send`` (what goes on the wire,
not what the server kept) and cut into segments with the format: under one object key the
nonce of a segment is ``prefix || index || final`` (docs/FORMAT.md O3), so two different
ciphertexts at one ``(index, final)`` would be a nonce reused.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from urllib.parse import parse_qs, urlsplit

import pytest
from fixtures_s3 import make_client
from sealstore import stream as S
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.location import object_location
from sealstore.errors import NonceReuseRefused, SourceChanged
from sealstore.keyring import Keyring
from sealstore.segment_log import SegmentLog

SEG = 4096
PART = 5 << 20  # S3's smallest part that may be followed by another


@pytest.fixture(scope="module", params=["AEGIS-128L", "AES-256-GCM"])
def keyring(request):
    return Keyring.generate(request.param, 32)


class Wire:
    """The UploadPart bodies a client sends, by part number, in order."""

    def __init__(self, client) -> None:
        self.parts: list[tuple[int, bytes]] = []
        self._lock = threading.Lock()
        client.meta.events.register("before-send.s3.UploadPart", self._capture)

    def _capture(self, request, **kwargs):
        number = int(parse_qs(urlsplit(request.url).query)["partNumber"][0])
        body = request.body
        if hasattr(body, "read"):
            pos = body.tell()
            data = body.read()
            body.seek(pos)
        else:
            data = bytes(body or b"")
        with self._lock:
            self.parts.append((number, data))

    def segments(self, tag: int) -> dict[tuple[int, bool], set[bytes]]:
        """Every ciphertext sent at each (segment index, final) of the object."""
        seen = defaultdict(set)
        step = SEG + tag
        for number, data in self.parts:
            if number == 1:
                data = data[S.HEADER_SIZE :]
            index = (number - 1) * PART // SEG
            for at in range(0, len(data), step):
                chunk = data[at : at + step]
                seen[(index, len(chunk) < step)].add(chunk)  # only a final one is short
                index += 1
        return seen


def start(s3, bucket, key="k"):
    return s3.create_multipart_upload(
        Bucket=bucket, Key=key, Metadata={"sealstore-part-size": str(PART)}
    )["UploadId"]


def put_part(s3, bucket, upload, number, data, key="k"):
    resp = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data)
    return {"PartNumber": number, "ETag": resp["ETag"]}


def complete(s3, bucket, upload, parts, key="k"):
    s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )


def assert_no_nonce_reused(wire, tag):
    reused = {n: len(c) for n, c in wire.segments(tag).items() if len(c) > 1}
    assert not reused, f"nonces (index, final) reused: {sorted(reused)[:5]}"


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)


def tag_of(s3):
    return s3.sealstore._tag_size()


def test_part_sent_again_with_other_bytes_is_refused(s3, raw_s3, bucket, keyring):
    wire = Wire(s3)
    first, other, tail = os.urandom(PART), os.urandom(PART), os.urandom(SEG + 7)
    upload = start(s3, bucket)
    p1 = put_part(s3, bucket, upload, 1, first)
    with pytest.raises(NonceReuseRefused) as info:
        put_part(s3, bucket, upload, 1, other)
    assert isinstance(info.value, SourceChanged)
    sent = [n for n, _ in wire.parts]
    assert sent == [1], "the refused part must not have been sent at all"
    # a change in one byte only, deep in the part, is caught as well
    edited = bytearray(first)
    edited[PART - 100] ^= 1
    with pytest.raises(NonceReuseRefused):
        put_part(s3, bucket, upload, 1, bytes(edited))
    p2 = put_part(s3, bucket, upload, 2, tail)
    complete(s3, bucket, upload, [p1, p2])
    assert_no_nonce_reused(wire, tag_of(s3))

    # the stored object is the first part's bytes, parsed and opened with the format
    sealed = raw_s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    header = S.parse_object_header(sealed)
    cipher = S.ObjectCipher.from_header(keyring, header, location=object_location(bucket, "k"))
    assert S.OpeningReader(cipher, memoryview(sealed)[S.HEADER_SIZE :]).read() == first + tail
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == first + tail


def test_part_sent_again_with_the_same_bytes_is_the_same_ciphertext(s3, bucket):
    wire = Wire(s3)
    data, tail = os.urandom(PART), os.urandom(10)
    upload = start(s3, bucket)
    put_part(s3, bucket, upload, 1, data)
    p1 = put_part(s3, bucket, upload, 1, bytearray(data))  # a retry of the same bytes
    p2 = put_part(s3, bucket, upload, 2, tail)
    p2 = put_part(s3, bucket, upload, 2, tail)
    complete(s3, bucket, upload, [p1, p2])
    ones = [body for n, body in wire.parts if n == 1]
    assert len(ones) == 2 and ones[0] == ones[1]
    assert_no_nonce_reused(wire, tag_of(s3))
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data + tail


def test_last_part_sent_again_longer_or_shorter_is_refused(s3, bucket):
    """The final segment's nonce differs from a full one's, but the shared segments do not."""
    wire = Wire(s3)
    upload = start(s3, bucket)
    put_part(s3, bucket, upload, 1, b"x" * (SEG + 5))
    for again in (b"x" * (SEG + 6), b"x" * (SEG + 4), b"y" * 3, b""):
        with pytest.raises(NonceReuseRefused):
            put_part(s3, bucket, upload, 1, again)
    assert_no_nonce_reused(wire, tag_of(s3))


@pytest.mark.parametrize("round_", range(4))
def test_racing_workers_on_one_part_number(s3, bucket, round_):
    wire = Wire(s3)
    upload = start(s3, bucket)
    datas = [os.urandom(PART), os.urandom(PART)]
    barrier = threading.Barrier(2)
    outcome: dict[int, object] = {}

    def worker(i):
        barrier.wait()
        try:
            outcome[i] = put_part(s3, bucket, upload, 1, datas[i])
        except NonceReuseRefused as exc:
            outcome[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [i for i, o in outcome.items() if isinstance(o, NonceReuseRefused)]
    assert refused, "two different parts 1 were both sealed under the same nonces"
    assert_no_nonce_reused(wire, tag_of(s3))
    done = [i for i in range(2) if i not in refused]
    if done:  # the one that got through is the object
        complete(s3, bucket, upload, [outcome[done[0]]])
        body = s3.get_object(Bucket=bucket, Key="k")["Body"].read()
        assert body == datas[done[0]]
    else:
        s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=upload)


def test_shared_log_between_readers(keyring):
    """The stream layer: readers of one key sharing a log refuse other bytes at a sealed index
    and wipe what they sealed into the caller's buffer."""
    cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
    log = SegmentLog()
    data = os.urandom(3 * SEG)
    a = S.SealingReader(cipher, data, first_index=8, final=False, header=False, log=log)
    sealed = a.read()
    again = S.SealingReader(cipher, data, first_index=8, final=False, header=False, log=log)
    assert again.read() == sealed
    b = S.SealingReader(
        cipher, os.urandom(3 * SEG), first_index=8, final=False, header=False, log=log
    )
    buf = bytearray(len(sealed))
    with pytest.raises(NonceReuseRefused):
        b.readinto(buf)
    assert buf == bytes(len(buf))
    # another index range, or the same bytes at another index, is fine
    c = S.SealingReader(cipher, os.urandom(SEG), first_index=100, header=False, log=log)
    assert len(c.read()) == c.size


def test_completion_retried_seals_the_extra_final_part_identically(s3, bucket):
    """All parts full: completion adds a part holding the final segment; a completion that
    failed and is retried sends that part again, which must be the same bytes."""
    from botocore.exceptions import ClientError

    wire = Wire(s3)
    data = os.urandom(PART)
    upload = start(s3, bucket)
    p1 = put_part(s3, bucket, upload, 1, data)
    with pytest.raises(ClientError):
        complete(s3, bucket, upload, [{"PartNumber": 1, "ETag": '"0123"'}])
    complete(s3, bucket, upload, [p1])
    extras = [body for n, body in wire.parts if n == 2]
    assert len(extras) == 2 and extras[0] == extras[1]
    assert_no_nonce_reused(wire, tag_of(s3))
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == data


def _child_part(s3, bucket, upload, queue):
    try:
        put_part(s3, bucket, upload, 1, os.urandom(PART))
        queue.put("sent")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        queue.put(type(exc).__name__)
    try:
        complete(s3, bucket, upload, [])
        queue.put("completed")
    except Exception as exc:  # noqa: BLE001
        queue.put(type(exc).__name__)


def test_forked_process_cannot_send_parts(s3, bucket):
    """A fork copies the upload's record; two processes each sealing part 1 from their own copy
    would reuse its nonces, so the child is refused."""
    import multiprocessing

    wire = Wire(s3)
    upload = start(s3, bucket)
    p1 = put_part(s3, bucket, upload, 1, os.urandom(PART))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_part, args=(s3, bucket, upload, queue))
    child.start()
    # hang guards, not bounds: a loaded machine may take its time starting the child
    assert [queue.get(timeout=300), queue.get(timeout=300)] == ["UnsupportedOperation"] * 2
    child.join(300)
    assert child.exitcode == 0
    complete(s3, bucket, upload, [p1])  # the parent still can
    assert len(wire.parts) == 2  # part 1 and the extra final part, from the parent only
