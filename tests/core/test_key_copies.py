"""Key material handed to ``cryptography`` is copied: wiping the caller's buffer (as the keyring
does with every derived subkey) never changes the key a value is sealed under.

Issue 13: at cryptography 42.x the AES-256-GCM suite sealed under an all-zero key, because the
keyring wiped a subkey bytearray that cryptography's AESGCM still referenced.  Round trips
kept working, so only opening with the zero key shows it.
"""

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as CryptoAESGCM

import sealstore
from sealstore.errors import InvalidTag
from sealstore.format import HEADER_SIZE, Suite, context_digest
from sealstore.keyring import _derive_subkey, make_cipher
from sealstore.suites import SUITES

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)


def test_aesgcm_keeps_its_key_when_the_callers_buffer_is_wiped():
    key = bytearray(os.urandom(32))
    original = bytes(key)
    c = sealstore.AESGCM(key)
    key[:] = bytes(32)
    nonce = os.urandom(12)
    ct = c.encrypt(nonce, b"payload", b"ad")
    assert CryptoAESGCM(original).decrypt(nonce, ct, b"ad") == b"payload"
    with pytest.raises(Exception):
        CryptoAESGCM(bytes(32)).decrypt(nonce, ct, b"ad")


@pytest.mark.parametrize("suite", [s.label for s in SUITES])
def test_sealed_values_do_not_open_under_an_all_zero_subkey(suite):
    tag = max(Suite.parse(suite).spec.tag_sizes)
    kr = sealstore.Keyring.generate(
        suite, tag, adaptive_threshold=0
    )  # no AEGIS-128L for short values
    ctx = sealstore.column_context("users", "ssn")
    token = kr.seal(b"123-45-6789" * 10, ctx)
    header, ad = token[:HEADER_SIZE], context_digest(ctx)
    real = _derive_subkey(kr.primary, header, Suite.parse(suite))
    # The value opens under the subkey the format says it was sealed with...
    assert (
        make_cipher(Suite.parse(suite), bytes(real), tag).open_prefixed(HEADER_SIZE, token, ad)
        == b"123-45-6789" * 10
    )
    # ... and never under the zero key a wiped buffer would leave behind.
    zero = make_cipher(Suite.parse(suite), bytes(len(real)), tag)
    with pytest.raises(InvalidTag):
        zero.open_prefixed(HEADER_SIZE, token, ad)
