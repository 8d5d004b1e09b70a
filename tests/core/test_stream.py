"""The sealed object format (sealstore.stream): sizes, headers, tampering, ranges, readers."""

from __future__ import annotations

import io
import os
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealstore import stream as S
from sealstore.stream import object_key
from sealstore.errors import (
    ShortTagRefused,
    InvalidTag,
    KeyCommitmentMismatch,
    KeyNotUsable,
    MalformedObject,
    NotSealedObject,
    SourceChanged,
    TruncatedObject,
    UnknownKeyId,
    WrongLocation,
)
from sealstore.keyring import Keyring

from aead_cases import UNUSED_SUITE_ID

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

SEG = 1024  # small segments: many segments per test object, cheap


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X4", 32)


def seal(data, keyring, seg=SEG, **kw) -> bytes:
    return b"".join(S.seal_stream(data, keyring, segment_size=seg, **kw))


def unseal(sealed, keyring, **kw) -> bytes:
    return b"".join(S.open_stream(io.BytesIO(sealed), keyring, **kw))


def segments(sealed: bytes, seg=SEG, tag=32) -> list[bytes]:
    body = sealed[S.HEADER_SIZE :]
    return [body[i : i + seg + tag] for i in range(0, len(body), seg + tag)]


SIZES = [0, 1, SEG - 1, SEG, SEG + 1, 5 * SEG, S.BATCH_BYTES // SEG * SEG + 7]


class TestRoundTrip:
    @pytest.mark.parametrize("n", SIZES)
    @pytest.mark.parametrize("kind", ["bytes", "bytearray", "file", "iterable", "memoryview"])
    def test_sizes_and_sources(self, keyring, n, kind):
        data = os.urandom(n)
        src = {
            "bytes": data,
            "bytearray": bytearray(data),
            "file": io.BytesIO(data),
            "iterable": (data[i : i + 333] for i in range(0, n, 333)),
            "memoryview": memoryview(data),
        }[kind]
        sealed = seal(src, keyring)
        assert len(sealed) == S.sealed_size(n, SEG, 32)
        assert len(segments(sealed)) == n // SEG + 1
        assert unseal(sealed, keyring) == data

    @pytest.mark.parametrize(
        "suite,tag", [("AES-256-GCM", 16), ("AEGIS-128L", 16), ("AEGIS-128X2", 32)]
    )
    def test_suites(self, suite, tag):
        kr = Keyring.generate(suite, tag)
        data = os.urandom(3 * SEG + 5)
        sealed = seal(data, kr)
        h = S.parse_object_header(sealed)
        assert (str(h.suite), h.tag_size) == (suite, tag)
        assert len(sealed) == S.sealed_size(len(data), SEG, tag)
        assert unseal(sealed, kr) == data

    def test_default_segment_size(self, keyring):
        data = os.urandom(S.DEFAULT_SEGMENT_SIZE + 1)
        sealed = b"".join(S.seal_stream(data, keyring))
        assert S.parse_object_header(sealed).segment_size == S.DEFAULT_SEGMENT_SIZE
        assert unseal(sealed, keyring) == data

    def test_fresh_salt_per_object(self, keyring):
        a, b = seal(b"same", keyring), seal(b"same", keyring)
        assert a[12:44] != b[12:44] and a[S.HEADER_SIZE :] != b[S.HEADER_SIZE :]

    def test_no_plaintext_in_output(self, keyring):
        data = b"SECRET-PLAINTEXT-" * 1000
        assert b"SECRET-PLAINTEXT" not in seal(data, keyring)

    @settings(max_examples=40)
    @given(st.binary(max_size=5 * SEG), st.integers(1, 3000), st.sampled_from([1024, 2048]))
    def test_property_roundtrip(self, keyring, data, chunk, seg):
        chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
        sealed = seal(iter(chunks), keyring, seg=seg)
        assert unseal(sealed, keyring) == data
        assert S.plaintext_size(len(sealed), seg, 32) == len(data)

    def test_context_binding(self, keyring):
        sealed = seal(b"x" * 100, keyring, context=b"bucket/key")
        assert unseal(sealed, keyring, context=b"bucket/key") == b"x" * 100
        with pytest.raises(KeyCommitmentMismatch):
            unseal(sealed, keyring, context=b"other")


class TestSizes:
    def test_inverse(self):
        for seg in (1024, 65536):
            for tag in (16, 32):
                for n in range(0, 3 * seg + 3, 97):
                    assert S.plaintext_size(S.sealed_size(n, seg, tag), seg, tag) == n

    @pytest.mark.parametrize(
        "length", [0, 1, S.HEADER_SIZE, S.HEADER_SIZE + 31, S.HEADER_SIZE + SEG + 32]
    )
    def test_impossible_lengths(self, length):
        # header + 31 bytes cannot hold a 32-byte tag; header + one full segment lacks the final one
        with pytest.raises(TruncatedObject):
            S.plaintext_size(length, SEG, 32)

    def test_bad_segment_size(self, keyring):
        for bad in (1000, 512, 1 << 25, True):
            with pytest.raises(ValueError):
                S.ObjectCipher.create(keyring, segment_size=bad)


class TestHeader:
    def test_layout(self, keyring):
        sealed = seal(b"abc", keyring)
        magic, ver, suite, flags, log2, key_id = struct.unpack(">4sBBBBI", sealed[:12])
        assert (magic, ver, suite, flags, log2) == (b"SSOB", 1, 0x03, 1, 10)
        assert key_id == keyring.primary.key_id
        h = S.parse_object_header(sealed)
        assert h.pack() == sealed[: S.HEADER_SIZE]

    @pytest.mark.parametrize("data", [b"", b"SSO", b"PK\x03\x04 a zip file", b"plain text object"])
    def test_not_sealed(self, data):
        with pytest.raises(NotSealedObject):
            S.parse_object_header(data)

    @pytest.mark.parametrize(
        "offset,value",
        [(4, 2), (5, UNUSED_SUITE_ID), (6, 0x04), (7, 9), (7, 25)],
        ids=["version", "suite", "flags", "seg-small", "seg-large"],
    )
    def test_malformed(self, keyring, offset, value):
        sealed = bytearray(seal(b"abc", keyring))
        sealed[offset] = value
        with pytest.raises(MalformedObject):
            unseal(bytes(sealed), keyring)

    def test_short_header(self, keyring):
        with pytest.raises(MalformedObject):
            unseal(seal(b"abc", keyring)[:40], keyring)

    @pytest.mark.parametrize("offset", [6, 7, 12, 43, 44, 75])
    def test_header_edit_detected(self, keyring, offset):
        sealed = bytearray(seal(os.urandom(3000), keyring))
        sealed[offset] ^= 0x01 if offset not in (6, 7) else 0
        if offset == 6:  # drop the 256-bit tag flag: a valid header of another layout
            sealed[6] = 0
        if offset == 7:
            sealed[7] = 11
        refused = (InvalidTag, ShortTagRefused) if offset == 6 else InvalidTag  # tag policy
        with pytest.raises(refused):  # KeyCommitmentMismatch is an InvalidTag
            unseal(bytes(sealed), keyring)
        if offset == 6:
            keyring.accept_short_tags = True
            try:
                with pytest.raises(InvalidTag):
                    unseal(bytes(sealed), keyring)
            finally:
                keyring.accept_short_tags = False

    def test_unknown_and_retired_keys(self, keyring):
        other = Keyring.generate()
        sealed = seal(b"abc", other)
        with pytest.raises(UnknownKeyId):
            unseal(sealed, keyring)
        old = other.primary.key_id
        other.rotate()
        assert unseal(sealed, other) == b"abc"  # active keys open
        other.retire(old)
        with pytest.raises(KeyNotUsable):
            unseal(sealed, other)
        assert unseal(sealed, other, allow_retired=True) == b"abc"
        other.destroy(old)
        with pytest.raises(KeyNotUsable):
            unseal(sealed, other, allow_retired=True)

    def test_same_id_other_material(self, keyring):
        from sealstore.keyring import Key

        impostor = Keyring(
            [
                Key(
                    keyring.primary.key_id,
                    "AEGIS-128X4",
                    os.urandom(32),
                    state="primary",
                )
            ]
        )
        with pytest.raises(KeyCommitmentMismatch):
            unseal(seal(b"abc", keyring), impostor)


class TestTampering:
    DATA = os.urandom(4 * SEG + 100)

    @pytest.fixture(scope="class")
    def sealed(self, keyring):
        return seal(self.DATA, keyring)

    @pytest.mark.parametrize("segment", range(5))
    @pytest.mark.parametrize("where", ["first", "middle", "tag"])
    def test_flip_one_byte(self, keyring, sealed, segment, where):
        start = S.HEADER_SIZE + segment * (SEG + 32)
        length = len(segments(sealed)[segment])
        pos = start + {"first": 0, "middle": length // 2, "tag": length - 1}[where]
        bad = bytearray(sealed)
        bad[pos] ^= 0x80
        with pytest.raises(InvalidTag) as err:
            unseal(bytes(bad), keyring)
        assert err.value.index == segment

    def test_swap_segments(self, keyring, sealed):
        segs = segments(sealed)
        swapped = sealed[: S.HEADER_SIZE] + segs[1] + segs[0] + b"".join(segs[2:])
        with pytest.raises(InvalidTag):
            unseal(swapped, keyring)

    def test_duplicate_segment(self, keyring, sealed):
        segs = segments(sealed)
        dup = sealed[: S.HEADER_SIZE] + segs[0] + b"".join(segs)
        with pytest.raises(InvalidTag):
            unseal(dup, keyring)

    @pytest.mark.parametrize("extra", [b"\x00", os.urandom(32), os.urandom(SEG + 32)])
    def test_append(self, keyring, sealed, extra):
        with pytest.raises(InvalidTag):
            unseal(sealed + extra, keyring)

    @pytest.mark.parametrize("keep", [0, 1, 3, 4])  # whole segments kept, final dropped
    def test_truncate_at_segment_boundary(self, keyring, sealed, keep):
        cut = sealed[: S.HEADER_SIZE + keep * (SEG + 32)]
        with pytest.raises(TruncatedObject) as err:
            unseal(cut, keyring)
        assert err.value.index == keep

    @pytest.mark.parametrize("drop", [1, 31, 32, 33, 100])
    def test_truncate_inside(self, keyring, sealed, drop):
        with pytest.raises(InvalidTag):
            unseal(sealed[:-drop], keyring)

    def test_truncation_raises_after_verified_data(self, keyring, sealed):
        cut = sealed[: S.HEADER_SIZE + 2 * (SEG + 32)]
        cipher = S.ObjectCipher.from_header(keyring, cut)
        reader = S.OpeningReader(cipher, io.BytesIO(cut[S.HEADER_SIZE :]))
        with pytest.raises(TruncatedObject):
            reader.read()

    def test_no_release_before_tag(self, keyring):
        # one batch of several segments, the last one bad: not a byte comes out
        data = os.urandom(6 * SEG)
        bad = bytearray(seal(data, keyring))
        bad[-40] ^= 1
        cipher = S.ObjectCipher.from_header(keyring, bad)
        reader = S.OpeningReader(cipher, io.BytesIO(bytes(bad[S.HEADER_SIZE :])))
        with pytest.raises(InvalidTag):
            reader.read(1)


class TestRanges:
    @pytest.mark.parametrize("n", [1, SEG - 1, SEG, SEG + 1, 3 * SEG, 3 * SEG + 17])
    def test_every_boundary(self, keyring, n):
        data = os.urandom(n)
        sealed = seal(data, keyring)
        cipher = S.ObjectCipher.from_header(keyring, sealed)
        edges = sorted({0, 1, n - 1, n // 2} | {k * SEG + d for k in range(4) for d in (-1, 0, 1)})
        edges = [e for e in edges if 0 <= e < n]
        for first in edges:
            for last in edges + [None, n + 5]:
                if last is not None and last < first:
                    continue
                plan = S.plan_range(first, last, n, SEG, 32)
                want = data[first : (n if last is None else last + 1)]
                assert plan.length == len(want)
                reader = S.OpeningReader(
                    cipher,
                    io.BytesIO(sealed[plan.start : plan.stop]),
                    first_index=plan.first_segment,
                    final=plan.final,
                    segments=plan.segments,
                    skip=plan.skip,
                    length=plan.length,
                )
                assert reader.read() == want, (n, first, last)

    def test_plan_errors(self):
        with pytest.raises(ValueError):
            S.plan_range(10, 20, 10, SEG, 32)
        with pytest.raises(ValueError):
            S.plan_range(0, 0, 0, SEG, 32)

    def test_range_segment_swapped(self, keyring):
        data = os.urandom(4 * SEG)
        sealed = seal(data, keyring)
        segs = segments(sealed)
        cipher = S.ObjectCipher.from_header(keyring, sealed)
        reader = S.OpeningReader(
            cipher, io.BytesIO(segs[2]), first_index=1, final=False, segments=1
        )
        with pytest.raises(InvalidTag):
            reader.read()

    def test_range_short(self, keyring):
        data = os.urandom(4 * SEG)
        sealed = seal(data, keyring)
        cipher = S.ObjectCipher.from_header(keyring, sealed)
        plan = S.plan_range(0, 2 * SEG - 1, len(data), SEG, 32)
        reader = S.OpeningReader(
            cipher,
            io.BytesIO(sealed[plan.start : plan.stop - 1]),
            final=False,
            segments=plan.segments,
        )
        with pytest.raises(TruncatedObject):
            reader.read()


class TestSealingReader:
    def test_seek_and_reread_identical(self, keyring):
        data = os.urandom(S.BATCH_BYTES + 3 * SEG + 5)
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        reader = S.SealingReader(cipher, io.BytesIO(data))
        assert reader.seekable() and len(reader) == cipher.sealed_size(len(data))
        first = reader.read()
        reader.seek(0)
        assert reader.read() == first
        reader.seek(len(first) - 100)
        assert reader.read() == first[-100:]
        assert b"".join(S.open_stream(first, keyring)) == data

    def test_changed_source_detected(self, keyring):
        data = bytearray(os.urandom(S.BATCH_BYTES + 3 * SEG))  # two batches: seek(0) re-seals
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        reader = S.SealingReader(cipher, data)
        reader.read()
        data[5] ^= 1
        reader.seek(0)
        with pytest.raises(SourceChanged):
            reader.read()

    def test_declared_length_mismatch(self, keyring):
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        with pytest.raises(SourceChanged):
            S.SealingReader(cipher, iter([b"x" * 10]), 11).read()
        with pytest.raises(SourceChanged):
            S.SealingReader(cipher, iter([b"x" * 12]), 11).read()

    def test_part_of_object(self, keyring):
        """Parts sealed independently (any order) concatenate into one object."""
        data = os.urandom(5 * SEG + 9)
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        part = 2 * SEG
        pieces = {}
        for number in (3, 1, 2):  # out of order
            off = (number - 1) * part
            chunk = data[off : off + part]
            last = off + part >= len(data)
            pieces[number] = S.SealingReader(
                cipher,
                io.BytesIO(chunk),
                first_index=off // SEG,
                final=last,
                header=number == 1,
            ).read()
        sealed = pieces[1] + pieces[2] + pieces[3]
        assert unseal(sealed, keyring) == data

    def test_unknown_length_is_sequential(self, keyring):
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        reader = S.SealingReader(cipher, iter([b"a" * 5000]))
        assert not reader.seekable() and reader.size is None
        out = reader.read()
        assert reader.size == len(out) == cipher.sealed_size(5000)
        with pytest.raises(io.UnsupportedOperation):
            reader.seek(0)

    def test_bad_sources(self, keyring):
        cipher = S.ObjectCipher.create(keyring, segment_size=SEG)
        with pytest.raises(TypeError):
            S.SealingReader(cipher, "text")
        with pytest.raises(TypeError):
            S.SealingReader(cipher, 12345)
        with pytest.raises(TypeError):
            S.SealingReader(cipher, iter(["text"])).read()


def test_stream_memory_is_bounded(keyring):
    """Sealing then opening 48 MiB holds a few batches, not the object."""
    size, chunk = 48 << 20, 1 << 20
    block = os.urandom(chunk)

    def produce():
        for _ in range(size // chunk):
            yield block

    tracemalloc.start()
    try:
        sealed_chunks = S.seal_stream(produce(), keyring)
        total = sum(len(c) for c in S.open_stream(sealed_chunks, keyring))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == size
    assert peak < 24 << 20, peak  # two readers' batch buffers plus in-flight chunks


def test_repr_has_no_secrets(keyring):
    cipher = S.ObjectCipher.create(keyring)
    text = repr(cipher)
    assert "AEGIS-128X4" in text and cipher._prefix.hex() not in text
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(cipher)


@pytest.mark.parametrize(
    "name, suites",
    [
        ("objects-v1.json", {"AEGIS-128X4", "AEGIS-128L", "AES-256-GCM"}),
        ("objects-v1-aegis256.json", {"AEGIS-256X4", "AEGIS-256X2", "AEGIS-256"}),
    ],
)
def test_frozen_vectors(name, suites):
    """Objects sealed by earlier releases still open (tests/vectors/objects/objects-v1*.json)."""
    import json
    from pathlib import Path

    from sealstore.keyring import Key

    path = Path(__file__).parent.parent / "vectors" / "objects" / name
    cases = json.loads(path.read_text())
    assert {c["suite"] for c in cases} == suites
    for case in cases:
        key = Key(
            int(case["key_id"], 16),
            case["suite"],
            bytes.fromhex(case["material"]),
            state="primary",
        )
        kr = Keyring([key], tag_size=case["tag_size"])
        sealed = bytes.fromhex(case["sealed"])
        h = S.parse_object_header(sealed)
        assert (h.segment_size, h.tag_size, str(h.suite)) == (
            case["segment_size"],
            case["tag_size"],
            case["suite"],
        )
        opened = b"".join(S.open_stream(sealed, kr, context=bytes.fromhex(case["context"])))
        assert opened == bytes.fromhex(case["plaintext"])
        bad = bytearray(sealed)
        bad[-1] ^= 1
        with pytest.raises(InvalidTag):
            b"".join(S.open_stream(bytes(bad), kr, context=bytes.fromhex(case["context"])))


# ---- objects bound to a location (flag bit 1) --------------------------------------------------

LOC = b"\x00\x00\x00\x05place\x00\x00\x00\x01a"


def test_bound_object_opens_only_at_its_location(keyring):
    data = os.urandom(3 * SEG + 7)
    sealed = seal(data, keyring, location=LOC)
    h = S.parse_object_header(sealed)
    assert h.bound and h.flags == 0x03
    assert unseal(sealed, keyring, location=LOC) == data
    for other in (LOC + b"x", b"", LOC[:-1] + b"b"):
        with pytest.raises(WrongLocation, match="another location"):
            unseal(sealed, keyring, location=other)
    with pytest.raises(WrongLocation, match="no location"):
        unseal(sealed, keyring)
    with pytest.raises(KeyCommitmentMismatch):  # the context is checked first
        unseal(sealed, keyring, location=LOC, context=b"other")


def test_bound_object_key_depends_on_the_location(keyring, monkeypatch):
    """The location is in the key, not only in the check: with the check forced to pass, a
    wrong location still fails every segment (and releases nothing)."""
    sealed = seal(b"z" * (2 * SEG), keyring, location=LOC)
    h = S.parse_object_header(sealed)
    good = S.ObjectCipher.from_header(keyring, h, location=LOC)
    monkeypatch.setattr(object_key, "_location_matches", lambda *a: True)
    bad = S.ObjectCipher.from_header(keyring, h, location=b"elsewhere")
    body = sealed[S.HEADER_SIZE :]
    assert S.OpeningReader(good, body).read() == b"z" * (2 * SEG)
    with pytest.raises(InvalidTag):
        S.OpeningReader(bad, body).read()


def test_unbound_objects_ignore_the_location(keyring):
    sealed = seal(b"old object", keyring)
    assert not S.parse_object_header(sealed).bound
    assert unseal(sealed, keyring, location=LOC) == b"old object"


@pytest.mark.parametrize("where", ["flag", "check", "salt"])
def test_edited_binding_fields_are_tampering(keyring, where):
    """Clearing the flag, editing the location check or the salt: the commitment fails, so an
    edit is never reported as a move (and a bound object cannot be downgraded to unbound)."""
    sealed = bytearray(seal(b"q" * 100, keyring, location=LOC))
    offset = {"flag": 6, "check": 43, "salt": 12}[where]
    sealed[offset] ^= 0x02 if where == "flag" else 0x01
    with pytest.raises(KeyCommitmentMismatch):
        unseal(bytes(sealed), keyring, location=LOC)


def test_reserved_flag_bits_still_refused(keyring):
    sealed = bytearray(seal(b"q", keyring, location=LOC))
    for bit in range(2, 8):
        bad = bytearray(sealed)
        bad[6] |= 1 << bit
        with pytest.raises(MalformedObject):
            S.parse_object_header(bytes(bad))


def test_frozen_bound_vectors():
    """Bound objects of tests/vectors/objects/objects-v1-bound.json keep opening, only at
    their location."""
    import json
    from pathlib import Path

    from sealstore.keyring import Key

    path = Path(__file__).parent.parent / "vectors" / "objects" / "objects-v1-bound.json"
    cases = json.loads(path.read_text())
    assert {c["suite"] for c in cases} == {"AEGIS-128X4", "AEGIS-128L", "AES-256-GCM"}
    for case in cases:
        key = Key(int(case["key_id"], 16), case["suite"], bytes.fromhex(case["material"]),
                  state="primary")  # fmt: skip
        kr = Keyring([key], tag_size=case["tag_size"])
        sealed = bytes.fromhex(case["sealed"])
        context, location = bytes.fromhex(case["context"]), bytes.fromhex(case["location"])
        assert S.parse_object_header(sealed).bound
        opened = b"".join(S.open_stream(sealed, kr, context=context, location=location))
        assert opened == bytes.fromhex(case["plaintext"])
        with pytest.raises(WrongLocation):
            b"".join(S.open_stream(sealed, kr, context=context, location=location + b"x"))
        bad = bytearray(sealed)
        bad[-1] ^= 1
        with pytest.raises(InvalidTag):
            b"".join(S.open_stream(bytes(bad), kr, context=context, location=location))
