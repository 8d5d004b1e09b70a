"""The object-store contract, run on every store (``STORES``: the in-memory store, S3 on moto's
server and on LocalStack): raw semantics (put, ranged get, head, conditions, multipart, copy,
list, versions, delete) and the engine over each (sealing, ranged opening, multipart sealing of a
stream, tampering, copies of stored bytes refused by location binding, re-sealed copies).

A new store adds one record to ``STORES``: a fixture that yields ``(store, fresh bucket name)``.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import pytest
from sealstore.adapters.objects import MemoryStore, ObjectSealing, ObjectStore, Written
from sealstore.adapters.objects import metadata as M
from sealstore.errors import (
    InvalidTag,
    KeyCommitmentMismatch,
    MalformedObject,
    NotSealedObject,
    ObjectChanged,
    ObjectNotFound,
    RangeNotSatisfiable,
    UnsupportedOperation,
    WrongLocation,
)
from sealstore.keyring import Keyring
from sealstore.stream import HEADER_SIZE

SEG = 4096


def _bucket_name() -> str:
    return f"c-{uuid.uuid4().hex[:20]}"


@pytest.fixture
def memory_store():
    store = MemoryStore()
    name = _bucket_name()
    store.create_bucket(name)
    return store, name


def _s3_store(endpoint):
    from fixtures_s3 import make_client
    from sealstore.adapters.s3.store import S3Store

    client = make_client(endpoint)
    name = _bucket_name()
    client.create_bucket(Bucket=name)
    return S3Store(client), name


@pytest.fixture
def s3_moto_store(s3_endpoint):
    return _s3_store(s3_endpoint)


@pytest.fixture
def s3_localstack_store(localstack_endpoint):
    return _s3_store(localstack_endpoint)


@pytest.fixture
def gcs_store(gcs_emulator):
    from fixtures_gcs import make_gcs_client
    from sealstore.adapters.gcs.store import GCSStore

    client = make_gcs_client(gcs_emulator)
    name = _bucket_name()
    client.create_bucket(name)
    return GCSStore(client), name


#: one record per store: its name in test ids -> the fixture giving (store, fresh bucket)
STORES = {
    "memory": "memory_store",
    "s3-moto": "s3_moto_store",
    "s3-localstack": "s3_localstack_store",
    "gcs": "gcs_store",
}


@pytest.fixture(params=sorted(STORES))
def env(request):
    return request.getfixturevalue(STORES[request.param])


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128L", 16)


@pytest.fixture
def sealing(keyring, env):
    store, _ = env
    return ObjectSealing(keyring, segment_size=SEG, part_size=store.limits.min_part)


def read_all(store, bucket, key, first=0, last=None, **kw) -> bytes:
    body = store.get(bucket, key, first, last, **kw)
    try:
        return body.read()
    finally:
        body.close()


# ---- the raw store -----------------------------------------------------------------------------


def test_the_store_follows_the_protocol(env):
    store, _ = env
    assert isinstance(store, ObjectStore)
    assert store.location("b", "k") != store.location("b", "k2")
    assert store.location("a", "b/c") != store.location("a/b", "c")
    assert store.scheme in store.location("b", "k").decode("ascii", "replace")


def test_put_head_get_and_ranges(env):
    store, bucket = env
    data = os.urandom(1000)
    etag = store.put(bucket, "d/a", data, length=len(data), metadata={"color": "blue"})
    head = store.head(bucket, "d/a")
    assert (head.size, head.etag) == (1000, etag)
    assert head.metadata.get("color") == "blue"
    assert read_all(store, bucket, "d/a") == data
    assert read_all(store, bucket, "d/a", 10, 19) == data[10:20]
    assert read_all(store, bucket, "d/a", 990) == data[990:]
    assert read_all(store, bucket, "d/a", 995, 5000) == data[995:]
    assert read_all(store, bucket, "d/a", 1000) == b""
    with pytest.raises(ObjectNotFound):
        store.head(bucket, "d/missing")
    with pytest.raises(ObjectNotFound):
        store.get(bucket, "d/missing")


def test_conditions(env):
    store, bucket = env
    etag = store.put(bucket, "k", b"one", length=3)
    with pytest.raises(ObjectChanged):
        store.put(bucket, "k", b"two", length=3, if_none_match=True)
    with pytest.raises(ObjectChanged):
        store.put(bucket, "k", b"two", length=3, if_match='"0000"')
    with pytest.raises(ObjectChanged):
        store.get(bucket, "k", if_match='"0000"')
    new = store.put(bucket, "k", b"two", length=3, if_match=etag)
    assert new != etag and read_all(store, bucket, "k", if_match=new) == b"two"
    store.put(bucket, "fresh", b"x", length=1, if_none_match=True)


def test_multipart(env):
    store, bucket = env
    first, second = os.urandom(store.limits.min_part), os.urandom(1000)
    upload = store.create_multipart(bucket, "mp", metadata={"m": "1"})
    parts = [(1, store.upload_part(bucket, "mp", upload, 1, first)),
             (2, store.upload_part(bucket, "mp", upload, 2, second))]  # fmt: skip
    etag = store.complete_multipart(bucket, "mp", upload, parts)
    head = store.head(bucket, "mp")
    assert (head.size, head.etag, head.metadata.get("m")) == (len(first) + 1000, etag, "1")
    assert (
        read_all(store, bucket, "mp", len(first) - 2, len(first) + 1)
        == (first + second)[len(first) - 2 : len(first) + 2]
    )
    # a condition on completion: nothing replaced
    upload = store.create_multipart(bucket, "mp")
    parts = [(1, store.upload_part(bucket, "mp", upload, 1, b"tiny"))]
    with pytest.raises(ObjectChanged):
        store.complete_multipart(bucket, "mp", upload, parts, if_match='"0000"')
    store.abort_multipart(bucket, "mp", upload)
    assert store.head(bucket, "mp").etag == etag
    # aborted: nothing written
    upload = store.create_multipart(bucket, "never")
    store.upload_part(bucket, "never", upload, 1, b"x")
    store.abort_multipart(bucket, "never", upload)
    with pytest.raises(ObjectNotFound):
        store.head(bucket, "never")


def test_copy_list_versions_delete(env):
    store, bucket = env
    for key in ("p/b", "p/a", "p/c", "q/a"):
        store.put(bucket, key, key.encode(), length=len(key), metadata={"k": key})
    etag = store.copy(bucket, "p/a", bucket, "p/d")
    assert read_all(store, bucket, "p/d") == b"p/a"
    assert store.head(bucket, "p/d").metadata.get("k") == "p/a"
    store.copy(bucket, "p/a", bucket, "p/e", metadata={"k": "new"})
    assert store.head(bucket, "p/e").metadata.get("k") == "new"
    with pytest.raises(ObjectChanged):
        store.copy(bucket, "p/a", bucket, "p/f", if_match='"0000"')
    assert etag
    assert [o.key for o in store.list(bucket, "p/")] == ["p/a", "p/b", "p/c", "p/d", "p/e"]
    assert [o.key for o in store.list(bucket, "p/", start_after="p/c")] == ["p/d", "p/e"]
    listed = {o.key: o for o in store.list(bucket, "p/")}
    assert listed["p/b"].size == 3 and listed["p/b"].etag == store.head(bucket, "p/b").etag
    assert {o.key for o in store.versions(bucket, "q/")} == {"q/a"}
    for o in store.versions(bucket, "p/"):
        assert store.head(bucket, o.key, version=o.version).size == o.size
    store.delete(bucket, "p/a")
    store.delete(bucket, "p/a")  # absent: no error
    assert [o.key for o in store.list(bucket, "p/")] == ["p/b", "p/c", "p/d", "p/e"]


#: stores that take per-request extras (``options``), by scheme: one each they accept
OPTIONS = {"s3": {"RequestPayer": "requester"}}


def _every_call(store, bucket, options):
    """Each method that takes ``options``, called with them (results in call order)."""
    out = [store.put(bucket, "o", b"abc", length=3, options=options)]
    out.append(store.head(bucket, "o", options=options))
    out.append(read_all(store, bucket, "o", 1, 1, options=options))
    upload = store.create_multipart(bucket, "om", options=options)
    parts = [(1, store.upload_part(bucket, "om", upload, 1, b"xyz", options=options))]
    out.append(store.complete_multipart(bucket, "om", upload, parts, options=options))
    upload = store.create_multipart(bucket, "oa", options=options)
    store.abort_multipart(bucket, "oa", upload, options=options)
    return out


def test_per_request_options_are_passed_on_or_refused(env):
    store, bucket = env
    put, head, got, done = _every_call(store, bucket, {})  # empty: taken by every store
    assert (head.etag, got) == (put, b"b") and store.head(bucket, "om").etag == done
    accepted = OPTIONS.get(store.scheme)
    if accepted is not None:
        put, head, got, done = _every_call(store, bucket, accepted)
        assert (head.etag, got) == (put, b"b") and store.head(bucket, "om").etag == done
        with pytest.raises(Exception, match="NoSuchParameter"):  # passed on as they are
            store.head(bucket, "o", options={"NoSuchParameter": "x"})
        return
    secret = {"SSECustomerKey": "the-customer-key"}
    calls = [
        lambda: store.head(bucket, "o", options=secret),
        lambda: store.get(bucket, "o", options=secret),
        lambda: store.put(bucket, "n", b"x", length=1, options=secret),
        lambda: store.create_multipart(bucket, "n", options=secret),
        lambda: store.upload_part(bucket, "om", "u", 1, b"x", options=secret),
        lambda: store.complete_multipart(bucket, "om", "u", [(1, "t")], options=secret),
        lambda: store.abort_multipart(bucket, "om", "u", options=secret),
    ]
    for call in calls:
        with pytest.raises(UnsupportedOperation, match="SSECustomerKey") as err:
            call()
        assert "the-customer-key" not in str(err.value)
    with pytest.raises(ObjectNotFound):
        store.head(bucket, "n")


def test_writes_answer_a_written_record(env):
    store, bucket = env
    sealing = ObjectSealing(Keyring.generate("AEGIS-128L", 16), segment_size=SEG)
    written = sealing.seal(store, bucket, "w", b"data")
    assert isinstance(written, Written) and written.etag == store.head(bucket, "w").etag
    assert written == written.etag and isinstance(written.answer, dict)
    copied = sealing.copy(store, bucket, "w", bucket, "w2")
    assert isinstance(copied, Written) and copied.etag == store.head(bucket, "w2").etag
    assert Written.of(copied) is copied and Written.of("t") == "t"


def test_the_engine_passes_options_to_every_request(env, sealing):
    store, bucket = env
    accepted = OPTIONS.get(store.scheme)
    big = os.urandom(2 * store.limits.min_part)
    if accepted is None:
        with pytest.raises(UnsupportedOperation):
            sealing.seal(store, bucket, "e", b"x", options={"RequestPayer": "requester"})
        with pytest.raises(ObjectNotFound):
            store.head(bucket, "e")
        return
    sealing.seal(store, bucket, "e", b"x", options=accepted)
    sealing.seal(store, bucket, "big", big, options=accepted)  # a multipart upload
    opened = sealing.open(store, bucket, "big", first=5, last=9, options=accepted)
    assert opened.read() == big[5:10]
    sealing.copy(store, bucket, "big", bucket, "big2", options=accepted, source_options=accepted)
    assert sealing.open(store, bucket, "big2").read() == big
    with pytest.raises(Exception, match="NoSuchParameter"):
        sealing.open(store, bucket, "e", options={"NoSuchParameter": "x"})
    with pytest.raises(Exception, match="NoSuchParameter"):
        sealing.copy(store, bucket, "e", bucket, "e2", source_options={"NoSuchParameter": "x"})
    with pytest.raises(ObjectNotFound):
        store.head(bucket, "e2")


# ---- the engine over each store ----------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, SEG - 1, SEG, SEG + 1, 5 * SEG + 17])
def test_seal_and_open(env, sealing, size):
    store, bucket = env
    data = os.urandom(size)
    sealing.seal(store, bucket, "o", data, metadata={"owner": "me"})
    head = store.head(bucket, "o")
    assert size < 16 or data[:16] not in read_all(store, bucket, "o")
    assert head.metadata.get("owner") == "me" and M.header_from_metadata(head.metadata)
    assert sealing.size(store, bucket, "o") == size
    opened = sealing.open(store, bucket, "o")
    assert opened.read() == data and opened.sealed and opened.length == size
    opened.close()
    for first, last in ((0, 0), (1, SEG), (SEG - 1, SEG + 1), (size // 2, None), (3, 10**9)):
        if first >= size:
            with pytest.raises(RangeNotSatisfiable) as err:
                sealing.open(store, bucket, "o", first=first, last=last)
            assert err.value.size == size
            continue
        with sealing.open(store, bucket, "o", first=first, last=last) as part:
            end = size if last is None else min(last + 1, size)
            assert part.read() == data[first:end]
            assert part.content_range == f"bytes {first}-{end - 1}/{size}"
    with sealing.open(store, bucket, "o", suffix=7) as tail:
        assert tail.read() == data[-7:] if size else tail.read() == b""


def test_a_stream_of_unknown_length_is_sealed_in_parts(env, sealing):
    store, bucket = env
    part = store.limits.min_part
    data = os.urandom(2 * part + 12345)
    chunks = (data[i : i + 100_000] for i in range(0, len(data), 100_000))
    sealing.seal(store, bucket, "big", chunks)
    assert M.stored_length(store.head(bucket, "big").metadata) is None  # not known beforehand
    assert sealing.size(store, bucket, "big") == len(data)
    assert (
        hashlib.sha256(sealing.open(store, bucket, "big").read()).digest()
        == hashlib.sha256(data).digest()
    )
    with sealing.open(store, bucket, "big", first=part - 5, last=part + 5) as r:
        assert r.read() == data[part - 5 : part + 6]
    # a short stream takes one request
    sealing.seal(store, bucket, "small", iter([b"abc", b"def"]))
    assert sealing.open(store, bucket, "small").read() == b"abcdef"


def _restore(store, bucket, key, data, meta):
    store.put(bucket, key, data, length=len(data), metadata=meta)


@pytest.mark.parametrize("where", ["segment", "final tag", "header", "salt"])
def test_a_flipped_stored_byte_is_refused(env, sealing, where):
    store, bucket = env
    sealing.seal(store, bucket, "t", os.urandom(3 * SEG + 5))
    stored = bytearray(read_all(store, bucket, "t"))
    meta = dict(store.head(bucket, "t").metadata)
    offset = {"segment": HEADER_SIZE + SEG + 3, "final tag": len(stored) - 1,
              "header": 7, "salt": 20}[where]  # fmt: skip
    stored[offset] ^= 1
    _restore(store, bucket, "t", bytes(stored), meta)
    with pytest.raises((InvalidTag, MalformedObject)) as err:
        sealing.open(store, bucket, "t").read()
    if where in ("header", "salt"):  # the metadata's header copy no longer matches the body
        assert isinstance(err.value, MalformedObject)
    else:
        assert isinstance(err.value, InvalidTag)
    # without the metadata copy, the body's own header is refused by the commitment or a tag
    _restore(store, bucket, "t", bytes(stored), M.split_user_metadata(meta))
    with pytest.raises((InvalidTag, MalformedObject)):
        sealing.open(store, bucket, "t").read()


def test_edited_metadata_is_refused(env, sealing):
    store, bucket = env
    sealing.seal(store, bucket, "m", os.urandom(100))
    data = read_all(store, bucket, "m")
    meta = dict(store.head(bucket, "m").metadata)
    _restore(store, bucket, "m", data, {**meta, M.LENGTH: "99"})
    with pytest.raises(MalformedObject):
        sealing.open(store, bucket, "m")
    _restore(store, bucket, "m", data, {**meta, M.KEY_ID: "00000001"})
    with pytest.raises(MalformedObject):
        sealing.open(store, bucket, "m")
    _restore(store, bucket, "m", data, {})  # metadata lost: the body's header serves
    assert sealing.open(store, bucket, "m").read() and sealing.size(store, bucket, "m") == 100


def test_raw_copies_of_stored_bytes_are_refused_by_the_location(env, sealing):
    store, bucket = env
    data = os.urandom(2 * SEG)
    sealing.seal(store, bucket, "src", data)
    store.copy(bucket, "src", bucket, "dst")  # another tool copies the stored bytes
    with pytest.raises(WrongLocation):
        sealing.open(store, bucket, "dst")
    with pytest.raises(WrongLocation):
        sealing.open(store, bucket, "dst", first=SEG, last=SEG + 1)
    # the engine's copy re-seals for the destination
    sealing.copy(store, bucket, "src", bucket, "dst")
    assert sealing.open(store, bucket, "dst").read() == data
    assert (
        read_all(store, bucket, "dst")[:HEADER_SIZE] != read_all(store, bucket, "src")[:HEADER_SIZE]
    )


def test_another_context_or_keyring_does_not_open(env, sealing, keyring):
    store, bucket = env
    sealing.seal(store, bucket, "x", b"secret bytes")
    other = ObjectSealing(keyring, segment_size=SEG, context=b"tenant-2")
    with pytest.raises(KeyCommitmentMismatch):
        other.open(store, bucket, "x")
    stranger = ObjectSealing(Keyring.generate("AEGIS-128L", 16), segment_size=SEG)
    with pytest.raises(Exception) as err:
        stranger.open(store, bucket, "x")
    assert "secret" not in str(err.value) and "secret" not in repr(err.value)


def test_unsealed_objects_are_refused_or_passed_through(env, keyring):
    store, bucket = env
    store.put(bucket, "plain", b"hello world", length=11)
    with pytest.raises(NotSealedObject):
        ObjectSealing(keyring).open(store, bucket, "plain")
    opened = ObjectSealing(keyring, passthrough=True).open(store, bucket, "plain", first=6)
    assert (opened.read(), opened.sealed) == (b"world", False)


def test_a_replaced_object_is_not_mixed_with_the_one_read(env, sealing):
    store, bucket = env
    sealing.seal(store, bucket, "r", b"first version")
    head = store.head(bucket, "r")
    sealing.seal(store, bucket, "r", b"second version")
    with pytest.raises(ObjectChanged):
        sealing.open(store, bucket, "r", head=head)
    with pytest.raises(ObjectChanged):
        sealing.seal(store, bucket, "r", b"third", if_match=head.etag)
    assert sealing.open(store, bucket, "r").read() == b"second version"


def test_reserved_metadata_is_refused_before_anything_is_written(env, sealing):
    store, bucket = env
    with pytest.raises(UnsupportedOperation):
        sealing.seal(store, bucket, "f", b"x", metadata={"Sealstore-Key-Id": "1"})
    with pytest.raises(ObjectNotFound):
        store.head(bucket, "f")
