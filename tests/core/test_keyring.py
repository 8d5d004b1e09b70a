"""sealstore.keyring: round trips, every error class, context binding, rotation, batches, threads."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sealstore
from sealstore import format as fmt
from sealstore.errors import (
    ShortTagRefused,
    InvalidKeyring,
    InvalidTag,
    KeyNotUsable,
    MalformedCiphertext,
    SealstoreError,
    UnknownKeyId,
    UnknownKeyring,
)
from sealstore.format import Suite, column_context
from sealstore.keyring import (
    Key,
    Keyring,
    KeyState,
    forget_keyring,
    get_keyring,
    use_keyring,
)

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

SUITE_TAGS = [(s, t) for s in Suite for t in fmt.tag_sizes(s)]
SUITE_IDS = [f"{s}-tag{t * 8}" for s, t in SUITE_TAGS]
SIZES = [0, 1, 15, 16, 17, 100, 1023, 1024, 4096, 70000]


def ring(suite=Suite.AEGIS_128X4, tag=32, **kw) -> Keyring:
    return Keyring.generate(suite, tag, **kw)


def flip(value: bytes, pos: int) -> bytes:
    b = bytearray(value)
    b[pos] ^= 0x01
    return bytes(b)


# ---- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("suite, tag", SUITE_TAGS, ids=SUITE_IDS)
@pytest.mark.parametrize("adaptive", [0, 1024], ids=["fixed", "adaptive"])
def test_round_trip_every_suite(suite, tag, adaptive):
    kr = ring(suite, tag, adaptive_threshold=adaptive)
    ctx = column_context("users", "email")
    for size in SIZES:
        pt = os.urandom(size)
        sealed = kr.seal(pt, ctx)
        h = fmt.parse_header(sealed)
        assert h.key_id == kr.primary.key_id
        expected_tag = 16 if suite is Suite.AES_256_GCM else tag
        assert h.tag_size == expected_tag
        assert len(sealed) == size + fmt.overhead(h.suite, expected_tag)
        assert kr.open(sealed, ctx) == pt
        assert kr.open(bytearray(sealed), bytearray(ctx)) == pt
        assert kr.open(memoryview(sealed), memoryview(ctx)) == pt


def test_default_is_aegis_128x4_with_256_bit_tag_and_55_bytes_overhead():
    kr = Keyring.generate()
    big = kr.seal(bytes(2000))
    assert fmt.parse_header(big).suite is Suite.AEGIS_128X4
    assert len(big) - 2000 == 55
    small = kr.seal(b"x" * 100)  # size-adaptive: below the threshold AEGIS-128L, same key
    h = fmt.parse_header(small)
    assert (h.suite, h.tag_size, h.key_id) == (Suite.AEGIS_128L, 32, kr.primary.key_id)
    assert len(small) - 100 == 55
    assert kr.open(small) == b"x" * 100


def test_adaptive_threshold_boundary_and_disabled():
    kr = ring(adaptive_threshold=64)
    assert fmt.parse_header(kr.seal(bytes(63))).suite is Suite.AEGIS_128L
    assert fmt.parse_header(kr.seal(bytes(64))).suite is Suite.AEGIS_128X4
    fixed = ring(adaptive_threshold=0)
    assert fmt.parse_header(fixed.seal(b"")).suite is Suite.AEGIS_128X4
    with pytest.raises(ValueError):
        ring(adaptive_threshold=-1)


def test_nonces_are_fresh():
    kr = ring()
    values = {kr.seal(b"same") for _ in range(200)}
    assert len(values) == 200


# ---- context binding ------------------------------------------------------------------------------


def test_swapping_values_between_columns_rows_and_tables_fails():
    kr = ring()
    email = column_context("users", "email")
    phone = column_context("users", "phone")
    a = kr.seal(b"alice@example.org", email)
    b = kr.seal(b"+1 555 0100", phone)
    assert kr.open(a, email) == b"alice@example.org"
    with pytest.raises(InvalidTag):
        kr.open(a, phone)
    with pytest.raises(InvalidTag):
        kr.open(b, email)
    with pytest.raises(InvalidTag):
        kr.open(a, column_context("customers", "email"))
    row1 = kr.seal(b"secret", column_context("users", "ssn", row=1))
    with pytest.raises(InvalidTag):
        kr.open(row1, column_context("users", "ssn", row=2))
    with pytest.raises(InvalidTag):
        kr.open(row1, column_context("users", "ssn"))
    with pytest.raises(InvalidTag):
        kr.open(kr.seal(b"x"), b"any")  # empty context is a context too


@pytest.mark.parametrize("suite, tag", SUITE_TAGS, ids=SUITE_IDS)
def test_every_bit_of_header_nonce_body_and_tag_is_authenticated(suite, tag):
    kr = ring(suite, tag, adaptive_threshold=0)
    sealed = kr.seal(b"0123456789", b"ctx")
    for pos in range(len(sealed)):
        bad = flip(sealed, pos)
        with pytest.raises((InvalidTag, MalformedCiphertext, UnknownKeyId, ShortTagRefused)):
            kr.open(bad, b"ctx")
    # an edited flags byte that still parses (tag flag) on an AEGIS value is caught too, by the
    # tag-size policy (32 -> 16) or, with short tags accepted, by authentication
    if suite is not Suite.AES_256_GCM:
        with pytest.raises((InvalidTag, MalformedCiphertext, ShortTagRefused)):
            kr.open(flip(sealed, 6), b"ctx")
        kr.accept_short_tags = True
        with pytest.raises((InvalidTag, MalformedCiphertext)):
            kr.open(flip(sealed, 6), b"ctx")


def test_header_edits_within_a_keyring_fail_authentication():
    kr = ring(adaptive_threshold=0)
    x4 = kr.seal(bytes(50), b"c")
    as_l = x4[:1] + bytes([Suite.AEGIS_128L]) + x4[2:]  # same key, other AEGIS variant
    with pytest.raises(InvalidTag):
        kr.open(as_l, b"c")
    old = kr.primary.key_id
    kr.rotate()
    moved = x4[:2] + kr.primary.key_id.to_bytes(4, "big") + x4[6:]  # other key id
    with pytest.raises(InvalidTag):
        kr.open(moved, b"c")
    assert kr.open(x4, b"c") == bytes(50) and old != kr.primary.key_id


# ---- errors before decryption --------------------------------------------------------------------


def test_malformed_ciphertext():
    kr = ring()
    good = kr.seal(b"abc")
    cases = {
        "too short": good[:10],
        "header only": good[:7],
        "nothing": b"",
        "version": b"\x02" + good[1:],
        "suite": good[:1] + b"\x09" + good[2:],
        "flags": good[:6] + b"\x80" + good[7:],
        "one byte short of overhead": good[: 55 - 1],
    }
    for name, bad in cases.items():
        with pytest.raises(MalformedCiphertext):
            kr.open(bad)
        with pytest.raises(MalformedCiphertext):
            kr.open_many([good, bad])


def test_suite_family_mismatch_is_malformed():
    kr = ring(Suite.AES_256_GCM)
    gcm = kr.seal(bytes(40))
    as_aegis = gcm[:1] + bytes([Suite.AEGIS_128L]) + gcm[2:]
    with pytest.raises(MalformedCiphertext, match="AES-256-GCM key"):
        kr.open(as_aegis)


def test_unknown_key_id_names_the_id_and_never_the_key():
    kr, other = ring(), ring()
    sealed = other.seal(b"hello")
    with pytest.raises(UnknownKeyId) as info:
        kr.open(sealed)
    err = info.value
    assert err.key_id == other.primary.key_id
    assert other.primary.id_hex in str(err)
    material = other.primary.reveal_material()
    assert material.hex() not in str(err) and isinstance(err, LookupError)
    with pytest.raises(UnknownKeyId):
        kr.get(12345)


def test_retired_keys_open_only_when_allowed():
    kr = ring()
    old_value = kr.seal(b"old")
    old = kr.primary.key_id
    kr.rotate()
    assert kr.open(old_value) == b"old"  # active
    kr.retire(old)
    assert kr.get(old).state is KeyState.RETIRED
    with pytest.raises(KeyNotUsable, match="retired"):
        kr.open(old_value)
    with pytest.raises(KeyNotUsable):
        kr.open_many([kr.seal(b"new"), old_value])
    assert kr.open(old_value, allow_retired=True) == b"old"
    assert kr.open_many([old_value], allow_retired=True) == [b"old"]
    with pytest.raises(KeyNotUsable):  # the per-call permission does not stick
        kr.open(old_value)
    kr.allow_retired = True
    assert kr.open(old_value) == b"old"
    kr.allow_retired = False
    with pytest.raises(KeyNotUsable):
        kr.open(old_value)
    kr.reactivate(old)
    assert kr.open(old_value) == b"old"


def test_destroyed_keys_never_open_and_lose_material():
    kr = ring()
    v = kr.seal(b"gone")
    old = kr.primary
    kr.rotate()
    kr.destroy(old.key_id)
    assert old.state is KeyState.DESTROYED
    with pytest.raises(KeyNotUsable, match="destroyed"):
        kr.open(v)
    with pytest.raises(KeyNotUsable, match="destroyed"):
        kr.open(v, allow_retired=True)
    with pytest.raises(KeyNotUsable):
        old.reveal_material()
    with pytest.raises(InvalidKeyring):
        kr.reactivate(old.key_id)


def test_invalid_keyring_invariants():
    m = os.urandom(32)
    with pytest.raises(InvalidKeyring, match="exactly one primary"):
        Keyring([Key(1, "AEGIS-128L", m)])
    with pytest.raises(InvalidKeyring, match="exactly one primary"):
        Keyring(
            [Key(1, "AEGIS-128L", m, state="primary"), Key(2, "AEGIS-128L", m, state="primary")]
        )
    with pytest.raises(InvalidKeyring, match="duplicate"):
        Keyring([Key(1, "AEGIS-128L", m, state="primary"), Key(1, "AEGIS-128L", m)])
    with pytest.raises(InvalidKeyring, match="32 bytes"):
        Key(1, "AEGIS-128L", b"short")
    with pytest.raises(InvalidKeyring, match="state"):
        Key(1, "AEGIS-128L", m, state="sleeping")
    with pytest.raises(InvalidKeyring):
        Key(1 << 32, "AEGIS-128L", m)
    with pytest.raises(InvalidKeyring, match="material is required"):
        Key(1, "AEGIS-128L", None)
    with pytest.raises(ValueError):
        Keyring([Key(1, "AEGIS-128L", m, state="primary")], tag_size=20)
    kr = ring()
    with pytest.raises(InvalidKeyring, match="rotate first"):
        kr.retire(kr.primary.key_id)
    with pytest.raises(InvalidKeyring):
        kr.destroy(kr.primary.key_id)
    with pytest.raises(InvalidKeyring):
        kr.add(Key(5, "AEGIS-128L", m, state="primary"))
    kr.add(Key(5, "AEGIS-128L", m))
    with pytest.raises(InvalidKeyring, match="duplicate"):
        kr.add(Key(5, "AEGIS-128L", m))
    kr.retire(5)
    with pytest.raises(InvalidKeyring, match="only an active key"):
        kr.promote(5)
    with pytest.raises(TypeError):
        Keyring(["not a key"])


def test_type_errors():
    kr = ring()
    with pytest.raises(TypeError):
        kr.open("not bytes")
    with pytest.raises(TypeError):
        kr.seal(b"x", "str context")
    with pytest.raises(TypeError):
        kr.seal(12345)
    with pytest.raises(TypeError):
        kr.open_many([kr.seal(b"a"), 5])


def test_every_error_is_a_sealstore_error():
    for cls in (
        MalformedCiphertext,
        UnknownKeyId,
        KeyNotUsable,
        InvalidKeyring,
        UnknownKeyring,
        InvalidTag,
    ):
        assert issubclass(cls, SealstoreError)


# ---- rotation and reseal --------------------------------------------------------------------------


def test_rotate_demotes_and_reseal_moves_values():
    kr = ring()
    first = kr.primary
    v1 = kr.seal(b"payload", b"ctx")
    new = kr.rotate()
    assert kr.primary is new and new.state is KeyState.PRIMARY
    assert first.state is KeyState.ACTIVE and first.rotated_at is not None
    assert new.rotated_at is None and new.key_id != first.key_id
    assert kr.needs_reseal(v1)
    v2 = kr.reseal(v1, b"ctx")
    assert fmt.key_id_of(v2) == new.key_id and kr.open(v2, b"ctx") == b"payload"
    assert kr.reseal(v2, b"ctx") is v2  # already under the primary: returned as is
    assert not kr.needs_reseal(v2)
    with pytest.raises(InvalidTag):
        kr.reseal(v1, b"other")
    kr.retire(first.key_id)
    with pytest.raises(KeyNotUsable):
        kr.reseal(v1, b"ctx")
    assert kr.open(kr.reseal(v1, b"ctx", allow_retired=True), b"ctx") == b"payload"


def test_rotate_to_another_suite_keeps_old_values_readable():
    kr = ring(Suite.AES_256_GCM)
    v = kr.seal(b"gcm")
    kr.rotate(suite="AEGIS-128X2")
    assert kr.primary.suite is Suite.AEGIS_128X2
    assert fmt.parse_header(kr.seal(bytes(5000))).suite is Suite.AEGIS_128X2
    assert kr.open(v) == b"gcm"


def test_promote_staged_key():
    kr = ring()
    staged = kr.new_key()
    assert staged.state is KeyState.ACTIVE
    assert fmt.key_id_of(kr.seal(b"x")) != staged.key_id
    kr.promote(staged.key_id)
    assert fmt.key_id_of(kr.seal(b"x")) == staged.key_id
    assert kr.promote(staged.key_id) is staged  # idempotent


def test_reseal_many():
    kr = ring()
    old = [kr.seal(b"v%d" % i, b"c") for i in range(10)]
    kr.rotate()
    mixed = old[:5] + [kr.seal(b"n%d" % i, b"c") for i in range(5)]
    out = kr.reseal_many(mixed, b"c")
    assert all(not kr.needs_reseal(v) for v in out)
    assert out[5:] == mixed[5:] and all(a is b for a, b in zip(out[5:], mixed[5:]))
    assert kr.open_many(out, b"c") == [b"v0", b"v1", b"v2", b"v3", b"v4"] + [
        b"n%d" % i for i in range(5)
    ]
    bad = list(mixed)
    bad[3] = flip(bad[3], 30)
    with pytest.raises(InvalidTag) as info:
        kr.reseal_many(bad, b"c")
    assert info.value.index == 3


# ---- batches ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suite, tag", SUITE_TAGS, ids=SUITE_IDS)
def test_seal_many_open_many(suite, tag):
    kr = ring(suite, tag)
    pts = [os.urandom(n) for n in (0, 5, 100, 1023, 1024, 3000, 20)]
    sealed = kr.seal_many(pts, b"ctx")
    assert [kr.open(v, b"ctx") for v in sealed] == pts
    assert kr.open_many(sealed, b"ctx") == pts
    assert kr.open_many(iter(sealed), b"ctx") == pts
    assert kr.seal_many([], b"ctx") == [] and kr.open_many([], b"ctx") == []
    assert kr.open_many(kr.seal_many(iter(pts[:2]))) == pts[:2]
    with pytest.raises(InvalidTag):
        kr.open_many(sealed, b"other")


@pytest.mark.parametrize("suite, tag", SUITE_TAGS, ids=SUITE_IDS)
def test_seal_many_names_the_position_of_a_bad_plaintext(suite, tag):
    kr = ring(suite, tag)
    good = [b"x" * n for n in (5, 2000, 7, 3000, 9, 11)]  # both sides of the adaptive threshold
    for pos in range(len(good)):
        for bad in (12345, "text", None, [1, 2]):
            values = list(good)
            values[pos] = bad
            with pytest.raises(TypeError) as info:
                kr.seal_many(values, b"ctx")
            assert info.value.index == pos, (pos, bad)
    small = [b"s" * n for n in range(9)]  # one slot: the four-lane batch kernel for AEGIS-128L
    small[6] = "text"
    with pytest.raises(TypeError) as info:
        kr.seal_many(small)
    assert info.value.index == 6


def test_open_many_across_keys_and_failure_index():
    kr = ring()
    a = [kr.seal(b"a%d" % i) for i in range(4)]
    kr.rotate(suite="AES-256-GCM")
    b = [kr.seal(b"b%d" % i) for i in range(4)]
    mixed = [a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]]
    assert kr.open_many(mixed) == [b"a0", b"b0", b"a1", b"b1", b"a2", b"b2", b"a3", b"b3"]
    for pos in (0, 3, 6):
        bad = list(mixed)
        bad[pos] = flip(bad[pos], len(bad[pos]) - 1)
        with pytest.raises(InvalidTag) as info:
            kr.open_many(bad)
        assert info.value.index == pos
    bad = list(mixed)
    bad[5] = flip(bad[5], len(bad[5]) - 1)
    bad[2] = flip(bad[2], len(bad[2]) - 1)
    with pytest.raises(InvalidTag) as info:
        kr.open_many(bad)
    assert info.value.index == 2  # the first failing position across both keys
    stranger = ring().seal(b"z")
    with pytest.raises(UnknownKeyId) as info:
        kr.open_many(mixed[:3] + [stranger])
    assert info.value.index == 3


# ---- threads ----------------------------------------------------------------------------------------


def test_one_keyring_many_threads_with_rotation():
    kr = ring()
    ctx = column_context("t", "c")
    errors = []
    barrier = threading.Barrier(8)

    def work(n):
        barrier.wait()
        out = []
        for i in range(300):
            pt = b"%d-%d" % (n, i) * (1 + i % 40)
            v = kr.seal(pt, ctx)
            if kr.open(v, ctx) != pt:
                errors.append((n, i))
            out.append((pt, v))
            if n == 0 and i % 100 == 50:
                kr.rotate()
        batch = kr.seal_many([p for p, _ in out[:50]], ctx)
        if kr.open_many(batch, ctx) != [p for p, _ in out[:50]]:
            errors.append((n, "batch"))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    assert not errors
    assert len(kr) == 4  # three rotations by thread 0
    for out in results:  # every value from every thread still opens after the rotations
        assert [kr.open(v, ctx) for _, v in out] == [p for p, _ in out]


# ---- secrets never printed, wiping ------------------------------------------------------------------


def test_repr_and_str_never_contain_key_material():
    kr = ring()
    kr.rotate()
    for key in kr.keys:
        m = key.reveal_material()
        for text in (repr(kr), str(kr), repr(key), str(key), repr(kr.keys)):
            assert m.hex() not in text and m.hex().upper() not in text
            assert repr(m)[2:-1] not in text
    assert "primary=" in repr(kr) and kr.primary.id_hex in repr(kr)


def test_close_wipes_and_refuses():
    kr = ring()
    v = kr.seal(b"x")
    keys = kr.keys
    buffers = [k._material for k in keys]
    with kr:
        pass
    assert kr.closed and all(b == bytearray(32) for b in buffers)
    with pytest.raises(KeyNotUsable, match="closed"):
        kr.seal(b"x")
    with pytest.raises(KeyNotUsable, match="closed"):
        kr.open(v)
    with pytest.raises(KeyNotUsable, match="closed"):
        kr.seal_many([b"x"])
    with pytest.raises(KeyNotUsable):
        kr.rotate()
    kr.close()  # idempotent
    assert "closed" in repr(kr)


# ---- named registry -----------------------------------------------------------------------------


def test_named_keyrings():
    kr, other = ring(), ring()
    try:
        assert use_keyring(kr) is kr
        assert get_keyring() is kr and get_keyring("default") is kr
        use_keyring(other, name="billing")
        assert get_keyring("billing") is other
        with pytest.raises(UnknownKeyring, match="'nope'"):
            get_keyring("nope")
        with pytest.raises(TypeError):
            use_keyring("not a keyring")
        assert sealstore.keyring.get_keyring is get_keyring
    finally:
        forget_keyring("default")
        forget_keyring("billing")
    with pytest.raises(UnknownKeyring, match="'default'"):
        get_keyring()
