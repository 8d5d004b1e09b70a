"""The engine's pieces the S3 binding's copies and client-driven uploads run on: which copies are
re-sealed (``must_reseal``), the part loop of a large re-sealing copy (``copy_in_parts``), the
span of a part copy (``part_copy_span``) and which part of an upload ends the object
(``part_ends_object``)."""

from __future__ import annotations

import os
import threading

import pytest
from sealstore.adapters.objects import MemoryStore, ObjectSealing, PartLimits
from sealstore.adapters.objects.engine import copy_in_parts, must_reseal
from sealstore.adapters.objects.parts import part_ends_object
from sealstore.adapters.objects.ranges import part_copy_span
from sealstore.errors import UnsupportedOperation
from sealstore.keyring import Keyring

SEG = 4096


@pytest.fixture
def sealed_headers():
    """Headers of a bound and of an unbound sealed object (memory store)."""
    keyring = Keyring.generate("AEGIS-128L", 16)
    store = MemoryStore()
    store.create_bucket("b")
    out = {}
    for bound in (True, False):
        sealing = ObjectSealing(keyring, segment_size=SEG, bind_location=bound)
        sealing.seal(store, "b", f"k{bound}", b"x" * 100)
        found = sealing.header(store, store.head("b", f"k{bound}"))
        assert found is not None
        out[bound] = found[0]
    assert out[True].bound and not out[False].bound
    return out


@pytest.mark.parametrize("tenanted", [False, True])
@pytest.mark.parametrize("bind_location", [False, True])
def test_which_copies_are_resealed(sealed_headers, bind_location, tenanted):
    bound, unbound = sealed_headers[True], sealed_headers[False]
    for same_place in (False, True):  # an object that is not sealed keeps its bytes
        assert not must_reseal(
            None, same_place=same_place, bind_location=bind_location, tenanted=tenanted
        )
    # a bound object elsewhere would not open there: always re-sealed; onto itself: never
    assert must_reseal(bound, same_place=False, bind_location=bind_location, tenanted=tenanted)
    assert not must_reseal(bound, same_place=True, bind_location=bind_location, tenanted=tenanted)
    # unbound: re-sealed when the writer binds, or for another tenant's place
    want = bind_location or tenanted
    assert must_reseal(unbound, same_place=False, bind_location=bind_location,
                       tenanted=tenanted) is want  # fmt: skip
    assert must_reseal(unbound, same_place=True, bind_location=bind_location,
                       tenanted=False) is bind_location  # fmt: skip


@pytest.mark.parametrize("length", [1, 99, 100, 101, 1000])
def test_parts_cover_the_source_exactly_in_order(length):
    data = os.urandom(length)
    reads, sent, lock = [], {}, threading.Lock()

    def read(first, last):
        with lock:
            reads.append((first, last))
        return data[first : last + 1]

    def send(number, chunk):
        with lock:
            sent[number] = chunk
        return f"etag-{number}"

    parts = copy_in_parts(length, 100, read, send, workers=3)
    count = -(-length // 100)
    assert list(parts) == [(n, f"etag-{n}") for n in range(1, count + 1)]
    assert sorted(reads) == [(i * 100, min(i * 100 + 100, length) - 1) for i in range(count)]
    assert b"".join(sent[n] for n in range(1, count + 1)) == data


def test_a_short_read_stops_the_copy_before_its_part_is_sent():
    """A source that shrank under the copy never becomes a shorter destination."""
    sent = []

    def read(first, last):
        return b"y" * (last - first + (0 if first else 1))  # the second part comes short

    with pytest.raises(UnsupportedOperation, match="gave 99 of bytes 100-199"):
        copy_in_parts(250, 100, read, lambda n, d: sent.append(n) or "e", workers=1)
    assert sent == [1]


def test_a_failing_part_is_raised():
    class Boom(Exception):
        pass

    def send(number, chunk):
        if number == 2:
            raise Boom("part 2")
        return "e"

    with pytest.raises(Boom):
        copy_in_parts(300, 100, lambda a, b: b"z" * (b - a + 1), send, workers=2)
    with pytest.raises(ValueError):
        copy_in_parts(10, 0, lambda a, b: b"", send, workers=1)


def test_part_copy_spans():
    assert part_copy_span(None, 1000, 1000) == (0, 999)
    assert part_copy_span("", 0, 10) == (0, -1)  # an empty source: an empty part
    assert part_copy_span("bytes=10-19", 1000, 10) == (10, 19)
    assert part_copy_span("bytes=990-2000", 1000, 10) == (990, 999)
    assert part_copy_span("bytes=-5", 1000, 10) == (995, 999)
    for outside in ("bytes=1000-1001", "bytes=-0"):
        with pytest.raises(UnsupportedOperation, match="not inside the source's 1000 bytes"):
            part_copy_span(outside, 1000, 10)
    with pytest.raises(UnsupportedOperation, match="more than the upload's part size 10"):
        part_copy_span("bytes=0-10", 1000, 10)
    with pytest.raises(UnsupportedOperation, match="more than the upload's part size 999"):
        part_copy_span(None, 1000, 999)
    with pytest.raises(UnsupportedOperation):  # two ranges: refused, not the first one taken
        part_copy_span("bytes=0-1,5-6", 1000, 10)


def test_which_part_ends_an_upload():
    # declared length 250 in parts of 100: only part 3 (50 bytes at 200) ends it
    assert not part_ends_object(1, 100, 100, 250)
    assert not part_ends_object(2, 100, 100, 250)
    assert part_ends_object(3, 50, 100, 250)
    assert part_ends_object(3, 100, 100, 300)  # a full last part ends it too
    assert part_ends_object(1, 0, 100, 0)  # an empty object: one empty part
    for number, size in ((3, 49), (3, 51), (4, 10), (1, 50)):  # short or past the length
        with pytest.raises(UnsupportedOperation, match="does not fit the declared length 250"):
            part_ends_object(number, size, 100, 250)
    with pytest.raises(UnsupportedOperation, match="more than the part size 100"):
        part_ends_object(1, 101, 100, None)
    # unknown length: a short part ends the object, a full one does not
    assert part_ends_object(5, 99, 100, None) and not part_ends_object(5, 100, 100, None)


class _Recording(MemoryStore):
    """A memory store that records its part uploads (number, thread) and may refuse parts in
    any order."""

    def __init__(self, *, any_order: bool) -> None:
        super().__init__(PartLimits(min_part=SEG * 4, max_part=1 << 30, max_parts=10_000,
                                    max_single=SEG * 8))  # fmt: skip
        self.parts_in_any_order = any_order
        self.sent: list[tuple[int, int]] = []
        self.create_bucket("b")

    def upload_part(self, bucket, key, upload_id, number, body, *, options=None):
        self.sent.append((number, threading.get_ident()))
        return super().upload_part(bucket, key, upload_id, number, body, options=options)


@pytest.mark.parametrize("any_order", [True, False])
@pytest.mark.parametrize("parts", [3, 4])  # 3 parts and a short one; exactly 4 full parts
def test_a_large_copy_is_resealed_in_parts(any_order, parts):
    store = _Recording(any_order=any_order)
    sealing = ObjectSealing(Keyring.generate("AEGIS-128L", 16), segment_size=SEG,
                            part_size=store.limits.min_part)  # fmt: skip
    size = store.limits.min_part
    data = os.urandom(parts * size + (0 if parts == 4 else 1000))
    sealing.seal(store, "b", "src", data, metadata={"color": "blue"})
    store.sent.clear()
    written = sealing.copy(store, "b", "src", "b", "dst")
    assert sorted(n for n, _ in store.sent) == list(range(1, -(-len(data) // size) + 1))
    assert len({t for _, t in store.sent}) >= 1
    if not any_order:  # in order, one at a time (GCS's resumable session)
        assert [n for n, _ in store.sent] == sorted(n for n, _ in store.sent)
        assert len({t for _, t in store.sent}) == 1
    assert written == store.head("b", "dst").etag
    assert sealing.open(store, "b", "dst").read() == data
    assert (
        sealing.open(store, "b", "dst", first=size - 3, last=size + 2).read()
        == (data[size - 3 : size + 3])
    )
    assert store.head("b", "dst").metadata["color"] == "blue"
    # the stored size is that of the object sealed whole: same layout, one final segment
    assert store.head("b", "dst").size == store.head("b", "src").size


def test_a_large_copy_of_a_changed_source_is_aborted():
    store = _Recording(any_order=True)
    sealing = ObjectSealing(Keyring.generate("AEGIS-128L", 16), segment_size=SEG,
                            part_size=store.limits.min_part)  # fmt: skip
    data = os.urandom(3 * store.limits.min_part)
    sealing.seal(store, "b", "src", data)
    head = store.head("b", "src")
    sealing.seal(store, "b", "src", data[::-1])  # replaced after the HEAD the copy uses
    from sealstore.errors import ObjectChanged, ObjectNotFound

    with pytest.raises(ObjectChanged):
        sealing.copy(store, "b", "src", "b", "dst", head=head)
    with pytest.raises(ObjectNotFound):
        store.head("b", "dst")
    assert not store._uploads  # aborted
