"""Slow, simple pure-Python AEGIS-128L / AEGIS-128X2 / AEGIS-128X4 and AEGIS-256 /
AEGIS-256X2 / AEGIS-256X4: a test oracle.

Written from draft-irtf-cfrg-aegis-aead-18, sections "The AEGIS-128L Algorithm", "The AEGIS-256
Algorithm", "AEGIS-128X" and "AEGIS-256X".  AEGIS-128L is AEGIS-128X with degree D = 1 (its
context separator is all zero), so one implementation serves all three; likewise AEGIS-256 is
AEGIS-256X with D = 1.  The AES round uses lookup tables, which is
fine for an oracle and wrong for production (not constant time).  Never use it on real keys.

Blocks are 128-bit Python ints holding the 16 bytes in little-endian order (byte 0 is the
least significant), so XOR and AND are single int operations.
"""

from __future__ import annotations

import hmac

__all__ = ["DEGREE", "KEY_SIZE", "aes_round", "State", "State256", "encrypt", "decrypt"]

DEGREE = {
    "AEGIS-128L": 1,
    "AEGIS-128X2": 2,
    "AEGIS-128X4": 4,
    "AEGIS-256": 1,
    "AEGIS-256X2": 2,
    "AEGIS-256X4": 4,
}
#: key and nonce bytes (the same for both)
KEY_SIZE = {v: 32 if v.startswith("AEGIS-256") else 16 for v in DEGREE}

MASK128 = (1 << 128) - 1


def _xtime(a: int) -> int:
    a <<= 1
    return (a ^ 0x11B) if a & 0x100 else a


def _gmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a = _xtime(a)
        b >>= 1
    return r


def _make_sbox() -> list[int]:
    # S(x) = affine(x^-1) over GF(2^8) mod x^8+x^4+x^3+x+1, with 0^-1 = 0 (FIPS-197 5.1.1).
    inv = [0] * 256
    for x in range(1, 256):
        for y in range(1, 256):
            if _gmul(x, y) == 1:
                inv[x] = y
                break
    sbox = []
    for x in range(256):
        b = inv[x]
        s = b
        for shift in (1, 2, 3, 4):
            s ^= ((b << shift) | (b >> (8 - shift))) & 0xFF
        sbox.append(s ^ 0x63)
    return sbox


SBOX = _make_sbox()

# T[r][x]: the MixColumns column produced by S(x) sitting in row r, as a little-endian
# 32-bit word (byte k of the word is row k of the column).
_MIX = ((2, 3, 1, 1), (1, 2, 3, 1), (1, 1, 2, 3), (3, 1, 1, 2))  # _MIX[out_row][in_row]
T = [
    [sum(_gmul(SBOX[x], _MIX[k][r]) << (8 * k) for k in range(4)) for x in range(256)]
    for r in range(4)
]


def aes_round(block: int, rk: int) -> int:
    """AESRound(in, rk) = MixColumns(ShiftRows(SubBytes(in))) ^ rk on 128-bit ints."""
    b = block.to_bytes(16, "little")
    t0, t1, t2, t3 = T
    out = 0
    for c in range(4):
        # ShiftRows: output (row r, column c) takes input (row r, column c + r).
        col = (
            t0[b[4 * c]]
            ^ t1[b[4 * ((c + 1) & 3) + 1]]
            ^ t2[b[4 * ((c + 2) & 3) + 2]]
            ^ t3[b[4 * ((c + 3) & 3) + 3]]
        )
        out |= col << (32 * c)
    return out ^ rk


def _int(b: bytes) -> int:
    return int.from_bytes(b, "little")


def _bytes(x: int) -> bytes:
    return x.to_bytes(16, "little")


C0 = _int(bytes.fromhex("000101020305080d1522375990e97962"))
C1 = _int(bytes.fromhex("db3d18556dc22ff12011314273b528dd"))


class State:
    """D parallel AEGIS-128L states; ``v[j][i]`` is the draft's ``V[j,i]``."""

    def __init__(self, degree: int, v: list[list[int]] | None = None):
        self.d = degree
        self.v = v if v is not None else [[0] * degree for _ in range(8)]

    def update(self, m0: list[int], m1: list[int]) -> None:
        """Update(M0, M1); m0 and m1 hold one 128-bit block per lane."""
        v = self.v
        new = [[0] * self.d for _ in range(8)]
        for i in range(self.d):
            new[0][i] = aes_round(v[7][i], v[0][i] ^ m0[i])
            new[1][i] = aes_round(v[0][i], v[1][i])
            new[2][i] = aes_round(v[1][i], v[2][i])
            new[3][i] = aes_round(v[2][i], v[3][i])
            new[4][i] = aes_round(v[3][i], v[4][i] ^ m1[i])
            new[5][i] = aes_round(v[4][i], v[5][i])
            new[6][i] = aes_round(v[5][i], v[6][i])
            new[7][i] = aes_round(v[6][i], v[7][i])
        self.v = new

    @classmethod
    def init(cls, degree: int, key: bytes, nonce: bytes) -> "State":
        k, n = _int(key), _int(nonce)
        col = [k ^ n, C1, C0, C1, k ^ n, k ^ C0, k ^ C1, k ^ C0]
        st = cls(degree, [[w] * degree for w in col])
        ctx = [_int(bytes([i, degree - 1]) + bytes(14)) for i in range(degree)]
        for _ in range(10):
            for i in range(degree):
                st.v[3][i] ^= ctx[i]
                st.v[7][i] ^= ctx[i]
            st.update([n] * degree, [k] * degree)
        return st

    # One rate-sized block = 2 * 16 * D bytes: the first half feeds M0 lane by lane, the
    # second half feeds M1.
    def _split(self, block: bytes) -> tuple[list[int], list[int]]:
        d = self.d
        lanes = [_int(block[16 * j : 16 * j + 16]) for j in range(2 * d)]
        return lanes[:d], lanes[d:]

    def _keystream(self) -> bytes:
        v = self.v
        z0 = [v[6][i] ^ v[1][i] ^ (v[2][i] & v[3][i]) for i in range(self.d)]
        z1 = [v[2][i] ^ v[5][i] ^ (v[6][i] & v[7][i]) for i in range(self.d)]
        return b"".join(_bytes(z) for z in z0 + z1)

    def absorb(self, block: bytes) -> None:
        self.update(*self._split(block))

    def enc(self, block: bytes) -> bytes:
        z = self._keystream()
        self.update(*self._split(block))
        return bytes(a ^ b for a, b in zip(block, z, strict=True))

    def dec(self, block: bytes) -> bytes:
        z = self._keystream()
        out = bytes(a ^ b for a, b in zip(block, z, strict=True))
        self.update(*self._split(out))
        return out

    def dec_partial(self, tail: bytes) -> bytes:
        rate = 32 * self.d
        z = self._keystream()
        padded = tail + bytes(rate - len(tail))
        out = bytes(a ^ b for a, b in zip(padded, z, strict=True))[: len(tail)]
        self.update(*self._split(out + bytes(rate - len(out))))
        return out

    def finalize(self, ad_len: int, msg_len: int, tag_len: int) -> bytes:
        u = _int((8 * ad_len).to_bytes(8, "little") + (8 * msg_len).to_bytes(8, "little"))
        t = [self.v[2][i] ^ u for i in range(self.d)]
        for _ in range(7):
            self.update(t, t)
        v = self.v
        if tag_len == 16:
            tag = 0
            for i in range(self.d):
                for j in range(7):
                    tag ^= v[j][i]
            return _bytes(tag)
        tag0 = tag1 = 0
        for i in range(self.d):
            tag0 ^= v[0][i] ^ v[1][i] ^ v[2][i] ^ v[3][i]
            tag1 ^= v[4][i] ^ v[5][i] ^ v[6][i] ^ v[7][i]
        return _bytes(tag0) + _bytes(tag1)


class State256:
    """D parallel AEGIS-256 states (six words); ``v[j][i]`` is the draft's ``V[j,i]``."""

    def __init__(self, degree: int, v: list[list[int]] | None = None):
        self.d = degree
        self.v = v if v is not None else [[0] * degree for _ in range(6)]

    def update(self, m: list[int]) -> None:
        """Update(M); m holds one 128-bit block per lane."""
        v = self.v
        new = [[0] * self.d for _ in range(6)]
        for i in range(self.d):
            new[0][i] = aes_round(v[5][i], v[0][i] ^ m[i])
            for j in range(1, 6):
                new[j][i] = aes_round(v[j - 1][i], v[j][i])
        self.v = new

    @classmethod
    def init(cls, degree: int, key: bytes, nonce: bytes) -> "State256":
        k0, k1 = _int(key[:16]), _int(key[16:])
        n0, n1 = _int(nonce[:16]), _int(nonce[16:])
        col = [k0 ^ n0, k1 ^ n1, C1, C0, k0 ^ C0, k1 ^ C1]
        st = cls(degree, [[w] * degree for w in col])
        ctx = [_int(bytes([i, degree - 1]) + bytes(14)) for i in range(degree)]
        for _ in range(4):
            for m in (k0, k1, k0 ^ n0, k1 ^ n1):
                for i in range(degree):
                    st.v[3][i] ^= ctx[i]
                    st.v[5][i] ^= ctx[i]
                st.update([m] * degree)
        return st

    # One rate-sized block = 16 * D bytes, lane by lane.
    def _split(self, block: bytes) -> list[int]:
        return [_int(block[16 * j : 16 * j + 16]) for j in range(self.d)]

    def _keystream(self) -> bytes:
        v = self.v
        z = [v[1][i] ^ v[4][i] ^ v[5][i] ^ (v[2][i] & v[3][i]) for i in range(self.d)]
        return b"".join(_bytes(x) for x in z)

    def absorb(self, block: bytes) -> None:
        self.update(self._split(block))

    def enc(self, block: bytes) -> bytes:
        z = self._keystream()
        self.update(self._split(block))
        return bytes(a ^ b for a, b in zip(block, z, strict=True))

    def dec(self, block: bytes) -> bytes:
        z = self._keystream()
        out = bytes(a ^ b for a, b in zip(block, z, strict=True))
        self.update(self._split(out))
        return out

    def dec_partial(self, tail: bytes) -> bytes:
        rate = 16 * self.d
        z = self._keystream()
        padded = tail + bytes(rate - len(tail))
        out = bytes(a ^ b for a, b in zip(padded, z, strict=True))[: len(tail)]
        self.update(self._split(out + bytes(rate - len(out))))
        return out

    def finalize(self, ad_len: int, msg_len: int, tag_len: int) -> bytes:
        u = _int((8 * ad_len).to_bytes(8, "little") + (8 * msg_len).to_bytes(8, "little"))
        t = [self.v[3][i] ^ u for i in range(self.d)]
        for _ in range(7):
            self.update(t)
        v = self.v
        if tag_len == 16:
            tag = 0
            for i in range(self.d):
                for j in range(6):
                    tag ^= v[j][i]
            return _bytes(tag)
        tag0 = tag1 = 0
        for i in range(self.d):
            tag0 ^= v[0][i] ^ v[1][i] ^ v[2][i]
            tag1 ^= v[3][i] ^ v[4][i] ^ v[5][i]
        return _bytes(tag0) + _bytes(tag1)


def _check(variant: str, key, nonce, tag_len: int) -> tuple[int, bytes, bytes]:
    if variant not in DEGREE:
        raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(DEGREE)}")
    key, nonce = bytes(key), bytes(nonce)
    size = KEY_SIZE[variant]
    if len(key) != size or len(nonce) != size:
        raise ValueError(f"key and nonce must be {size} bytes")
    if tag_len not in (16, 32):
        raise ValueError("tag_len must be 16 or 32")
    return DEGREE[variant], key, nonce


def _start(variant: str, d: int, key: bytes, nonce: bytes) -> tuple[State | State256, int]:
    """The initialized state of ``variant`` and its rate in bytes."""
    if KEY_SIZE[variant] == 32:
        return State256.init(d, key, nonce), 16 * d
    return State.init(d, key, nonce), 32 * d


def encrypt(variant: str, key, nonce, msg, ad, tag_len: int = 16) -> tuple[bytes, bytes]:
    """Return ``(ciphertext, tag)`` for ``msg`` and associated data ``ad``."""
    d, key, nonce = _check(variant, key, nonce, tag_len)
    msg, ad = bytes(msg), bytes(ad or b"")
    st, rate = _start(variant, d, key, nonce)
    for off in range(0, len(ad), rate):
        blk = ad[off : off + rate]
        st.absorb(blk + bytes(rate - len(blk)))
    ct = bytearray()
    for off in range(0, len(msg), rate):
        blk = msg[off : off + rate]
        ct += st.enc(blk + bytes(rate - len(blk)))
    tag = st.finalize(len(ad), len(msg), tag_len)
    return bytes(ct[: len(msg)]), tag


def decrypt(variant: str, key, nonce, ct, tag, ad, tag_len: int | None = None) -> bytes | None:
    """Return the plaintext, or ``None`` if the tag does not verify."""
    tag = bytes(tag)
    tag_len = len(tag) if tag_len is None else tag_len
    d, key, nonce = _check(variant, key, nonce, tag_len)
    if len(tag) != tag_len:
        return None
    ct, ad = bytes(ct), bytes(ad or b"")
    st, rate = _start(variant, d, key, nonce)
    for off in range(0, len(ad), rate):
        blk = ad[off : off + rate]
        st.absorb(blk + bytes(rate - len(blk)))
    full = len(ct) - len(ct) % rate
    msg = bytearray()
    for off in range(0, full, rate):
        msg += st.dec(ct[off : off + rate])
    if full < len(ct):
        msg += st.dec_partial(ct[full:])
    expected = st.finalize(len(ad), len(msg), tag_len)
    if not hmac.compare_digest(expected, tag):
        msg[:] = bytes(len(msg))
        return None
    return bytes(msg)
