"""Compatibility with cryptography's AEAD API (>= 47), for every cipher class: the ``_into``
calls take the buffer last, a call in the old order (buffer first) is refused with a TypeError
before anything is written, and sealstore's InvalidTag is a cryptography InvalidTag.
"""

from __future__ import annotations

import inspect

import pytest
from cryptography.exceptions import InvalidTag as CryptoInvalidTag
from cryptography.hazmat.primitives.ciphers import aead as crypto_aead

import sealstore
from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM
from sealstore.errors import InvalidTag, SealstoreError

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

KEY = bytes(range(0x40, 0x50))
CIPHERS = [
    pytest.param((lambda: AEGIS128L(KEY), 16), id="AEGIS128L"),
    pytest.param((lambda: AEGIS128X2(KEY), 16), id="AEGIS128X2"),
    pytest.param((lambda: AEGIS128X4(KEY), 16), id="AEGIS128X4"),
    pytest.param((lambda: AEGIS128X4(KEY, tag_size=32), 16), id="AEGIS128X4-tag32"),
    pytest.param((lambda: AESGCM(KEY), 12), id="AESGCM"),
]
ORDER_HINT = "buffer last"


@pytest.fixture(params=CIPHERS)
def case(request):
    make, nonce_size = request.param
    return make(), bytes(range(nonce_size))


def test_into_calls_take_the_buffer_last(case):
    c, nonce = case
    sealed = c.encrypt(nonce, b"payload", b"ad")
    buf = bytearray(len(sealed))
    assert c.encrypt_into(nonce, b"payload", b"ad", buf) == len(sealed)
    assert bytes(buf) == sealed
    back = bytearray(7)
    assert c.decrypt_into(nonce, sealed, b"ad", back) == 7 and back == b"payload"


def test_into_calls_take_every_argument_by_name(case):
    c, nonce = case
    buf = bytearray(4 + c.tag_size)
    n = c.encrypt_into(nonce=nonce, data=b"abcd", associated_data=None, buf=buf)
    assert bytes(buf[:n]) == c.encrypt(nonce, b"abcd", None)
    back = bytearray(4)
    assert c.decrypt_into(nonce, bytes(buf), None, buf=back) == 4 and back == b"abcd"


def test_into_buffer_may_be_longer_than_the_output(case):
    c, nonce = case
    buf = bytearray(b"\xaa" * 64)
    n = c.encrypt_into(nonce, b"abc", None, buf)
    assert n == 3 + c.tag_size and bytes(buf[:n]) == c.encrypt(nonce, b"abc", None)
    assert buf[n:] == b"\xaa" * (64 - n)  # nothing written past the output


def test_aesgcm_into_matches_cryptography_call_for_call():
    """The same call, argument for argument, on cryptography's class and on sealstore's."""
    nonce = bytes(12)
    ours, theirs = bytearray(21), bytearray(21)
    args = (nonce, b"hello", b"ad")
    assert AESGCM(KEY).encrypt_into(*args, ours) == crypto_aead.AESGCM(KEY).encrypt_into(
        *args, theirs
    )
    assert ours == theirs
    plain_ours, plain_theirs = bytearray(5), bytearray(5)
    AESGCM(KEY).decrypt_into(nonce, bytes(ours), b"ad", plain_ours)
    crypto_aead.AESGCM(KEY).decrypt_into(nonce, bytes(theirs), b"ad", plain_theirs)
    assert plain_ours == plain_theirs == b"hello"


@pytest.mark.parametrize("method", ["encrypt_into", "decrypt_into"])
def test_into_parameters_are_cryptographys(method):
    """Names and order as cryptography's AESGCM (the documented methods and the C ones)."""
    want = list(inspect.signature(getattr(crypto_aead.AESGCM, method)).parameters)[1:]
    assert want == ["nonce", "data", "associated_data", "buf"]
    for cls in (AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM):
        assert list(inspect.signature(getattr(cls, method)).parameters)[1:] == want, cls
    for c in (AEGIS128X4(KEY), AESGCM(KEY)):
        assert list(inspect.signature(getattr(c, method)).parameters) == want, c


@pytest.mark.parametrize("ad", [None, b"ad"])
def test_old_order_is_a_type_error_naming_the_order(case, ad):
    c, nonce = case
    out = bytearray(b"\x55" * 64)
    with pytest.raises(TypeError, match=ORDER_HINT):
        c.encrypt_into(out, nonce, b"data", ad)
    sealed = c.encrypt(nonce, b"data", ad)
    with pytest.raises(TypeError, match=ORDER_HINT):
        c.decrypt_into(out, nonce, sealed, ad)
    assert out == b"\x55" * 64


def test_old_order_without_ad_is_a_type_error(case):
    c, nonce = case
    out = bytearray(64)
    with pytest.raises(TypeError, match="buf"):
        c.encrypt_into(out, nonce, b"data")
    with pytest.raises(TypeError, match="buf"):
        c.decrypt_into(out, nonce, c.encrypt(nonce, b"data", None))
    assert out == bytes(64)


@pytest.mark.parametrize("cls", [AEGIS128L, AEGIS128X2, AEGIS128X4])
@pytest.mark.parametrize("out_size", [15, 17, 32, 80])
def test_writable_buffer_in_the_nonce_place_is_refused(cls, out_size):
    """Old order with a writable AD: the output buffer lands in the nonce's place and is
    refused for its length (AEGIS nonces are 16 bytes); neither buffer is touched."""
    c = cls(KEY)
    out, ad = bytearray(b"\x11" * out_size), bytearray(b"\x22" * 96)
    with pytest.raises(ValueError, match="nonce must be 16 bytes"):
        c.encrypt_into(out, bytes(16), b"data", ad)
    with pytest.raises(ValueError, match="nonce must be 16 bytes"):
        c.decrypt_into(out, bytes(16), bytes(32), ad)
    assert out == b"\x11" * out_size and ad == b"\x22" * 96


def test_read_only_buffer_is_a_type_error(case):
    c, nonce = case
    with pytest.raises(TypeError, match="buf must be a writable"):
        c.encrypt_into(nonce, b"data", None, bytes(64))
    with pytest.raises(TypeError, match="buf must be a writable"):
        c.encrypt_into(nonce, b"data", None, memoryview(bytearray(64)).toreadonly())


def test_short_buffer_is_a_value_error_naming_buf(case):
    c, nonce = case
    with pytest.raises(ValueError, match="buf must be at least"):
        c.encrypt_into(nonce, b"data", None, bytearray(4 + c.tag_size - 1))


# --- InvalidTag -------------------------------------------------------------------------------


def test_invalid_tag_is_both_classes():
    assert issubclass(InvalidTag, CryptoInvalidTag) and issubclass(InvalidTag, SealstoreError)
    assert "InvalidTag" in sealstore.errors.__all__


def _forged(c, nonce):
    sealed = bytearray(c.encrypt(nonce, b"secret value", b"ad"))
    sealed[0] ^= 1
    return bytes(sealed)


def test_cryptography_handler_catches_decrypt(case):
    c, nonce = case
    forged = _forged(c, nonce)
    with pytest.raises(CryptoInvalidTag) as e:
        c.decrypt(nonce, forged, b"ad")
    assert type(e.value) is InvalidTag  # sealstore's, raised by the C code or the wrapper
    with pytest.raises(CryptoInvalidTag) as e:
        c.decrypt_into(nonce, forged, b"ad", bytearray(64))
    assert type(e.value) is InvalidTag
    with pytest.raises(CryptoInvalidTag):
        c.decrypt(nonce, b"", b"ad")  # too short: the same class


def test_cryptography_handler_catches_batch_failures_with_index(case):
    c, _ = case
    sealed = c.seal_prefixed_many(b"\x01" * 7, [b"v%d" % i for i in range(9)], b"ad")
    bad = bytearray(sealed[6])
    bad[-1] ^= 1
    sealed[6] = bytes(bad)
    with pytest.raises(CryptoInvalidTag) as e:
        c.open_prefixed_many(7, sealed, b"ad")
    assert type(e.value) is InvalidTag and e.value.index == 6


def test_cryptography_handler_catches_keyring_open():
    kr = sealstore.Keyring.generate()
    sealed = bytearray(kr.seal(b"value", b"ctx"))
    sealed[-1] ^= 1
    try:
        kr.open(bytes(sealed), b"ctx")
    except CryptoInvalidTag as e:
        assert isinstance(e, InvalidTag) and isinstance(e, SealstoreError)
    else:
        raise AssertionError("a forged value opened")
