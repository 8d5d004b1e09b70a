"""sealstore.keyring.named_sealer / named_opener: the one-call column path (C, _speedups).

Each case checks the native path against the keyring's own seal()/open(), and that every value
the native path does not handle reaches the fallback, which raises the precise error.
"""

from __future__ import annotations

import gc
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealstore.errors import (
    InvalidTag,
    KeyNotUsable,
    MalformedCiphertext,
    UnknownKeyId,
    UndecodableValue,
    UnknownKeyring,
    ValueTooLong,
)
from sealstore.format import HEADER_SIZE, Suite, column_context, parse_header
from sealstore.keyring import (
    Keyring,
    forget_keyring,
    get_keyring,
    named_opener,
    named_sealer,
    use_keyring,
)

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

NAME = "named-test"
CTX = column_context("people", "email")


class Calls:
    """A fallback that records the values it receives and runs the keyring's Python path."""

    def __init__(self, fn):
        self.fn, self.values = fn, []

    def __call__(self, value):
        self.values.append(value)
        return self.fn(value)


def text_encode(value):
    if not isinstance(value, str):
        raise TypeError(f"expects str, not {type(value).__name__}")
    if len(value) > 20:
        raise ValueTooLong(f"value has {len(value)} characters")
    return value.encode()


def pair(*, raw=str, max_length=20, encode=text_encode, text=True, decode=None, out=bytes):
    seal_fb = Calls(lambda v: get_keyring(NAME).seal(encode(v), CTX))

    def open_py(v):  # as an encrypted column's fallback does: no decoder error escapes
        pt = get_keyring(NAME).open(bytes(v), CTX)
        try:
            pt = pt.decode() if text else pt
            return decode(pt) if decode else pt
        except Exception as exc:
            failed = type(exc).__name__
        raise UndecodableValue(f"a value opened but does not decode ({failed})")

    open_fb = Calls(open_py)
    sealer = named_sealer(
        NAME, CTX, seal_fb, raw=raw, max_length=max_length, encode=encode, out=out
    )
    opener = named_opener(NAME, CTX, open_fb, text=text, decode=decode)
    return sealer, opener, seal_fb, open_fb


@pytest.fixture
def ring():
    r = use_keyring(Keyring.generate(), NAME)
    yield r
    forget_keyring(NAME)


def test_ascii_round_trip_is_native_and_matches_the_keyring(ring):
    sealer, opener, seal_fb, open_fb = pair()
    for value in ["", "a", "x" * 20, "hello world"]:
        sealed = sealer(value)
        assert type(sealed) is bytes
        assert parse_header(sealed).key_id == ring.primary.key_id
        assert ring.open(sealed, CTX) == value.encode()  # the keyring opens it
        assert opener(sealed) == value
        assert opener(ring.seal(value.encode(), CTX)) == value  # and it opens the keyring's
    assert seal_fb.values == [] and open_fb.values == []


def test_none_stays_none(ring):
    sealer, opener, seal_fb, open_fb = pair()
    assert sealer(None) is None and opener(None) is None
    assert seal_fb.values == [] and open_fb.values == []


def test_non_ascii_text_goes_through_encode_then_native(ring):
    sealer, opener, seal_fb, open_fb = pair()
    for value in ["héllo", "日本語", "emoji 🎉", "\x7f\x80"]:
        sealed = sealer(value)
        assert ring.open(sealed, CTX) == value.encode()
        assert opener(sealed) == value
    assert seal_fb.values == [] and open_fb.values == []


def test_undecodable_plaintext_raises_without_the_plaintext(ring):
    _, opener, _, open_fb = pair()
    bad_text = ring.seal(b"secret \xff\xfe", CTX)
    with pytest.raises(UndecodableValue) as info:
        opener(bad_text)
    assert "secret" not in str(info.value) and "\\xff" not in str(info.value)
    assert "UnicodeDecodeError" in str(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None
    _, json_opener, _, json_fb = pair(raw=None, text=False, decode=json.loads)
    bad_json = ring.seal(b"secret, not json", CTX)
    with pytest.raises(UndecodableValue) as info:
        json_opener(bad_json)
    assert "secret" not in str(info.value) and info.value.__context__ is None
    # the native decoder's error is dropped and the fallback raises the precise one
    assert open_fb.values == [bad_text] and json_fb.values == [bad_json]


def test_encode_errors_propagate_and_nothing_is_sealed(ring):
    sealer, _, seal_fb, _ = pair()
    with pytest.raises(ValueTooLong):
        sealer("x" * 21)
    with pytest.raises(ValueTooLong):
        sealer("é" * 21)
    with pytest.raises(TypeError, match="expects str"):
        sealer(b"bytes")
    with pytest.raises(TypeError, match="expects str"):
        sealer(42)
    assert seal_fb.values == []


def test_str_subclass_is_encoded_not_sealed_raw(ring):
    class Tagged(str):
        pass

    seen = []

    def encode(v):
        seen.append(v)
        return text_encode(v)

    sealer, opener, _, _ = pair(encode=encode)
    assert opener(sealer(Tagged("abc"))) == "abc"
    assert seen == ["abc"]


def test_bytes_mode_and_bytearray_output(ring):
    def bin_encode(v):
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError("expects bytes")
        return bytes(v)

    sealer, opener, _, open_fb = pair(
        raw=bytes, max_length=None, encode=bin_encode, text=False, out=bytearray
    )
    for value in [b"", b"\x00" * 5, bytes(range(256)) * 10, bytearray(b"ba"), memoryview(b"mv")]:
        sealed = sealer(value)
        assert type(sealed) is bytearray
        assert ring.open(bytes(sealed), CTX) == bytes(value)
        assert opener(bytes(sealed)) == bytes(value)
        assert opener(memoryview(bytes(sealed))) == bytes(value)  # any buffer is read in place
        assert opener(sealed) == bytes(value)
    assert open_fb.values == []


def test_decode_runs_on_the_opened_plaintext(ring):
    def enc(v):
        return json.dumps(v, separators=(",", ":")).encode()

    sealer, opener, _, _ = pair(
        raw=None, max_length=None, encode=enc, text=False, decode=json.loads
    )
    doc = {"a": [1, 2, {"b": "é"}], "n": None}
    assert opener(sealer(doc)) == doc
    with pytest.raises(TypeError):  # raw=None: even bytes go through encode (json refuses)
        sealer(b"raw")


@pytest.mark.parametrize(
    "size", [0, 1, 15, 16, 17, 100, 1023, 1024, 1025, 4095, 32 * 1024, 200_000]
)
def test_every_size_and_both_suites_of_the_adaptive_primary(ring, size):
    sealer, opener, _, _ = pair(max_length=None, encode=lambda v: v.encode())
    value = "q" * size
    sealed = sealer(value)
    expected = Suite.AEGIS_128L if size < ring.adaptive_threshold else ring.suite
    assert parse_header(sealed).suite is expected
    assert ring.open(sealed, CTX) == value.encode()
    assert opener(sealed) == value


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_property_native_equals_python(value):
    r = use_keyring(Keyring.generate(), NAME)
    try:
        sealer, opener, _, _ = pair(max_length=None, encode=lambda v: v.encode())
        sealed = sealer(value)
        assert r.open(sealed, CTX).decode() == value
        assert opener(sealed) == value
        assert opener(r.seal(value.encode(), CTX)) == value
    finally:
        forget_keyring(NAME)


def test_wrong_tag_context_and_every_byte_flip_raise_invalid_tag(ring):
    sealer, opener, _, open_fb = pair()
    sealed = sealer("secret value")
    flipped = []
    for pos in range(HEADER_SIZE, len(sealed)):  # body bytes: the native path decides
        bad = bytearray(sealed)
        bad[pos] ^= 0x01
        flipped.append(bytes(bad))
        with pytest.raises(InvalidTag) as info:
            opener(flipped[-1])
        assert "secret" not in str(info.value)
        assert info.value.__context__ is None and info.value.__cause__ is None
    # each failure went on to the fallback, which opened it again and raised the error itself
    assert open_fb.values == flipped
    phone = column_context("people", "phone")
    phone_fb = Calls(lambda v: get_keyring(NAME).open(bytes(v), phone).decode())
    other = named_opener(NAME, phone, phone_fb, text=True)
    with pytest.raises(InvalidTag):  # bound to its column
        other(sealed)
    assert phone_fb.values == [sealed]


def test_header_errors_reach_the_fallback_and_raise_precisely(ring):
    sealer, opener, _, open_fb = pair()
    sealed = sealer("value")
    with pytest.raises(MalformedCiphertext):
        opener(sealed[: HEADER_SIZE + 3])  # truncated: too short to be whole
    with pytest.raises(MalformedCiphertext):
        opener(b"\x00\x01")  # shorter than a header
    with pytest.raises(MalformedCiphertext):
        opener(b"\xff" + sealed[1:])  # unknown version
    other = Keyring.generate()
    with pytest.raises(UnknownKeyId):
        opener(other.seal(b"value", CTX))
    assert len(open_fb.values) == 4


def test_a_non_buffer_value_reaches_the_fallback(ring):
    _, opener, _, open_fb = pair()
    with pytest.raises(TypeError):
        opener(1.5)
    assert open_fb.values == [1.5]


def test_no_registered_keyring_raises_unknown_keyring(ring):
    sealer, opener, _, _ = pair()
    sealed = sealer("v")
    forget_keyring(NAME)
    with pytest.raises(UnknownKeyring):
        sealer("v")
    with pytest.raises(UnknownKeyring):
        opener(sealed)


def test_swapping_the_registered_keyring_takes_effect_at_once(ring):
    sealer, opener, _, _ = pair()
    old = sealer("v")
    assert opener(old) == "v"  # caches the old keyring's context
    new = use_keyring(Keyring.generate(), NAME)
    sealed = sealer("v")
    assert parse_header(sealed).key_id == new.primary.key_id
    with pytest.raises(UnknownKeyId):  # the cached context is not used for another keyring
        opener(old)
    assert opener(sealed) == "v"


def test_rotation_seals_with_the_new_primary_and_opens_old_values(ring):
    sealer, opener, _, _ = pair()
    old = sealer("before")
    assert opener(old) == "before"
    first = ring.primary.key_id
    new = ring.rotate()
    sealed = sealer("after")
    assert parse_header(sealed).key_id == new.key_id != first
    assert opener(old) == "before" and opener(sealed) == "after"


def test_retiring_and_destroying_a_key_is_seen_despite_the_cache(ring):
    sealer, opener, _, _ = pair()
    old = sealer("old")
    assert opener(old) == "old"  # cached (table, header) -> context
    first = ring.primary.key_id
    ring.rotate()
    ring.retire(first)
    with pytest.raises(KeyNotUsable, match="retired"):
        opener(old)
    ring.allow_retired = True
    assert opener(old) == "old"
    ring.allow_retired = False
    ring.destroy(first)
    with pytest.raises(KeyNotUsable):
        opener(old)


def test_closed_keyring_refuses_both_ways(ring):
    sealer, opener, _, _ = pair()
    sealed = sealer("v")
    assert opener(sealed) == "v"
    ring.close()
    with pytest.raises(KeyNotUsable):
        sealer("v")
    with pytest.raises(KeyNotUsable):
        opener(sealed)


def test_aes_gcm_keyrings_take_the_fallback_and_still_work():
    r = use_keyring(Keyring.generate(Suite.AES_256_GCM), NAME)
    try:
        sealer, opener, seal_fb, open_fb = pair()
        sealed = sealer("gcm value")
        assert parse_header(sealed).suite is Suite.AES_256_GCM
        assert opener(sealed) == "gcm value"
        assert r.open(sealed, CTX) == b"gcm value"
        assert seal_fb.values == ["gcm value"] and len(open_fb.values) == 1
    finally:
        forget_keyring(NAME)


def test_keyring_subclass_overriding_seal_and_open_is_respected():
    calls = []

    class Audited(Keyring):
        def seal(self, plaintext, context=b""):
            calls.append("seal")
            return super().seal(plaintext, context)

        def open(self, sealed, context=b"", *, allow_retired=False):
            calls.append("open")
            return super().open(sealed, context, allow_retired=allow_retired)

    use_keyring(Audited.generate(), NAME)
    try:
        sealer, opener, _, _ = pair()
        assert opener(sealer("v")) == "v"
        assert calls == ["seal", "open"]
    finally:
        forget_keyring(NAME)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="raw"):
        named_sealer(NAME, CTX, str, raw=int)
    with pytest.raises(ValueError, match="out"):
        named_sealer(NAME, CTX, str, out=list)
    with pytest.raises(TypeError, match="fallback"):
        named_sealer(NAME, CTX, None)
    with pytest.raises(TypeError, match="decode"):
        named_opener(NAME, CTX, str, decode=42)
    with pytest.raises(TypeError, match="context must be bytes"):
        named_opener(NAME, "text context", str)
    sealer = named_sealer(NAME, CTX, str)
    with pytest.raises(TypeError, match="one positional"):
        sealer()
    with pytest.raises(TypeError, match="one positional"):
        sealer("a", "b")
    with pytest.raises(TypeError, match="one positional"):
        sealer(value="a")


def test_not_picklable_and_collected(ring):
    import pickle
    import weakref

    sealer, opener, _, _ = pair()
    for obj in (sealer, opener):
        with pytest.raises(TypeError, match="pickled"):
            pickle.dumps(obj)
    opener(sealer("v"))

    class Holder:  # a reference cycle through the fallback
        pass

    holder = Holder()
    holder.opener = named_opener(NAME, CTX, lambda v, h=holder: h, text=True)
    ref = weakref.ref(holder)
    del holder
    gc.collect()
    assert ref() is None


def test_threads_share_one_pair(ring):
    sealer, opener, _, _ = pair(max_length=None, encode=lambda v: v.encode())
    errors = []

    def work(i):
        try:
            for j in range(300):
                value = f"{i}-{j}-" + "z" * (j * 37 % 2000)
                assert opener(sealer(value)) == value
            big = "B" * 100_000  # the GIL is released for large values
            assert opener(sealer(big)) == big
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
