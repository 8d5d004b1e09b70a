"""Bad input at the public entry points: each gets its documented exception, never a crash or a
silent wrong answer.  ``ROWS`` is the table of ``docs/HARDENING.md`` ("Bad input"); print it
with ``python tests/core/test_hardening_inputs.py``.  The documented class is checked exactly
(``type(exc) is``), so a change of exception type is a visible change of the contract."""

from __future__ import annotations

import io
import os
import sys

import pytest

from sealstore import AEGIS128L, AEGIS128X4, AESGCM, Keyring
from sealstore.errors import (
    InsecureKeyFile,
    InvalidTag,
    KernelUnavailable,
    KeyCommitmentMismatch,
    KeyNotUsable,
    MalformedCiphertext,
    MalformedObject,
    NotSealedObject,
    OverlappingBuffers,
    ShortTagRefused,
    TruncatedObject,
    UnknownKeyId,
)
from sealstore.format import pack_header, parse_header, sealed_size
from sealstore.keysources.file import KeyFile
from sealstore.keyring import Key, KeyState
from sealstore.stream import open_stream, parse_object_header, seal_stream

from aead_cases import UNUSED_SUITE_ID

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

K16 = bytes(range(16))
N16 = bytes(16)
C = AEGIS128X4(K16, 32)
CT = C.encrypt(N16, b"secret plaintext", b"ad")
GCM = AESGCM(bytes(32))
RING = Keyring(
    [
        Key(1, "AEGIS-128X4", bytes(32), state=KeyState.PRIMARY),
        Key(2, "AEGIS-128L", bytes(range(32)), state=KeyState.RETIRED),
        Key(3, "AEGIS-128X4", None, state=KeyState.DESTROYED),
    ]
)
SEALED = RING.seal(b"secret plaintext", b"ctx")
SHORT_TAG = Keyring([Key(1, "AEGIS-128X4", bytes(32), state=KeyState.PRIMARY)], tag_size=16).seal(
    b"secret plaintext", b"ctx"
)  # RING's own key, 16-byte tag
OBJECT = b"".join(seal_stream(b"x" * 3000, RING, segment_size=1024, context=b"ctx"))


def flip(data: bytes, i: int) -> bytes:
    b = bytearray(data)
    b[i] ^= 1
    return bytes(b)


def under(key_id: int) -> bytes:
    """SEALED with its header naming another key (parse_header accepts it)."""
    return SEALED[:2] + key_id.to_bytes(4, "big") + SEALED[6:]


def loose_key_file(tmp):
    path = os.path.join(tmp, "keys.json")
    with open(path, "w") as f:
        f.write("{}")
    os.chmod(path, 0o644)
    return KeyFile(path).load()


def opened(data, context=b"ctx"):
    return b"".join(open_stream(io.BytesIO(data), RING, context=context))


# (entry point, bad input, call, documented exception)
ROWS = [
    ("AEGIS128*(key)", "key not bytes-like (str)", lambda: AEGIS128L("k" * 16), TypeError),
    ("AEGIS128*(key)", "key of 15 or 32 bytes", lambda: AEGIS128L(bytes(15)), ValueError),
    ("AEGIS128*(key, tag_size)", "tag_size 24", lambda: AEGIS128L(K16, 24), ValueError),
    (
        "AEGIS128*(kernel=)",
        "unknown kernel name",
        lambda: AEGIS128L(K16, kernel="neon"),
        KernelUnavailable,
    ),
    (
        "AEGIS128*(kernel=)",
        "kernel the variant lacks",
        lambda: AEGIS128L(K16, kernel="avx512"),
        KernelUnavailable,
    ),
    ("encrypt/decrypt", "nonce of 12 bytes", lambda: C.encrypt(bytes(12), b""), ValueError),
    ("encrypt/decrypt", "nonce not bytes-like (None)", lambda: C.encrypt(None, b""), TypeError),
    ("encrypt/decrypt", "data is a str", lambda: C.encrypt(N16, "text"), TypeError),
    ("encrypt/decrypt", "associated_data is an int", lambda: C.encrypt(N16, b"", 5), TypeError),
    (
        "encrypt/decrypt",
        "non-contiguous buffer",
        lambda: C.encrypt(N16, memoryview(b"abcd")[::2]),
        TypeError,
    ),
    ("decrypt", "empty input", lambda: C.decrypt(N16, b""), InvalidTag),
    ("decrypt", "input shorter than the tag", lambda: C.decrypt(N16, CT[:31]), InvalidTag),
    (
        "decrypt",
        "one bit of ciphertext/tag/nonce/AD changed",
        lambda: C.decrypt(N16, flip(CT, 3), b"ad"),
        InvalidTag,
    ),
    ("decrypt", "wrong associated data", lambda: C.decrypt(N16, CT, b"AD"), InvalidTag),
    (
        "encrypt_into/decrypt_into",
        "buf too small",
        lambda: C.encrypt_into(N16, bytes(16), None, bytearray(47)),
        ValueError,
    ),
    (
        "encrypt_into/decrypt_into",
        "buf read-only (bytes)",
        lambda: C.encrypt_into(N16, b"", None, bytes(64)),
        TypeError,
    ),
    (
        "encrypt_into/decrypt_into",
        "called in the old order (buffer first)",
        lambda: C.encrypt_into(bytearray(64), N16, b"data", None),
        TypeError,
    ),
    (
        "encrypt_into/decrypt_into",
        "buf overlapping data (not exactly in place)",
        lambda: (lambda b: C.encrypt_into(N16, memoryview(b)[:16], None, memoryview(b)[1:]))(
            bytearray(64)
        ),
        OverlappingBuffers,
    ),
    (
        "decrypt_into",
        "forged input (buf is wiped)",
        lambda: C.decrypt_into(N16, flip(CT, 0), b"ad", bytearray(16)),
        InvalidTag,
    ),
    ("open_prefixed", "negative prefix_len", lambda: C.open_prefixed(-1, CT), ValueError),
    ("open_prefixed", "prefix_len past the end", lambda: C.open_prefixed(10**6, CT), InvalidTag),
    ("open_prefixed", "prefix_len >= 2**63", lambda: C.open_prefixed(2**64, CT), ValueError),
    (
        "open_prefixed_many",
        "an item not bytes-like",
        lambda: C.open_prefixed_many(0, [C.seal_prefixed(b"", b"x"), 1]),
        TypeError,
    ),
    (
        "open_segments_into",
        "segment_size 0 or negative",
        lambda: C.open_segments_into(bytearray(64), CT, 0, bytes(11), 0, True),
        ValueError,
    ),
    (
        "open_segments_into",
        "first_index >= 2**32",
        lambda: C.open_segments_into(bytearray(64), CT, 16, bytes(11), 2**32, True),
        ValueError,
    ),
    (
        "open_segments_into",
        "nonce_prefix not 11 bytes",
        lambda: C.open_segments_into(bytearray(64), CT, 16, bytes(12), 0, True),
        ValueError,
    ),
    (
        "open_segments_into",
        "truncated/extended framing",
        lambda: C.open_segments_into(bytearray(64), CT[:20], 16, bytes(11), 0, True),
        InvalidTag,
    ),
    ("AESGCM(key)", "key of 20 bytes", lambda: AESGCM(bytes(20)), ValueError),
    (
        "AESGCM.decrypt",
        "input shorter than the tag",
        lambda: GCM.decrypt(bytes(12), b"x"),
        InvalidTag,
    ),
    ("AESGCM.decrypt", "empty nonce", lambda: GCM.decrypt(b"", bytes(32)), ValueError),
    ("format.parse_header", "not bytes-like (str)", lambda: parse_header("x" * 60), TypeError),
    (
        "format.parse_header",
        "empty or shorter than the header",
        lambda: parse_header(b""),
        MalformedCiphertext,
    ),
    (
        "format.parse_header",
        "unknown version/suite, reserved flags",
        lambda: parse_header(b"\x01" + bytes([UNUSED_SUITE_ID]) + bytes(60)),
        MalformedCiphertext,
    ),
    (
        "format.parse_header",
        "header fine, body shorter than nonce + tag",
        lambda: parse_header(SEALED[:40]),
        MalformedCiphertext,
    ),
    (
        "format.pack_header",
        "key_id outside 32 bits",
        lambda: pack_header("AEGIS-128L", -1, 16),
        ValueError,
    ),
    (
        "format.pack_header",
        "unknown suite name",
        lambda: pack_header("AEGIS-512", 1, 16),
        ValueError,
    ),
    (
        "format.sealed_size",
        "negative plaintext size",
        lambda: sealed_size(-1, "AEGIS-128L"),
        ValueError,
    ),
    ("Keyring.open", "not bytes-like (str, None)", lambda: RING.open("x" * 60), TypeError),
    (
        "Keyring.open",
        "empty or truncated value",
        lambda: RING.open(SEALED[:20], b"ctx"),
        MalformedCiphertext,
    ),
    (
        "Keyring.open",
        "key id not in the keyring",
        lambda: RING.open(under(9), b"ctx"),
        UnknownKeyId,
    ),
    (
        "Keyring.open",
        "key retired (without allow_retired) or destroyed",
        lambda: RING.open(under(3), b"ctx"),
        KeyNotUsable,
    ),
    (
        "Keyring.open",
        "edited header/nonce/body/tag",
        lambda: RING.open(flip(SEALED, 30), b"ctx"),
        InvalidTag,
    ),
    ("Keyring.open", "wrong context", lambda: RING.open(SEALED, b"other"), InvalidTag),
    ("Keyring.open", "context is a str", lambda: RING.open(SEALED, "ctx"), TypeError),
    ("Keyring.seal", "plaintext is a str", lambda: RING.seal("text"), TypeError),
    (
        "Keyring.open_many",
        "one bad value (.index names it)",
        lambda: RING.open_many([SEALED, flip(SEALED, 30)], b"ctx"),
        InvalidTag,
    ),
    (
        "stream.parse_object_header",
        "not an object (no magic)",
        lambda: parse_object_header(b"PK\x03\x04" + bytes(80)),
        NotSealedObject,
    ),
    (
        "stream.parse_object_header",
        "header truncated",
        lambda: parse_object_header(OBJECT[:50]),
        MalformedObject,
    ),
    (
        "stream.parse_object_header",
        "segment size 2**40 declared",
        lambda: parse_object_header(OBJECT[:7] + b"\x28" + OBJECT[8:]),
        MalformedObject,
    ),
    (
        "open_stream",
        "header edited (key commitment)",
        lambda: opened(OBJECT[:20] + bytes([OBJECT[20] ^ 1]) + OBJECT[21:]),
        KeyCommitmentMismatch,
    ),
    ("open_stream", "wrong context", lambda: opened(OBJECT, b"other"), KeyCommitmentMismatch),
    (
        "open_stream",
        "last segment dropped (cut at a segment boundary)",
        lambda: opened(OBJECT[: -(952 + 32)]),
        TruncatedObject,
    ),
    ("open_stream", "cut inside a segment", lambda: opened(OBJECT[:-100]), InvalidTag),
    ("open_stream", "body edited", lambda: opened(flip(OBJECT, 200)), InvalidTag),
    ("KeyFile.load", "file readable by group/others", "loose_key_file", InsecureKeyFile),
    (
        "Keyring.open",
        "16-byte tag, keyring requires 32 (short tags not accepted)",
        lambda: RING.open(SHORT_TAG, b"ctx"),
        ShortTagRefused,
    ),
]


@pytest.mark.parametrize("entry,bad,call,exc", ROWS, ids=[f"{r[0]}: {r[1]}" for r in ROWS])
def test_bad_input_gets_its_documented_exception(entry, bad, call, exc, tmp_path):
    if call == "loose_key_file":
        if os.name != "posix":
            pytest.skip("permission bits are POSIX")

        def call():
            return loose_key_file(str(tmp_path))

    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is exc, f"{entry} / {bad}: {type(info.value).__name__}: {info.value}"
    # no secret in any message: the plaintext and keys used above never appear
    assert "secret plaintext" not in str(info.value)


def test_decrypt_into_wipes_out_on_failure():
    out = bytearray(b"\xa5" * 16)
    with pytest.raises(InvalidTag):
        C.decrypt_into(N16, flip(CT, 0), b"ad", out)
    assert out == bytes(16)


def test_open_many_names_the_bad_position():
    with pytest.raises(InvalidTag) as info:
        RING.open_many([SEALED, SEALED, flip(SEALED, 30)], b"ctx")
    assert info.value.index == 2


def test_retired_key_opens_when_allowed():
    value = Keyring([Key(2, "AEGIS-128L", bytes(range(32)), state=KeyState.PRIMARY)]).seal(b"v")
    with pytest.raises(KeyNotUsable):
        RING.open(value)
    assert RING.open(value, allow_retired=True) == b"v"


def markdown() -> str:
    lines = ["| entry point | bad input | exception |", "| --- | --- | --- |"]
    for entry, bad, _call, exc in ROWS:
        lines.append(f"| `{entry}` | {bad} | `{exc.__name__}` |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown() + "\n")
