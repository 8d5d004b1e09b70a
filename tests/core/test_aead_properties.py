"""Property tests: every kernel agrees with the portable kernel and with the pure-Python
reference (tests/reference/aegis_ref.py), round trips hold, and any single-bit change is
rejected with InvalidTag while decrypt_into leaves no plaintext behind.

The reference is slow, so it checks inputs up to 4 KiB (and one large message per variant);
the large and unaligned inputs are checked against the portable kernel.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aead_cases import VARIANTS, cipher_class, variant_kernel_params
from reference import aegis_ref as ref
from sealstore.errors import InvalidTag

# run on the built wheel too (.ci/run, the 3.13 step); vectors: no dependency's version changes
# them (.ci/run's lowest-versions step leaves them out)
pytestmark = [pytest.mark.wheel, pytest.mark.vectors]

VK = variant_kernel_params()  # (variant, kernel) for every kernel name; unrunnable ones skipped
MiB = 1 << 20


def rbytes(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n)


def ks(variant: str) -> int:
    """Key and nonce bytes of ``variant`` (16 for AEGIS-128, 32 for AEGIS-256)."""
    return cipher_class(variant).key_size


def make(variant: str, key: bytes, tag_size: int = 16, kernel: str | None = None):
    return cipher_class(variant)(key, tag_size=tag_size, kernel=kernel)


_REF_CACHE: dict = {}


def ref_seal(variant, key, nonce, msg, ad, tag_size) -> bytes:
    k = (variant, key, nonce, msg, ad, tag_size)
    if k not in _REF_CACHE:
        ct, tag = ref.encrypt(variant, key, nonce, msg, ad, tag_size)
        _REF_CACHE[k] = ct + tag
    return _REF_CACHE[k]


# --- every length 0..300 (all 16/32/64/128/256-byte boundaries), message and AD --------------

SWEEP_KEYS = bytes(range(0xA0, 0xC0))  # the first key_size bytes are the key
SWEEP_NONCES = bytes(range(0x30, 0x50))
SWEEP = random.Random(2024).randbytes(301)


@pytest.mark.parametrize("variant,kernel", VK)
@pytest.mark.parametrize("tag_size", [16, 32])
def test_length_sweep_matches_reference(variant, kernel, tag_size):
    SWEEP_KEY, SWEEP_NONCE = SWEEP_KEYS[: ks(variant)], SWEEP_NONCES[: ks(variant)]
    c = make(variant, SWEEP_KEY, tag_size, kernel)
    bad = []
    for n in range(301):
        msg, ad = SWEEP[:n], SWEEP[n : n + (n * 7) % 41]
        want = ref_seal(variant, SWEEP_KEY, SWEEP_NONCE, msg, ad, tag_size)
        got = c.encrypt(SWEEP_NONCE, msg, ad)
        if got != want or c.decrypt(SWEEP_NONCE, want, ad) != msg:
            bad.append(("msg", n))
        # AD alone, every length, so every AD padding boundary is crossed too.
        want = ref_seal(variant, SWEEP_KEY, SWEEP_NONCE, b"", msg, tag_size)
        if c.encrypt(SWEEP_NONCE, b"", msg) != want:
            bad.append(("ad", n))
    assert bad == []


# --- random inputs up to 4096 bytes --------------------------------------------------------

inputs = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**64 - 1),
        "msg_len": st.integers(0, 4096),
        "ad_len": st.one_of(st.integers(0, 64), st.integers(0, 1024)),
        "tag_size": st.sampled_from([16, 32]),
    }
)


def _draw(p, variant):
    rng = random.Random(p["seed"])
    n = ks(variant)
    return (rbytes(rng, n), rbytes(rng, n), rbytes(rng, p["msg_len"]), rbytes(rng, p["ad_len"]))


@pytest.mark.parametrize("variant,kernel", VK)
@settings(max_examples=60)
@given(p=inputs)
def test_random_inputs_match_portable_and_reference(variant, kernel, p):
    key, nonce, msg, ad = _draw(p, variant)
    ts = p["tag_size"]
    c = make(variant, key, ts, kernel)
    portable = make(variant, key, ts, "portable")
    want = ref_seal(variant, key, nonce, msg, ad, ts)
    assert c.encrypt(nonce, msg, ad) == want
    assert portable.encrypt(nonce, msg, ad) == want
    out = bytearray(len(msg) + ts)
    assert c.encrypt_into(nonce, msg, ad, out) == len(out) and out == want
    assert c.decrypt(nonce, want, ad) == msg
    back = bytearray(len(msg))
    assert c.decrypt_into(nonce, want, ad, back) == len(msg) and back == msg


@pytest.mark.parametrize("variant,kernel", VK)
@settings(max_examples=40)
@given(p=inputs, where=st.integers(0, 2**32), part=st.sampled_from(["data", "nonce", "ad"]))
def test_random_single_bit_flip_fails(variant, kernel, p, where, part):
    key, nonce, msg, ad = _draw(p, variant)
    ts = p["tag_size"]
    c = make(variant, key, ts, kernel)
    sealed = c.encrypt(nonce, msg, ad)
    args = {"data": bytearray(sealed), "nonce": bytearray(nonce), "ad": bytearray(ad)}
    if part == "ad" and not ad:
        part = "data"
    target = args[part]
    bit = where % (8 * len(target))
    target[bit // 8] ^= 1 << (bit % 8)
    out = bytearray(b"\xff" * (len(msg)))
    with pytest.raises(InvalidTag):
        c.decrypt(args["nonce"], args["data"], args["ad"])
    with pytest.raises(InvalidTag):
        c.decrypt_into(args["nonce"], args["data"], args["ad"], out)
    assert out == bytes(len(msg))


# --- every single bit of ciphertext, tag, nonce and AD on a fixed example ------------------


@pytest.mark.parametrize("variant,kernel", VK)
@pytest.mark.parametrize("tag_size", [16, 32])
def test_every_single_bit_flip_fails(variant, kernel, tag_size):
    rng = random.Random(7)
    n = ks(variant)
    key, nonce, msg, ad = rbytes(rng, n), rbytes(rng, n), rbytes(rng, 37), rbytes(rng, 20)
    c = make(variant, key, tag_size, kernel)
    sealed = c.encrypt(nonce, msg, ad)
    assert c.decrypt(nonce, sealed, ad) == msg
    accepted = []
    for name, value in (("data", sealed), ("nonce", nonce), ("ad", ad)):
        for bit in range(8 * len(value)):
            mutated = bytearray(value)
            mutated[bit // 8] ^= 1 << (bit % 8)
            args = {"data": sealed, "nonce": nonce, "ad": ad, name: bytes(mutated)}
            try:
                c.decrypt(args["nonce"], args["data"], args["ad"])
            except InvalidTag:
                continue
            accepted.append((name, bit))
    assert accepted == []
    # Truncated or extended input, and AD moved into the message, fail too.
    for data, a in ((sealed[:-1], ad), (sealed + b"\0", ad), (sealed[1:], ad), (sealed, None)):
        with pytest.raises(InvalidTag):
            c.decrypt(nonce, data, a)


@pytest.mark.parametrize("variant,kernel", VK)
def test_wrong_key_or_tag_size_fails(variant, kernel):
    rng = random.Random(3)
    key, nonce, msg = rbytes(rng, ks(variant)), rbytes(rng, ks(variant)), rbytes(rng, 100)
    sealed = make(variant, key, 16, kernel).encrypt(nonce, msg, None)
    other = bytes([key[0] ^ 1]) + key[1:]
    with pytest.raises(InvalidTag):
        make(variant, other, 16, kernel).decrypt(nonce, sealed, None)
    # A 128-bit-tag ciphertext read as a 256-bit-tag one (and back) is rejected.
    with pytest.raises(InvalidTag):
        make(variant, key, 32, kernel).decrypt(nonce, sealed, None)
    sealed32 = make(variant, key, 32, kernel).encrypt(nonce, msg, None)
    with pytest.raises(InvalidTag):
        make(variant, key, 16, kernel).decrypt(nonce, sealed32, None)


# --- large, odd-sized, unaligned and numpy inputs -------------------------------------------

LARGE_SIZES = [MiB, MiB + 13, 3 * MiB - 1]


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(11)
    return rng.integers(0, 256, size=3 * MiB + 256, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("variant,kernel", VK)
def test_large_unaligned_match_portable(variant, kernel, big):
    rng = random.Random(5)
    key, nonce = rbytes(rng, ks(variant)), rbytes(rng, ks(variant))
    c, portable = make(variant, key, 16, kernel), make(variant, key, 16, "portable")
    backing = bytearray(big)
    for size, off, ad_len in zip(LARGE_SIZES, (1, 3, 7), (77, MiB + 5, 0), strict=True):
        msg = memoryview(backing)[off : off + size]  # unaligned view, no copy
        ad = memoryview(backing)[off + 1 : off + 1 + ad_len]
        want = portable.encrypt(nonce, bytes(msg), bytes(ad))
        assert c.encrypt(nonce, msg, ad) == want, (size, off)
        out_backing = bytearray(size + 16 + 9)
        out = memoryview(out_backing)[5 : 5 + size + 16]
        assert c.encrypt_into(nonce, msg, ad, out) == size + 16
        assert out == want
        assert out_backing[:5] == bytes(5) and out_backing[5 + size + 16 :] == bytes(4)
        back = memoryview(bytearray(size + 3))[3:]
        assert c.decrypt_into(nonce, out, ad, back) == size
        assert back == msg
        # One flipped bit deep inside a large message: rejected, and nothing escapes.
        tampered = bytearray(want)
        tampered[size // 2] ^= 0x10
        with pytest.raises(InvalidTag):
            c.decrypt_into(nonce, tampered, ad, back)
        assert not any(back)


@pytest.mark.parametrize("variant", VARIANTS)
def test_large_default_kernel_matches_reference(variant, big):
    # One big message per variant through the slow oracle, so the portable kernel itself
    # is checked beyond 4 KiB (loop counters, long-message tails).
    n = ks(variant)
    key, nonce, size = bytes(range(n)), bytes(range(n, 2 * n)), MiB + 31
    msg, ad = big[:size], big[size : size + 300]
    ct, tag = ref.encrypt(variant, key, nonce, msg, ad, 32)
    assert make(variant, key, 32, "portable").encrypt(nonce, msg, ad) == ct + tag
    assert make(variant, key, 32).encrypt(nonce, msg, ad) == ct + tag


@pytest.mark.parametrize("variant,kernel", VK)
def test_numpy_inputs(variant, kernel, big):
    key = np.arange(ks(variant), dtype=np.uint8)
    nonce = np.arange(ks(variant), 2 * ks(variant), dtype=np.uint8)
    c = make(variant, key, 16, kernel)
    ref_c = make(variant, key.tobytes(), 16, "portable")
    arr = np.frombuffer(big, dtype=np.uint8)
    for n in (0, 1, 4095, 4096, 65536 + 17):
        msg = arr[3 : 3 + n]  # offset slice of a bigger array
        ad = arr[1:9]
        want = ref_c.encrypt(nonce.tobytes(), msg.tobytes(), ad.tobytes())
        assert c.encrypt(nonce, msg, ad) == want
        out = np.zeros(n + 16, dtype=np.uint8)
        assert c.encrypt_into(nonce, msg, ad, out) == n + 16
        assert out.tobytes() == want
        back = np.full(n, 0xEE, dtype=np.uint8)
        assert c.decrypt_into(nonce, out, ad, back) == n
        assert back.tobytes() == msg.tobytes()
    # Wider element types: sizes are in bytes, not in elements.
    words = np.frombuffer(big[: 8 * 1000], dtype=np.uint64)
    want = ref_c.encrypt(nonce.tobytes(), words.tobytes(), None)
    assert c.encrypt(nonce, words, None) == want
    out = np.zeros(1000 + 2, dtype=np.uint64)  # 8016 bytes: room for a 16-byte tag
    assert c.encrypt_into(nonce, words, None, out) == 8000 + 16
    assert out.tobytes() == want
