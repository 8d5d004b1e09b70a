"""An encrypted google-cloud-storage client against the emulator (``fixtures_gcs.py``): every
upload and download method round-trips sizes around segment and chunk boundaries and multi-MiB
resumable uploads, ranges are exact, what the emulator stores is sealed (its files on disk are
scanned for the plaintext), tampered, cut, copied and moved objects fail to open with specific
errors, copies through the client are re-sealed, a SIGKILLed upload leaves the old object whole,
and threads sealing on one client never leak into each other's raw access."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import pytest
from fixtures_gcs import make_gcs_client
from google.api_core import exceptions as gexc
from sealstore.adapters.gcs import encrypt_client
from sealstore.adapters.gcs.store import CHUNK
from sealstore.errors import (
    SealstoreError,
    InvalidTag,
    KeyCommitmentMismatch,
    MalformedObject,
    NotSealedObject,
    TruncatedObject,
    UnsupportedOperation,
    WrongLocation,
)
from sealstore.keyring import Keyring
from sealstore.stream import HEADER_SIZE

SEG = 4096
TAG = 16
MiB = 1 << 20
MARK = b"PLAINTEXT-MARKER-7f3a9c"  # what must never reach the emulator's disk


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128L", TAG)


@pytest.fixture
def gcs(gcs_emulator, keyring):
    return encrypt_client(make_gcs_client(gcs_emulator), keyring, segment_size=SEG)


def marked(n: int) -> bytes:
    """``n`` bytes holding MARK as often as it fits (the rest random)."""
    body = (MARK + os.urandom(41)) * (n // (len(MARK) + 41) + 1)
    return body[:n]


def stored(raw_gcs, bucket, name) -> bytes:
    return raw_gcs.bucket(bucket).blob(name).download_as_bytes()


def assert_nothing_plain(emulator):
    for path in emulator.stored_files():
        assert MARK not in path.read_bytes(), path


# ---- round trips -----------------------------------------------------------------------------


SIZES = [0, 1, SEG - 1, SEG, SEG + 1, 3 * SEG, CHUNK - 1, CHUNK + 7, 8 * MiB - 300, 8 * MiB + 5]


@pytest.mark.parametrize("size", SIZES)
def test_upload_from_string_round_trip(gcs, raw_gcs, gcs_bucket, gcs_emulator, size):
    data = marked(size)
    blob = gcs.bucket(gcs_bucket).blob("obj")
    blob.upload_from_string(data)
    assert blob.size == size  # the plaintext size
    raw = stored(raw_gcs, gcs_bucket, "obj")
    assert raw[:4] == b"SSOB" and len(raw) == HEADER_SIZE + size + (size // SEG + 1) * TAG
    assert gcs.bucket(gcs_bucket).blob("obj").download_as_bytes() == data
    assert gcs.bucket(gcs_bucket).get_blob("obj").size == size
    assert_nothing_plain(gcs_emulator)


def test_every_upload_and_download_method(gcs, raw_gcs, gcs_bucket, gcs_emulator, tmp_path):
    data = marked(5 * SEG + 123)
    bucket = gcs.bucket(gcs_bucket)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    bucket.blob("file").upload_from_file(io.BytesIO(data))
    bucket.blob("name").upload_from_filename(str(src))
    bucket.blob("text").upload_from_string(data.decode("latin-1").encode("latin-1"))
    with bucket.blob("open").open("wb") as f:
        f.write(data[:100])
        f.write(data[100:])
    with bucket.blob("opent").open("w") as f:
        f.write("héllo\n" * 1000)
    for name in ("file", "name", "text", "open"):
        blob = bucket.blob(name)
        assert blob.download_as_bytes() == data, name
        out = io.BytesIO()
        blob.download_to_file(out)
        assert out.getvalue() == data
        blob.download_to_filename(str(tmp_path / "out.bin"))
        assert (tmp_path / "out.bin").read_bytes() == data
        out = io.BytesIO()
        gcs.download_blob_to_file(blob, out, start=7, end=4099)
        assert out.getvalue() == data[7:4100]
        assert stored(raw_gcs, gcs_bucket, name)[:4] == b"SSOB"
    assert bucket.blob("opent").download_as_text() == "héllo\n" * 1000
    with bucket.blob("opent").open("r") as f:
        assert f.readline() == "héllo\n"
    assert_nothing_plain(gcs_emulator)


@pytest.mark.parametrize("size", [3 * MiB + 11, 20 * MiB + 4097])
def test_large_uploads_stream_through_one_resumable_session(gcs, gcs_bucket, tmp_path, size):
    data = os.urandom(size)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    blob = gcs.bucket(gcs_bucket).blob("big")
    blob.upload_from_filename(str(path))
    assert blob.size == size
    blob.download_to_filename(str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == data
    assert blob.download_as_bytes(start=size - 5000, end=size + 10) == data[-5000:]


def test_unknown_length_sources(gcs, gcs_bucket):
    class OneShot(io.RawIOBase):  # readable once, not seekable, no length
        def __init__(self, data):
            self._data = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._data.readinto(b)

    for size in (0, 1000, 9 * MiB + 3):
        data = os.urandom(size)
        blob = gcs.bucket(gcs_bucket).blob(f"s{size}")
        blob.upload_from_file(OneShot(data))
        assert blob.download_as_bytes() == data


def test_size_argument_reads_exactly_that_much(gcs, gcs_bucket):
    data = os.urandom(10_000)
    src = io.BytesIO(data)
    src.seek(100)
    blob = gcs.bucket(gcs_bucket).blob("part")
    blob.upload_from_file(src, size=5000)
    assert blob.download_as_bytes() == data[100:5100]
    blob.upload_from_file(src, rewind=True)
    assert blob.download_as_bytes() == data


# ---- ranges and open("rb") ---------------------------------------------------------------------


def test_ranges_are_exact(gcs, gcs_bucket):
    size = 7 * SEG + 321
    data = os.urandom(size)
    blob = gcs.bucket(gcs_bucket).blob("r")
    blob.upload_from_string(data)
    for start, end in [(0, 0), (0, SEG - 1), (SEG - 1, SEG), (SEG, 2 * SEG - 1), (5, size - 1),
                       (3 * SEG + 7, 6 * SEG + 3), (size - 1, size - 1), (100, size + 500)]:  # fmt: skip
        assert blob.download_as_bytes(start=start, end=end) == data[start : end + 1]
    assert blob.download_as_bytes(start=SEG * 2) == data[SEG * 2 :]
    assert blob.download_as_bytes(end=99) == data[:100]
    assert blob.download_as_bytes(start=-300) == data[-300:]
    with pytest.raises(gexc.RequestRangeNotSatisfiable, match=str(size)):
        blob.download_as_bytes(start=size, end=size + 5)


def test_open_rb_seeks_and_reads_verified_plaintext(gcs, gcs_bucket):
    data = os.urandom(9 * SEG + 5)
    blob = gcs.bucket(gcs_bucket).blob("o")
    blob.upload_from_string(data)
    with blob.open("rb", chunk_size=SEG) as f:
        assert f.read(10) == data[:10]
        f.seek(3 * SEG - 2)
        assert f.read(SEG) == data[3 * SEG - 2 : 4 * SEG - 2]
        f.seek(-7, io.SEEK_END)
        assert f.read() == data[-7:]
        assert f.read() == b""
        f.seek(0)
        assert f.read() == data
    with gcs.bucket(gcs_bucket).blob("o").open("rb") as f:
        f.seek(len(data) + 10)
        assert f.read() == b""


def test_open_reads_one_generation(gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob("g")
    blob.upload_from_string(os.urandom(4 * SEG))
    with gcs.bucket(gcs_bucket).blob("g").open("rb", chunk_size=SEG) as f:
        f.read(10)
        gcs.bucket(gcs_bucket).blob("g").upload_from_string(os.urandom(4 * SEG))
        f.seek(2 * SEG)
        with pytest.raises(gexc.PreconditionFailed):
            f.read(10)


def test_open_wb_stores_nothing_when_the_block_raises(gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob("w")
    with pytest.raises(RuntimeError), blob.open("wb") as f:
        f.write(b"half")
        raise RuntimeError("stop")
    with pytest.raises(RuntimeError), blob.open("w") as f:
        f.write("half")
        raise RuntimeError("stop")
    assert gcs.bucket(gcs_bucket).get_blob("w") is None


def test_open_wb_streams_large_objects_without_temporary_files(gcs, gcs_bucket, monkeypatch):
    import tempfile

    def no_spool(*args, **kwargs):
        raise AssertionError("plaintext must not go to a temporary file")

    monkeypatch.setattr(tempfile, "SpooledTemporaryFile", no_spool)
    monkeypatch.setattr(tempfile, "TemporaryFile", no_spool)
    gcs.sealstore.engine.part_size = MiB
    written = hashlib.sha256()
    blob = gcs.bucket(gcs_bucket).blob("stream")
    tracemalloc.start()
    try:
        with blob.open("wb") as f:
            for _ in range(48):
                chunk = os.urandom(MiB - 17)
                written.update(chunk)
                f.write(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * MiB  # queued buffers, a part and its copies: not the 48 MiB written
    read = hashlib.sha256()
    with gcs.bucket(gcs_bucket).blob("stream").open("rb") as f:
        while chunk := f.read(MiB):
            read.update(chunk)
    assert read.digest() == written.digest()
    for size in (0, 5):
        with gcs.bucket(gcs_bucket).blob(f"small{size}").open("wb") as f:
            f.write(b"x" * size)
        assert gcs.bucket(gcs_bucket).blob(f"small{size}").download_as_bytes() == b"x" * size


def test_open_wb_failures(gcs, raw_gcs, gcs_bucket):
    gcs.sealstore.engine.part_size = MiB
    with pytest.raises(RuntimeError), gcs.bucket(gcs_bucket).blob("big").open("wb") as f:
        for _ in range(5):  # past the first part: the resumable session has started
            f.write(os.urandom(MiB))
        raise RuntimeError("stop")
    assert raw_gcs.bucket(gcs_bucket).get_blob("big") is None
    gcs.bucket(gcs_bucket).blob("taken").upload_from_string(b"first")
    with pytest.raises(gexc.PreconditionFailed):
        with gcs.bucket(gcs_bucket).blob("taken").open("wb", if_generation_match=0) as f:
            f.write(b"second")
    assert gcs.bucket(gcs_bucket).blob("taken").download_as_bytes() == b"first"
    with pytest.raises(UnsupportedOperation):
        gcs.bucket(gcs_bucket).blob("acl").open("wb", predefined_acl="private")


def test_bounded_memory(gcs, gcs_bucket, tmp_path):
    size = 48 * MiB
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
    blob = gcs.bucket(gcs_bucket).blob("m")
    gcs.sealstore.engine.part_size = MiB  # parts of 1 MiB: memory must not grow with the object
    tracemalloc.start()
    try:
        blob.upload_from_filename(str(path))
        _, up = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        blob.download_to_filename(str(tmp_path / "back.bin"))
        _, down = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert up < 16 * MiB  # a part, its copies on the way out, a batch of segments: not 48 MiB
    assert down < 16 * MiB
    assert os.path.getsize(tmp_path / "back.bin") == size


# ---- what is stored, and objects that were changed ----------------------------------------------


def test_metadata_and_content_headers(gcs, raw_gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob("m")
    blob.metadata = {"color": "blue"}
    blob.cache_control = "no-store"
    blob.upload_from_string(b"x" * 100, content_type="text/plain")
    plain = raw_gcs.bucket(gcs_bucket).get_blob("m")
    assert plain.content_type == "text/plain" and plain.cache_control == "no-store"
    assert plain.metadata["color"] == "blue"
    assert plain.metadata["sealstore-length"] == "100"
    assert plain.size > 100  # the stored size through a plain client
    forged = gcs.bucket(gcs_bucket).blob("forged")
    forged.metadata = {"sealstore-length": "1"}
    with pytest.raises(UnsupportedOperation):
        forged.upload_from_string(b"abc")
    assert raw_gcs.bucket(gcs_bucket).get_blob("forged") is None


def flip_on_disk(emulator, bucket, name, offset):
    path = next(p for p in emulator.stored_files() if p.parent.name == bucket and p.name == name)
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("offset", [9, 40, 60, HEADER_SIZE + 3, HEADER_SIZE + SEG + TAG + 1, -1])
def test_tampered_stored_bytes_fail(gcs, gcs_bucket, gcs_emulator, offset, tmp_path):
    data = os.urandom(3 * SEG)
    gcs.bucket(gcs_bucket).blob("t").upload_from_string(data)
    flip_on_disk(gcs_emulator, gcs_bucket, "t", offset)
    with pytest.raises((InvalidTag, KeyCommitmentMismatch, MalformedObject)):
        gcs.bucket(gcs_bucket).blob("t").download_as_bytes()
    target = tmp_path / "out.bin"
    with pytest.raises((InvalidTag, KeyCommitmentMismatch, MalformedObject)):
        gcs.bucket(gcs_bucket).blob("t").download_to_filename(str(target))
    assert not target.exists()  # no file of the verified bytes before the failure


HOSTILE_METADATA = [
    {"sealstore-header": "not base64!"},
    {"sealstore-header": "QUFBQQ=="},  # base64 of a few bytes, not a header
    {"sealstore-header": "é" * 10},
    {"sealstore-length": "1" * 40},
    {"sealstore-length": "-5"},
    {"sealstore-length": "7"},
    {"sealstore-key-id": "ffffffff"},
    {"sealstore-suite": "9"},
    {"sealstore-segment-size": "1024"},
    {"sealstore-version": "99999999999999999999999999"},
    {"sealstore-header": None},  # the copy dropped, the other fields kept
]


@pytest.mark.parametrize("edit", HOSTILE_METADATA, ids=[str(m) for m in HOSTILE_METADATA])
def test_edited_sealstore_metadata_raises_only_sealstore_errors(gcs, raw_gcs, gcs_bucket, edit):
    """A store that returns edited ``sealstore-*`` metadata (issue 27): every read through the
    sealed client raises a sealstore error (or opens the verified plaintext when the edit
    drops a copy the body repeats), never a library's exception."""
    data = marked(2 * SEG + 9)
    gcs.bucket(gcs_bucket).blob("m").upload_from_string(data)
    raw = raw_gcs.bucket(gcs_bucket).get_blob("m")
    raw.metadata = edit  # GCS merges a patch: None removes the field
    raw.patch()
    blob = gcs.bucket(gcs_bucket).blob("m")
    reads = [
        blob.download_as_bytes,
        lambda: blob.download_as_bytes(start=5, end=SEG + 5),
        lambda: gcs.bucket(gcs_bucket).get_blob("m").size,
        lambda: blob.open("rb").read(),
        lambda: gcs.bucket(gcs_bucket).copy_blob(blob, gcs.bucket(gcs_bucket), "m2").size,
    ]
    for read in reads:
        try:
            got = read()
        except SealstoreError:
            continue
        # metadata dropped (the emulator's patch drops every field): blob.size, read from the
        # loaded properties without a request, is the stored size (docs/GCS.md)
        lost = raw.size if None in edit.values() else len(data)
        assert got in (data, data[5 : SEG + 6], len(data), lost), edit


def test_cut_and_extended_objects_fail(gcs, raw_gcs, gcs_bucket):
    data = os.urandom(3 * SEG)
    gcs.bucket(gcs_bucket).blob("c").upload_from_string(data)
    plain = raw_gcs.bucket(gcs_bucket).get_blob("c")
    body = plain.download_as_bytes()
    for name, changed in (("cut", body[:-TAG]), ("seg", body[: HEADER_SIZE + SEG + TAG]),
                          ("more", body + b"\0" * 10), ("head", body[:50])):  # fmt: skip
        blob = raw_gcs.bucket(gcs_bucket).blob(name)
        blob.metadata = plain.metadata
        blob.upload_from_string(changed)
        with pytest.raises((InvalidTag, TruncatedObject, MalformedObject, WrongLocation)):
            gcs.bucket(gcs_bucket).blob(name).download_as_bytes()
    # the same bytes without the metadata: the body alone decides
    for changed in (body[:-TAG], body + b"\0"):
        gcs_raw = raw_gcs.bucket(gcs_bucket).blob("c")
        gcs_raw.upload_from_string(changed)
        with pytest.raises((InvalidTag, TruncatedObject)):
            gcs.bucket(gcs_bucket).blob("c").download_as_bytes()


def test_objects_copied_by_a_plain_client_do_not_open(gcs, raw_gcs, gcs_bucket):
    data = os.urandom(2 * SEG)
    gcs.bucket(gcs_bucket).blob("src").upload_from_string(data)
    other = f"{gcs_bucket}-o"
    raw_gcs.create_bucket(other)
    plain = raw_gcs.bucket(gcs_bucket)
    plain.copy_blob(plain.blob("src"), plain, "moved")
    plain.copy_blob(plain.blob("src"), raw_gcs.bucket(other), "src")
    for bucket, name in ((gcs_bucket, "moved"), (other, "src")):
        with pytest.raises(WrongLocation):
            gcs.bucket(bucket).blob(name).download_as_bytes()
        with pytest.raises(WrongLocation):
            gcs.bucket(bucket).blob(name).download_as_bytes(start=SEG, end=SEG + 5)
    assert gcs.bucket(gcs_bucket).blob("src").download_as_bytes() == data


def test_a_multi_mib_copy_streams_through_resumable_sessions(gcs, gcs_bucket):
    data = os.urandom(10 * MiB + 3)
    bucket = gcs.bucket(gcs_bucket)
    bucket.blob("big").upload_from_string(data)
    new = bucket.copy_blob(bucket.blob("big"), bucket, "big-copy")
    assert new.size == len(data)
    assert (
        bucket.blob("big-copy").download_as_bytes(start=5 * MiB, end=5 * MiB + 99)
        == (data[5 * MiB : 5 * MiB + 100])
    )


def test_copies_through_the_client_are_resealed(gcs, raw_gcs, gcs_bucket, gcs_emulator):
    data = marked(3 * SEG + 5)
    bucket = gcs.bucket(gcs_bucket)
    src = bucket.blob("src")
    src.metadata = {"k": "v"}
    src.upload_from_string(data, content_type="application/x-test")
    other = f"{gcs_bucket}-o"
    raw_gcs.create_bucket(other)
    new = bucket.copy_blob(src, gcs.bucket(other), "dst")
    assert new.size == len(data) and new.metadata["k"] == "v"
    assert new.content_type == "application/x-test"
    assert gcs.bucket(other).blob("dst").download_as_bytes() == data
    assert stored(raw_gcs, other, "dst")[12:44] != stored(raw_gcs, gcs_bucket, "src")[12:44]
    bucket.rename_blob(bucket.blob("src"), "renamed")
    assert bucket.blob("renamed").download_as_bytes() == data
    assert bucket.get_blob("src") is None
    dst = bucket.blob("rewritten")
    token, done, total = dst.rewrite(bucket.blob("renamed"))
    assert (token, done, total) == (None, len(data), len(data))
    assert dst.download_as_bytes() == data
    with pytest.raises(gexc.PreconditionFailed):
        bucket.copy_blob(bucket.blob("renamed"), bucket, "rewritten", if_generation_match=0)
    with pytest.raises(gexc.PreconditionFailed):
        bucket.copy_blob(bucket.blob("renamed"), bucket, "x", if_source_generation_match=1)
    assert_nothing_plain(gcs_emulator)


def test_conditions_and_missing_objects(gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob("c")
    blob.upload_from_string(b"one", if_generation_match=0)
    with pytest.raises(gexc.PreconditionFailed):
        gcs.bucket(gcs_bucket).blob("c").upload_from_string(b"two", if_generation_match=0)
    with pytest.raises(gexc.PreconditionFailed):
        gcs.bucket(gcs_bucket).blob("c").upload_from_string(b"two", if_generation_match=1)
    gcs.bucket(gcs_bucket).blob("c").upload_from_string(b"two", if_generation_match=blob.generation)
    with pytest.raises(gexc.NotFound):
        gcs.bucket(gcs_bucket).blob("nothing").download_as_bytes()
    with pytest.raises(UnsupportedOperation):
        blob.upload_from_string(b"x", if_metageneration_match=1)


def test_objects_sealstore_did_not_write(gcs_emulator, keyring, raw_gcs, gcs_bucket):
    raw_gcs.bucket(gcs_bucket).blob("plain").upload_from_string(b"not sealed")
    strict = encrypt_client(make_gcs_client(gcs_emulator), keyring)
    with pytest.raises(NotSealedObject):
        strict.bucket(gcs_bucket).blob("plain").download_as_bytes()
    lenient = encrypt_client(make_gcs_client(gcs_emulator), keyring, passthrough=True)
    plain = lenient.bucket(gcs_bucket).blob("plain")
    assert plain.download_as_bytes() == b"not sealed"
    assert plain.sealstore_sealed is False  # distinguishable from a sealed object's bytes
    with plain.open("rb") as f:
        assert f.read() == b"not sealed"
    lenient.bucket(gcs_bucket).blob("sealed-too").upload_from_string(b"sealed")
    sealed = lenient.bucket(gcs_bucket).blob("sealed-too")
    assert sealed.download_as_bytes() == b"sealed" and sealed.sealstore_sealed is True
    other = encrypt_client(make_gcs_client(gcs_emulator), Keyring.generate("AEGIS-128L", TAG))
    strict.bucket(gcs_bucket).blob("sealed").upload_from_string(b"x")
    with pytest.raises(Exception) as err:
        other.bucket(gcs_bucket).blob("sealed").download_as_bytes()
    assert "x" not in str(err.value).split()


def test_objects_of_another_tenant_context_do_not_open(gcs_emulator, keyring, gcs_bucket):
    tenant_a = encrypt_client(make_gcs_client(gcs_emulator), keyring, context=b"tenant-a")
    tenant_b = encrypt_client(make_gcs_client(gcs_emulator), keyring, context=b"tenant-b")
    tenant_a.bucket(gcs_bucket).blob("shared-name").upload_from_string(b"a's data")
    with pytest.raises(KeyCommitmentMismatch):
        tenant_b.bucket(gcs_bucket).blob("shared-name").download_as_bytes()
    with pytest.raises(KeyCommitmentMismatch):
        tenant_b.bucket(gcs_bucket).copy_blob(
            tenant_b.bucket(gcs_bucket).blob("shared-name"), tenant_b.bucket(gcs_bucket), "mine"
        )
    assert tenant_a.bucket(gcs_bucket).get_blob("mine") is None


def test_racing_writers_leave_one_whole_object(gcs, gcs_bucket):
    values = [bytes([i]) * (300_000 + i) for i in range(4)]
    threads = [
        threading.Thread(
            target=lambda v=v: gcs.bucket(gcs_bucket).blob("race").upload_from_string(v)
        )
        for v in values
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert gcs.bucket(gcs_bucket).blob("race").download_as_bytes() in values


def test_gcs_and_s3_locations_differ(gcs):
    from sealstore.adapters.s3.location import object_location

    assert gcs.sealstore.store.location("b", "k") != object_location("b", "k")


# ---- threads and a killed upload ---------------------------------------------------------------


def test_threads_sealing_beside_a_raw_block(gcs, raw_gcs, gcs_bucket, gcs_emulator):
    """One thread inside ``raw()`` does not open the raw path to the others."""
    inside, release = threading.Event(), threading.Event()

    def raw_user():
        with gcs.sealstore.raw():
            inside.set()
            release.wait(60)

    holder = threading.Thread(target=raw_user)
    holder.start()
    inside.wait(60)
    errors = []

    def work(i):
        try:
            data = marked(SEG * (i + 1) + i)
            blob = gcs.bucket(gcs_bucket).blob(f"t{i}")
            blob.upload_from_string(data)
            assert blob.download_as_bytes() == data
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    release.set()
    holder.join(60)
    assert not errors
    for i in range(8):
        assert stored(raw_gcs, gcs_bucket, f"t{i}")[:4] == b"SSOB"
    assert_nothing_plain(gcs_emulator)


_CHILD = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    from fixtures_gcs import GcsEmulator, make_gcs_client
    from sealstore.adapters.gcs import encrypt_client
    from sealstore.keyring import Keyring

    client = encrypt_client(make_gcs_client(GcsEmulator(sys.argv[2], None)), Keyring.generate())

    class Slow:
        def __init__(self):
            self.sent = 0
        def readable(self):
            return True
        def read(self, n=-1):
            n = 1 << 20 if n is None or n < 0 else n
            self.sent += n
            if self.sent > 20 << 20:  # past the first part: say so, then hang
                print("sent", flush=True)
                time.sleep(600)
            return b"v2" * (n // 2)
        def readinto(self, b):
            data = self.read(len(b))
            b[: len(data)] = data
            return len(data)

    client.bucket(sys.argv[3]).blob("k").upload_from_file(Slow())
    """
)


def test_sigkill_mid_upload_leaves_the_old_object(gcs, gcs_emulator, gcs_bucket, tmp_path):
    old = os.urandom(3 * SEG)
    gcs.bucket(gcs_bucket).blob("k").upload_from_string(old)
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    tests_dir = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    proc = subprocess.Popen(
        [sys.executable, str(script), tests_dir, gcs_emulator.url, gcs_bucket],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line == b"sent\n", proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert gcs.bucket(gcs_bucket).blob("k").download_as_bytes() == old
