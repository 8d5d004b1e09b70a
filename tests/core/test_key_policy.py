"""Policies that hold on open, and secrets that are not left behind (issue 17):
the tag-size policy on every open path, writable buffers on open, no pickling or copying of
key holders, keyed hashes wiped and refused after destroy/close, the KMS cache limits, and no
derived key in the frames of a KeyCommitmentMismatch."""

from __future__ import annotations

import copy
import io
import os
import pickle

import boto3
import pytest
from moto import mock_aws
from sealstore import stream as S
from sealstore.stream.object_key import _derive
from sealstore.config import load_config
from sealstore.errors import (
    InvalidTag,
    KeyCommitmentMismatch,
    KeyNotUsable,
    ShortTagRefused,
    WrongLocation,
)
from sealstore.keysources.file import KeyFile
from sealstore.keyring import Key, Keyring, KeyState, forget_keyring, named_opener, use_keyring
from sealstore.keysources.records import KeyRecord
from sealstore.wrapping.kms import KmsWrapper
from sealstore.keysources.database import DatabaseKeySource
from sealstore.suites import SUITES
from sealstore.wrapping import MasterKeyWrapper

CTX = b"ctx"


def twin_rings(suite="AEGIS-128X4", **kw):
    """Two keyrings over the same key: one sealing 16-byte tags, one requiring 32."""
    material, key_id = os.urandom(32), 0x0A0B0C0D
    short = Keyring([Key(key_id, suite, material, state="primary")], tag_size=16)
    strict = Keyring([Key(key_id, suite, material, state="primary")], tag_size=32, **kw)
    return short, strict


# ---- tag-size policy -------------------------------------------------------------------------


@pytest.mark.parametrize("suite", [s.label for s in SUITES if {16, 32} <= set(s.tag_sizes)])
def test_32_byte_keyring_refuses_16_byte_values_of_its_own_key(suite):
    short, strict = twin_rings(suite)
    v16 = short.seal(b"old value", CTX)
    with pytest.raises(ShortTagRefused, match="16-byte tag.*accept_short_tags"):
        strict.open(v16, CTX)
    forged = v16[:-16] + bytes(16)  # refused before decryption: same error for a forged tag
    with pytest.raises(ShortTagRefused):
        strict.open(forged, CTX)
    with pytest.raises(ShortTagRefused) as info:
        strict.open_many([strict.seal(b"new", CTX), v16], CTX)
    assert info.value.index == 1
    with pytest.raises(ShortTagRefused):
        strict.open_many([v16, v16], CTX)
    assert short.open(strict.seal(b"longer tags open", CTX), CTX) == b"longer tags open"


def test_accept_short_tags_is_explicit_and_can_be_withdrawn():
    short, strict = twin_rings(accept_short_tags=True)
    v16 = short.seal(b"migrate me", CTX)
    assert strict.open(v16, CTX) == b"migrate me"  # the slot is now derived and cached
    assert strict.open_many([v16], CTX) == [b"migrate me"]
    resealed = strict.reseal(v16, CTX)
    assert resealed[6] & 1 and strict.open(resealed, CTX) == b"migrate me"  # 32-byte tag now
    strict.accept_short_tags = False
    with pytest.raises(ShortTagRefused):
        strict.open(v16, CTX)  # the cached slot no longer serves it
    with pytest.raises(ShortTagRefused):
        strict.open_many([v16], CTX)
    with pytest.raises(ShortTagRefused):
        strict.reseal(v16, CTX)


def test_aes_gcm_values_are_not_short():
    ring = Keyring.generate("AES-256-GCM", 32)
    assert ring.open(ring.seal(b"gcm", CTX), CTX) == b"gcm"


def test_named_opener_fast_path_does_not_bypass_the_policy():
    short, strict = twin_rings(accept_short_tags=True)
    v16, v32 = short.seal(b"old", CTX), strict.seal(b"new", CTX)
    use_keyring(strict, "k17-policy")
    try:
        opener = named_opener("k17-policy", CTX, lambda v: strict.open(v, CTX))
        assert opener(v16) == b"old" and opener(v32) == b"new"
        strict.accept_short_tags = False  # the published table drops the 16-byte slot
        with pytest.raises(ShortTagRefused):
            opener(v16)
        assert opener(v32) == b"new"
    finally:
        forget_keyring("k17-policy")


def test_object_opener_applies_the_policy():
    short, strict = twin_rings()
    sealed = b"".join(S.seal_stream(b"x" * 5000, short, segment_size=1024))
    with pytest.raises(ShortTagRefused):
        b"".join(S.open_stream(io.BytesIO(sealed), strict))
    strict.accept_short_tags = True
    assert b"".join(S.open_stream(io.BytesIO(sealed), strict)) == b"x" * 5000


def test_config_and_key_sources_pass_accept_short_tags(tmp_path):
    path = tmp_path / "keys.json"
    short = KeyFile(path).init(tag_size=16)
    v16 = short.seal(b"v", CTX)
    env = {"SEALSTORE_KEY_SOURCE__PATH": str(path)}
    with pytest.raises(ShortTagRefused):
        load_config(env=env).load_keyring().open(v16, CTX)
    ring = load_config(env={**env, "SEALSTORE_ACCEPT_SHORT_TAGS": "true"}).load_keyring()
    assert ring.accept_short_tags and ring.open(v16, CTX) == b"v"


# ---- writable buffers on open ------------------------------------------------------------------


@pytest.mark.parametrize(
    "as_buffer",
    [bytes, bytearray, lambda b: memoryview(bytearray(b)), memoryview],
    ids=["bytes", "bytearray", "writable-memoryview", "readonly-memoryview"],
)
def test_open_and_open_many_take_any_buffer(as_buffer):
    ring = Keyring.generate()
    old = ring.seal(b"under the old key", CTX)
    ring.rotate()
    new = ring.seal(b"under the primary", CTX)
    for token, plain in ((new, b"under the primary"), (old, b"under the old key")):
        assert ring.open(as_buffer(token), CTX) == plain
    assert ring.open_many([as_buffer(new), as_buffer(old)], CTX) == [
        b"under the primary",
        b"under the old key",
    ]
    assert ring.open_many([as_buffer(new)] * 3, CTX) == [b"under the primary"] * 3
    with pytest.raises(InvalidTag):
        ring.open(as_buffer(new[:-1] + bytes([new[-1] ^ 1])), CTX)


# ---- no pickling, no copying ---------------------------------------------------------------------


def _holders(tmp_path):
    ring = Keyring.generate()
    ring.open(ring.seal(b"x"))
    slot = next(iter(ring._slots.values()))
    with mock_aws():
        kms = KmsWrapper("alias/x", client=boto3.client("kms", region_name="us-east-1"))
    master = MasterKeyWrapper(os.urandom(32))
    record = KeyRecord(
        1, ring.suite, KeyState.PRIMARY, ring.primary.created_at, None, os.urandom(32)
    )
    return [
        ring.primary,
        ring,
        slot,
        record,
        master,
        kms,
        KeyFile(tmp_path / "k.json", master),
        DatabaseKeySource(f"sqlite:///{tmp_path / 'r.db'}", master),
    ]


def test_key_holders_refuse_pickle_copy_and_deepcopy(tmp_path):
    for obj in _holders(tmp_path):
        name = type(obj).__name__
        for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match=f"{name} objects hold key material"):
                attempt(obj)
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            with pytest.raises(TypeError):
                pickle.dumps(obj, protocol=proto)


def test_key_record_repr_has_no_material():
    material = os.urandom(32)
    rec = KeyRecord(
        1, "AEGIS-128L", KeyState.ACTIVE, Keyring.generate().primary.created_at, None, material
    )
    assert material.hex() not in repr(rec) and repr(material)[2:-1] not in repr(rec)


# ---- keyed hashes (blind-index keys) ------------------------------------------------------------


def test_keyed_hash_keys_are_wiped_and_refused_after_destroy_and_close():
    ring = Keyring.generate()
    old = ring.primary.key_id
    first = ring.keyed_hash(old, b"info", b"value")
    assert ring.keyed_hash(old, b"info", b"value") == first
    ring.rotate()
    new = ring.primary.key_id
    ring.keyed_hash(new, b"info", b"value")
    old_buf = ring._hash_keys[(old, b"info")]
    ring.destroy(old)
    assert old_buf == bytes(32)
    with pytest.raises(KeyNotUsable):
        ring.keyed_hash(old, b"info", b"value")
    bufs = list(ring._hash_keys.values())
    ring.close()
    assert bufs and all(b == bytes(32) for b in bufs)
    with pytest.raises(KeyNotUsable, match="closed"):
        ring.keyed_hash(new, b"info", b"value")


# ---- KMS data-key cache ----------------------------------------------------------------------------


@pytest.fixture
def kms():
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        calls = []
        client.meta.events.register(
            "before-call.kms.*", lambda model, **kw: calls.append(model.name)
        )
        client.calls = calls
        yield client


def _decrypts(client) -> int:
    return client.calls.count("Decrypt")


def test_kms_cache_max_uses_and_max_age(kms):
    kek = kms.create_key()["KeyMetadata"]["KeyId"]
    material, blob = KmsWrapper(kek, client=kms).generate(7)
    w = KmsWrapper(kek, client=kms, cache_max_uses=2, cache_max_age=60)
    now = [1000.0]
    w._clock = lambda: now[0]
    for _ in range(3):  # one Decrypt, then two uses from the cache
        assert w.unwrap(7, blob) == material
    assert _decrypts(kms) == 1
    assert w.unwrap(7, blob) == material  # the entry was used up: KMS again
    assert _decrypts(kms) == 2
    now[0] += 61  # older than cache_max_age
    assert w.unwrap(7, blob) == material and _decrypts(kms) == 3
    off = KmsWrapper(kek, client=kms, cache_max_age=0)
    off.unwrap(7, blob), off.unwrap(7, blob)
    assert _decrypts(kms) == 5 and not off._cache
    for bad in ({"cache_max_age": -1}, {"cache_max_uses": 0}):
        with pytest.raises(ValueError):
            KmsWrapper(kek, client=kms, **bad)


def test_closing_a_loaded_keyring_wipes_the_kms_cache(kms, tmp_path):
    kek = kms.create_key()["KeyMetadata"]["KeyId"]
    w = KmsWrapper(kek, client=kms)
    ring = KeyFile(tmp_path / "keys.json", w).init()
    ring.close()
    assert not w._cache
    w2 = KmsWrapper(kek, client=kms)
    source2 = KeyFile(tmp_path / "keys.json", w2)
    ring2 = source2.load()
    buffers = [entry[0] for entry in w2._cache.values()]
    assert buffers and any(b != bytes(32) for b in buffers)
    meta = source2._meta_key[1]
    assert meta != bytes(32)
    ring2.close()
    assert not w2._cache and all(b == bytes(32) for b in buffers)
    assert meta == bytes(32) and source2._meta_key is None  # the metadata key too


def test_kms_cache_limits_from_config(tmp_path):
    cfg = load_config(
        env={
            "SEALSTORE_KEY_SOURCE__WRAPPING__TYPE": "aws-kms",
            "SEALSTORE_KEY_SOURCE__WRAPPING__KMS_KEY_ID": "alias/x",
            "SEALSTORE_KEY_SOURCE__WRAPPING__CACHE_MAX_AGE": "5",
            "SEALSTORE_KEY_SOURCE__WRAPPING__CACHE_MAX_USES": "3",
            "SEALSTORE_KEY_SOURCE__WRAPPING__REGION": "us-east-1",
        }
    )
    with mock_aws():
        w = cfg.wrapper()
    assert (w.cache_max_age, w.cache_max_uses) == (5.0, 3)


# ---- no derived key in the frames of a raising open --------------------------------------------


def _frame_values(tb):
    """Every local of every sealstore frame of a traceback (this test's own frame excluded)."""
    frames = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != __file__:
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    assert frames
    for frame in frames:
        for value in frame.f_locals.values():
            yield value
            if isinstance(value, (tuple, list)):
                yield from value


def test_commitment_mismatch_leaves_no_derived_key_in_any_frame():
    ring = Keyring.generate()
    sealed = b"".join(S.seal_stream(b"secret object", ring, context=b"right"))
    h = S.parse_object_header(sealed[: S.HEADER_SIZE])
    derived = _derive(ring.primary.reveal_material(), h.pack()[:12], h.salt, h.suite, b"wrong")
    with pytest.raises(KeyCommitmentMismatch) as info:
        b"".join(S.open_stream(io.BytesIO(sealed), ring, context=b"wrong"))
    secrets = {bytes(x) for x in derived}
    for value in _frame_values(info.value.__traceback__):
        if isinstance(value, (bytes, bytearray, memoryview)):
            assert bytes(value) not in secrets


def test_s3_get_applies_the_policy(s3_endpoint, bucket):
    from fixtures_s3 import make_client
    from sealstore.adapters.s3 import encrypt_client

    short, strict = twin_rings()
    writer = encrypt_client(make_client(s3_endpoint), short, segment_size=1024)
    reader = encrypt_client(make_client(s3_endpoint), strict, segment_size=1024)
    writer.put_object(Bucket=bucket, Key="old", Body=b"y" * 3000)
    with pytest.raises(ShortTagRefused):
        reader.get_object(Bucket=bucket, Key="old")["Body"].read()
    with pytest.raises(ShortTagRefused):
        reader.get_object(Bucket=bucket, Key="old", Range="bytes=100-199")["Body"].read()
    strict.accept_short_tags = True
    assert reader.get_object(Bucket=bucket, Key="old")["Body"].read() == b"y" * 3000


def test_wrong_location_leaves_no_key_material_in_any_frame():
    ring = Keyring.generate()
    sealed = b"".join(S.seal_stream(b"secret object", ring, location=b"bucket/alice"))
    h = S.parse_object_header(sealed[: S.HEADER_SIZE])
    material = ring.primary.reveal_material()
    okey, prefix, _commit = _derive(material, h.pack()[:12], h.salt, h.suite, b"")
    secrets = {
        bytes(material),
        bytes(okey),
        bytes(prefix),
    }  # the commitment is public: in the header
    for location in (b"bucket/bob", None):
        with pytest.raises(WrongLocation) as info:
            b"".join(S.open_stream(io.BytesIO(sealed), ring, location=location))
        for value in _frame_values(info.value.__traceback__):
            if isinstance(value, (bytes, bytearray, memoryview)):
                assert bytes(value) not in secrets
