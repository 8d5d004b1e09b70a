"""sealstore.format: header layout, sizes, validation, contexts, and the frozen golden vectors."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sealstore import format as fmt
from sealstore.errors import MalformedCiphertext, SealstoreError
from sealstore.format import Suite

from aead_cases import UNUSED_SUITE_ID
from reference import aegis_ref

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

GOLDEN = sorted((Path(__file__).parent.parent / "vectors" / "golden").glob("*.json"))


# ---- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "suite, tag, expected",
    [
        ("AEGIS-128L", 32, 55),
        ("AEGIS-128X2", 32, 55),
        ("AEGIS-128X4", 32, 55),
        ("AEGIS-128X4", 16, 39),
        ("AEGIS-128L", 16, 39),
        ("AES-256-GCM", 16, 35),
    ],
)
def test_overhead(suite, tag, expected):
    assert fmt.overhead(suite, tag) == expected
    assert fmt.sealed_size(100, suite, tag) == 100 + expected


def test_overhead_rejects_bad_tag_sizes():
    with pytest.raises(ValueError, match="16"):
        fmt.overhead("AES-256-GCM", 32)
    with pytest.raises(ValueError, match="16 or 32"):
        fmt.overhead("AEGIS-128X4", 24)
    with pytest.raises(ValueError):
        fmt.sealed_size(-1, "AEGIS-128L")


def test_header_constants_and_layout():
    h = fmt.pack_header(Suite.AEGIS_128X4, 0x0A1B2C3D, 32)
    assert len(h) == fmt.HEADER_SIZE == 7
    assert h == bytes([0x01, 0x03, 0x0A, 0x1B, 0x2C, 0x3D, 0x01])
    assert h[fmt.KEY_ID_OFFSET : fmt.KEY_ID_OFFSET + fmt.KEY_ID_SIZE] == bytes.fromhex("0a1b2c3d")
    assert fmt.pack_header("AES-256-GCM", 7, 16) == bytes([1, 0x10, 0, 0, 0, 7, 0])
    assert fmt.pack_header("aegis_128l", 0xFFFFFFFF, 16)[1] == 0x01
    with pytest.raises(ValueError):
        fmt.pack_header("AEGIS-128L", 1 << 32, 16)


def test_suite_parse():
    assert Suite.parse("aegis-128x2") is Suite.AEGIS_128X2
    assert Suite.parse(0x10) is Suite.AES_256_GCM
    assert str(Suite.AEGIS_128X4) == "AEGIS-128X4" == Suite.AEGIS_128X4.label
    assert Suite.parse("aegis-256x4") is Suite.AEGIS_256X4 and Suite.parse(4) is Suite.AEGIS_256
    with pytest.raises(ValueError, match="unknown suite"):
        Suite.parse("AEGIS-256X8")
    with pytest.raises(ValueError, match="0x7f"):
        Suite.parse(0x7F)
    with pytest.raises(TypeError):
        Suite.parse(1.0)
    assert fmt.nonce_size("AES-256-GCM") == 12 and fmt.nonce_size("AEGIS-128L") == 16
    assert fmt.tag_sizes("AEGIS-128X2") == (16, 32) and fmt.tag_sizes("AES-256-GCM") == (16,)


# ---- parse_header ------------------------------------------------------------------------------


def _value(suite=Suite.AEGIS_128X4, key_id=5, tag=32, body=0):
    h = fmt.pack_header(suite, key_id, tag)
    return h + bytes(fmt.nonce_size(suite) + tag + body)


def test_parse_header_roundtrip_any_buffer():
    v = _value(key_id=0xDEADBEEF, body=3)
    for buf in (v, bytearray(v), memoryview(v)):
        h = fmt.parse_header(buf)
        assert (h.version, h.suite, h.key_id, h.tag_size, h.nonce_size) == (
            1,
            Suite.AEGIS_128X4,
            0xDEADBEEF,
            32,
            16,
        )
        assert h.overhead == 55
    assert fmt.key_id_of(v) == 0xDEADBEEF


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda v: v[:6], "header alone"),
        (lambda v: v[:54], "at least 55"),
        (lambda v: b"\x02" + v[1:], "version 0x02"),
        (lambda v: b"\x00" + v[1:], "version 0x00"),
        (lambda v: v[:1] + bytes([UNUSED_SUITE_ID]) + v[2:], f"suite id 0x{UNUSED_SUITE_ID:02x}"),
        (lambda v: v[:6] + b"\x02" + v[7:], "reserved flag"),
        (lambda v: v[:6] + b"\x81" + v[7:], "reserved flag"),
    ],
)
def test_parse_header_rejects(mutate, match):
    with pytest.raises(MalformedCiphertext, match=match) as info:
        fmt.parse_header(mutate(_value()))
    assert isinstance(info.value, SealstoreError) and isinstance(info.value, ValueError)


def test_parse_header_rejects_gcm_with_tag256_flag():
    v = fmt.pack_header("AES-256-GCM", 1, 16)[:6] + b"\x01" + bytes(40)
    with pytest.raises(MalformedCiphertext, match="256-bit tag"):
        fmt.parse_header(v)


def test_parse_header_gcm_minimum_length():
    v = _value(Suite.AES_256_GCM, tag=16)
    assert fmt.parse_header(v).overhead == 35
    with pytest.raises(MalformedCiphertext, match="at least 35"):
        fmt.parse_header(v[:-1])


def test_parse_header_type_error():
    with pytest.raises(TypeError, match="bytes-like"):
        fmt.parse_header("0101000000")


# ---- contexts ------------------------------------------------------------------------------------


def test_column_context_is_canonical_and_separating():
    a = fmt.column_context("users", "email")
    assert a == fmt.column_context("users", "email")
    assert a.startswith(len(b"sealstore/v1/column").to_bytes(4, "big") + b"sealstore/v1/column")
    distinct = {
        a,
        fmt.column_context("users", "emai"),
        fmt.column_context("user", "semail"),  # same concatenation, different split
        fmt.column_context("users", "email", row=1),
        fmt.column_context("users", "email", row="1"),  # types are part of the identity
        fmt.column_context("users", "email", row=b"1"),
        fmt.column_context("users", "email", row=(1, 2)),
        fmt.column_context("users", "email", row=(12,)),
        fmt.column_context("users", "email", row=uuid.UUID(int=1)),
    }
    assert len(distinct) == 9
    assert fmt.column_context("t", "c", row=(7,)) == fmt.column_context("t", "c", row=7)


def test_column_context_rejects_bad_input():
    with pytest.raises(TypeError):
        fmt.column_context(b"t", "c")
    with pytest.raises(ValueError):
        fmt.column_context("", "c")
    with pytest.raises(TypeError):
        fmt.column_context("t", "c", row=1.5)
    with pytest.raises(TypeError):
        fmt.column_context("t", "c", row=True)
    with pytest.raises(ValueError):
        fmt.column_context("t", "c", row=())


def test_context_digest():
    ctx = fmt.column_context("t", "c")
    d = hashlib.sha256(ctx).digest()
    assert fmt.context_digest(ctx) == d
    assert fmt.context_digest(ctx) is fmt.context_digest(ctx)  # cached
    assert fmt.context_digest(bytearray(ctx)) == d
    assert fmt.context_digest(memoryview(ctx)) == d
    assert fmt.context_digest() == hashlib.sha256(b"").digest()
    with pytest.raises(TypeError, match="str"):
        fmt.context_digest("t.c")
    with pytest.raises(TypeError, match="bytes-like"):
        fmt.context_digest(5)


def test_context_digest_cache_is_bounded():
    for i in range(fmt._DIGEST_CACHE_LIMIT + 10):
        fmt.context_digest(b"row-%d" % i)
    assert len(fmt._DIGESTS) <= fmt._DIGEST_CACHE_LIMIT


# ---- golden vectors ------------------------------------------------------------------------------


def test_golden_vectors_cover_every_suite_and_tag_size():
    seen = set()
    for path in GOLDEN:
        for v in json.loads(path.read_text())["vectors"]:
            seen.add((v["suite"], v["tag_size"]))
    expected = {(str(s), t) for s in Suite for t in fmt.tag_sizes(s)}
    assert seen == expected


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_vectors_still_open(path):
    """Each frozen value opens through the Keyring and, independently, through the documented
    recipe: subkey = HKDF-SHA256(material, info="sealstore/v1/subkey"||header), AD = header ||
    SHA-256(context)."""
    import sealstore
    from sealstore.keyring import Key, Keyring, KeyState

    doc = json.loads(path.read_text())
    for v in doc["vectors"]:
        sealed = bytes.fromhex(v["sealed"])
        material = bytes.fromhex(v["material"])
        context = bytes.fromhex(v["context"])
        plaintext = bytes.fromhex(v["plaintext"])
        suite = Suite.parse(v["suite"])
        key_id = int(v["key_id"], 16)

        header = fmt.parse_header(sealed)
        assert (header.suite, header.key_id, header.tag_size) == (suite, key_id, v["tag_size"])
        assert len(sealed) == fmt.sealed_size(len(plaintext), suite, v["tag_size"])

        ring = Keyring(
            [Key(key_id, suite, material, state=KeyState.PRIMARY)], tag_size=v["tag_size"]
        )
        assert ring.open(sealed, context) == plaintext

        hdr = sealed[:7]
        length = suite.spec.key_size
        subkey = HKDF(hashes.SHA256(), length, None, b"sealstore/v1/subkey" + hdr).derive(material)
        assert subkey.hex() == v["subkey"]
        if suite is Suite.AES_256_GCM:
            cipher = sealstore.AESGCM(subkey)
        else:
            cipher = getattr(sealstore, "AEGIS" + str(suite)[6:])(subkey, tag_size=v["tag_size"])
        n = header.nonce_size
        ad = hdr + hashlib.sha256(context).digest()
        assert cipher.decrypt(sealed[7 : 7 + n], sealed[7 + n :], ad) == plaintext
        if suite.spec.native_variant is not None:  # and through the pure-Python oracle
            t = v["tag_size"]
            body = sealed[7 + n :]
            opened = aegis_ref.decrypt(
                suite.spec.native_variant, subkey, sealed[7 : 7 + n], body[:-t], body[-t:], ad
            )
            assert opened == plaintext
