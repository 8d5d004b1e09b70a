"""Fuzz target: the cipher entry points on hostile input, and the kernels against each other.

The first input byte picks an operation, the rest is split by atheris' FuzzedDataProvider (or a
plain reader when replaying the corpus without atheris).  Properties:
* ``decrypt``/``decrypt_into``/``open_prefixed``/``open_prefixed_many``/``open_segments_into`` of
  every AEGIS class on every runnable kernel, and ``AESGCM.decrypt``, raise only InvalidTag or
  (for a wrong nonce size, a negative prefix length, a too-small buffer, an impossible segment
  framing) ValueError; nothing forged ever opens, and a failed ``*_into`` leaves ``out`` wiped;
* for fuzzed plaintext, AD and nonce, every kernel seals exactly what the portable one does,
  every kernel opens it, and flipping any one bit makes every kernel refuse it.

Run: ``python tests/fuzz/fuzz_aead.py -max_total_time=30``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import sealstore.native  # noqa: E402
from sealstore import AESGCM  # noqa: E402
from sealstore.errors import InvalidTag  # noqa: E402
from sealstore.suites import SUITES  # noqa: E402

TARGET = "aead"
VARIANT = {s.cipher: s.native_variant for s in SUITES if s.native_variant is not None}
CLASSES = tuple(VARIANT)
# every (class, tag size) on every kernel it has here; the portable one first
CIPHERS = {
    (cls, tag): [
        cls(bytes(range(cls.key_size)), tag, kernel=k)
        for k in sealstore.native.variant_kernels(VARIANT[cls])
    ]
    for cls in CLASSES
    for tag in (16, 32)
}
GCM = AESGCM(bytes(range(32)))
REFUSE = (InvalidTag, ValueError)


class Reader:
    """The part of atheris.FuzzedDataProvider used here, in plain Python (corpus replay)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def ConsumeIntInRange(self, lo: int, hi: int) -> int:  # noqa: N802 - atheris' names
        span = hi - lo + 1
        nbytes = max(1, (span.bit_length() + 7) // 8)
        raw = self.data[self.pos : self.pos + nbytes]
        self.pos += nbytes
        return lo + int.from_bytes(raw, "big") % span if raw else lo

    def ConsumeBytes(self, n: int) -> bytes:  # noqa: N802
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def ConsumeBool(self) -> bool:  # noqa: N802
        return bool(self.ConsumeIntInRange(0, 1))


def provider(data: bytes):
    # the same decoding with and without atheris, so corpus files mean the same thing
    return Reader(data)


def wiped(buf, n: int) -> bool:
    """No plaintext in buf[:n]: wiped zeros up to where the output would have ended, then the
    0xa5 fill that was never written."""
    rest = bytes(memoryview(buf)[:n]).lstrip(b"\0")
    return rest == b"\xa5" * len(rest)


def refused(call, what: str) -> BaseException:
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, REFUSE, what)
        return exc
    raise AssertionError(f"{what} accepted a forged or malformed input: {result!r:.80}")


def check(data: bytes) -> None:
    fdp = provider(data)
    op = fdp.ConsumeIntInRange(0, 6)
    cls = CLASSES[fdp.ConsumeIntInRange(0, len(CLASSES) - 1)]
    tag = 32 if fdp.ConsumeBool() else 16
    ciphers = CIPHERS[(cls, tag)]
    n = cls.nonce_size  # 16 (AEGIS-128) or 32 (AEGIS-256)
    nonce_len = n if fdp.ConsumeIntInRange(0, 7) else fdp.ConsumeIntInRange(0, 40)
    nonce = fdp.ConsumeBytes(nonce_len)
    ad = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 300))
    body = fdp.ConsumeBytes(len(data))

    if op == 0:  # decrypt of arbitrary bytes
        for c in ciphers:
            refused(lambda: c.decrypt(nonce, body, ad), f"{c!r}.decrypt")
    elif op == 1:  # decrypt_into with a buffer of any size: wiped on failure
        for c in ciphers:
            size = len(body) - tag if len(body) >= tag else 0
            out = bytearray(b"\xa5" * (size + (len(nonce) % 3) - 1 if size else 4))
            exc = refused(lambda: c.decrypt_into(nonce, body, ad, out), f"{c!r}.decrypt_into")
            if isinstance(exc, InvalidTag) and len(out) >= size:
                assert wiped(out, size), f"{c!r}.decrypt_into left plaintext in out"
    elif op == 2:  # prefixed values: any prefix length, including negative and huge
        plen = fdp.ConsumeIntInRange(-3, 80) if nonce else 2**62
        for c in ciphers:
            refused(lambda: c.open_prefixed(plen, body, ad), f"{c!r}.open_prefixed")
            exc = refused(
                lambda: c.open_prefixed_many(plen, [body, body], ad), f"{c!r}.open_prefixed_many"
            )
            if isinstance(exc, InvalidTag):
                assert getattr(exc, "index", None) == 0, exc
    elif op == 3:  # segments: any framing
        seg = fdp.ConsumeIntInRange(1, 200)
        first = fdp.ConsumeIntInRange(0, 2**32 + 2)
        final = fdp.ConsumeBool()
        prefix = nonce[: n - 5] if fdp.ConsumeIntInRange(0, 7) else nonce
        for c in ciphers:
            out = bytearray(b"\xa5" * (len(body) + fdp.ConsumeIntInRange(0, 3)))
            exc = refused(
                lambda: c.open_segments_into(out, body, seg, prefix, first, final, ad),
                f"{c!r}.open_segments_into",
            )
            if isinstance(exc, InvalidTag):
                assert wiped(out, len(out)), "open_segments_into left plaintext"
    elif op == 4:  # AES-GCM through cryptography
        refused(
            lambda: GCM.decrypt(nonce[:12] if len(nonce) >= 12 else nonce, body, ad),
            "AESGCM.decrypt",
        )
    else:  # differential: every kernel seals what portable seals; any bit flip is refused
        if len(nonce) != n:
            return
        ref = ciphers[0].encrypt(nonce, body, ad)
        bit = fdp.ConsumeIntInRange(0, 8 * len(ref) - 1)
        forged = bytearray(ref)
        forged[bit // 8] ^= 1 << (bit % 8)
        for c in ciphers:
            assert c.encrypt(nonce, body, ad) == ref, f"{c.kernel} differs from portable"
            assert c.decrypt(nonce, ref, ad) == body, f"{c.kernel} cannot open its output"
            refused(lambda: c.decrypt(nonce, bytes(forged), ad), f"{c.kernel} forged")
            out = bytearray(len(body))
            refused(lambda: c.decrypt_into(nonce, forged, ad, out), f"{c.kernel} forged into")
            assert wiped(out, len(body)), f"{c.kernel}: decrypt_into left plaintext"


def make_seeds():
    out = []
    for op in range(7):
        for cls in range(3):
            for tag in (0, 1):
                head = bytes([op, cls, tag, 1]) + bytes(range(16)) + bytes([17])
                out.append(head + bytes(17) + bytes(range(200)) * ((op + cls) % 3 + 1))
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
