"""What a caller's buffer holds after ``decrypt_into`` (documented in its docstring and
docs/api/sealstore.md, issue 27): the verified plaintext after success, zeros after InvalidTag
(in place: the ciphertext wiped too), and bytes past the output never written."""

from __future__ import annotations

import os

import pytest

from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, AEGIS256, AEGIS256X2, AEGIS256X4, AESGCM
from sealstore.errors import InvalidTag

CIPHERS = [
    lambda: AEGIS128L(os.urandom(16)),
    lambda: AEGIS128X2(os.urandom(16)),
    lambda: AEGIS128X4(os.urandom(16), 32),
    lambda: AEGIS256(os.urandom(32)),
    lambda: AEGIS256X2(os.urandom(32), 32),
    lambda: AEGIS256X4(os.urandom(32)),
    lambda: AESGCM(os.urandom(32)),
]


@pytest.mark.parametrize("make", CIPHERS, ids=lambda m: type(m()).__name__)
@pytest.mark.parametrize("size", [0, 100, 40 * 1024])  # 40 KiB: the GIL-released path
def test_buffer_after_success_and_failure(make, size):
    c = make()
    nonce_size = getattr(c, "nonce_size", 12)
    nonce, data = os.urandom(nonce_size), os.urandom(size)
    ct = c.encrypt(nonce, data, b"ad")
    tail = b"\xa5" * 7
    buf = bytearray(size) + bytearray(tail)
    assert c.decrypt_into(nonce, ct, b"ad", buf) == size
    assert bytes(buf[:size]) == data and bytes(buf[size:]) == tail
    forged = bytearray(ct)
    forged[-1] ^= 1
    buf = bytearray(os.urandom(size)) + bytearray(tail)
    with pytest.raises(InvalidTag):
        c.decrypt_into(nonce, forged, b"ad", buf)
    assert bytes(buf[:size]) == bytes(size) and bytes(buf[size:]) == tail
    in_place = bytearray(forged)
    with pytest.raises(InvalidTag):
        c.decrypt_into(nonce, in_place, b"ad", in_place)
    assert bytes(in_place[:size]) == bytes(size)  # the ciphertext is wiped as well
    assert bytes(in_place[size:]) == bytes(forged[size:])  # the tag bytes are not output
