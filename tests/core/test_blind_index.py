"""Blind-index values in the core (``sealstore.blind_index``), without any database: the layout,
the derivation written out from its definition, and the rotation rules lookups rely on."""

import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sealstore import blind_index as B
from sealstore.format import column_context
from sealstore.keyring import Key, Keyring, KeyState

M1, M2, M3 = bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96))


def _ring():
    return Keyring(
        [
            Key(0x0A0B0C0D, "AEGIS-128X4", M1, state=KeyState.ACTIVE),
            Key(0x00000002, "AEGIS-128X4", M2, state=KeyState.PRIMARY),
            Key(0x00000003, "AEGIS-128X4", M3, state=KeyState.RETIRED),
        ],
        allow_retired=True,
    )


def _expected(material: bytes, key_id: int, info: bytes, data: bytes, size: int) -> bytes:
    hkey = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material)
    return key_id.to_bytes(4, "big") + hmac.new(hkey, data, hashlib.sha256).digest()[:size]


def test_the_value_is_key_id_then_truncated_hmac_under_the_derived_key():
    info = B.index_info(column_context("users", "email_index"))
    assert info.startswith(b"sealstore/v1/blind-index")
    value = B.index_value(_ring(), info, b"a@x.org", 16)
    assert value == _expected(M2, 2, info, b"a@x.org", 16)
    assert len(value) == B.KEY_ID_SIZE + 16 and B.key_id_of(value) == 2


def test_lookups_try_the_primary_first_then_the_active_keys_never_the_retired():
    ring = _ring()
    info = B.index_info(b"ctx")
    values = B.candidates(ring, info, b"v", 8)
    assert values == [_expected(M2, 2, info, b"v", 8), _expected(M1, 0x0A0B0C0D, info, b"v", 8)]
    assert values[0] == B.index_value(ring, info, b"v", 8)


def test_each_index_has_its_own_key():
    ring = _ring()
    a = B.index_value(ring, B.index_info(column_context("t", "a")), b"same", 16)
    b = B.index_value(ring, B.index_info(column_context("t", "b")), b"same", 16)
    assert a[:4] == b[:4] and a[4:] != b[4:]


def test_staleness_follows_the_primary():
    ring = _ring()
    info = B.index_info(b"ctx")
    fresh = B.index_value(ring, info, b"v", 16)
    old = B.candidates(ring, info, b"v", 16)[1]
    assert not B.is_stale(ring, fresh) and B.is_stale(ring, old) and not B.is_stale(ring, None)


@pytest.mark.parametrize("size", [0, 33, -1, True, 1.0, "16", None])
def test_sizes_outside_1_to_32_are_refused(size):
    with pytest.raises(ValueError, match="1..32"):
        B.check_size(size)


@pytest.mark.parametrize("size", [1, 16, 32])
def test_sizes_inside_are_kept(size):
    assert B.check_size(size) == size
    assert len(B.index_value(_ring(), B.index_info(b"c"), b"v", size)) == 4 + size
