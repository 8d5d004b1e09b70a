"""``Keyring.keyed_hash`` cannot reproduce an internal key (issue 27).

Every internal derivation (the values' subkeys, every object key, nonce prefix, commitment and
location check) is recorded while values and objects of every suite and tag size are sealed
and opened; each one's ``info`` is in the reserved domain ``sealstore/`` outside the
blind-index prefix, ``keyed_hash`` refuses each of them, and no HKDF output of an accepted
``info`` equals, extends or is a prefix of any internal output.  Blind-index values derive as
they always did (frozen golden values below)."""

from __future__ import annotations

import ast
import io
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.kdf.hkdf import HKDF as _HKDF

from sealstore import blind_index as B
from sealstore import stream as S
from sealstore.errors import ReservedDerivation
from sealstore.format import Suite
from sealstore.keyring import Key, Keyring, KeyState
from sealstore.keyring import keys as keys_module
from sealstore.keyring import ring as ring_module
from sealstore.stream import object_key as object_key_module

ROOT = Path(__file__).resolve().parents[2]
MATERIAL = bytes(range(32))


class Recorder:
    """Stands in for HKDF in a module and records (salt, info, output) of every derivation."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes | None, bytes, bytes]] = []

    def __call__(self, algorithm, length, salt, info):
        real = _HKDF(algorithm=algorithm, length=length, salt=salt, info=info)
        calls = self.calls

        class Spy:
            def derive(self, material):
                out = real.derive(bytes(material))
                calls.append((salt, bytes(info), out))
                return out

            def derive_into(self, material, buf):
                out = real.derive(bytes(material))
                buf[:] = out
                calls.append((salt, bytes(info), out))
                return len(out)

        return Spy()


@pytest.fixture
def internal(monkeypatch):
    """The (salt, info, output) of every internal derivation made while values and objects of
    every suite and tag size are sealed and opened (large and small values: the adaptive
    suites), under one root material."""
    rec = Recorder()
    monkeypatch.setattr(keys_module, "HKDF", rec)
    monkeypatch.setattr(object_key_module, "HKDF", rec)
    for suite in Suite:
        for tag in suite.spec.tag_sizes:
            ring = Keyring([Key(1, suite, MATERIAL, state=KeyState.PRIMARY)], tag_size=tag)
            for size in (0, 10, 5000):
                data = os.urandom(size)
                assert ring.open(ring.seal(data, b"ctx"), b"ctx") == data
            for kw in ({}, {"context": b"c"}, {"context": b"c", "location": b"bucket/key"}):
                sealed = b"".join(S.seal_stream(b"x" * 3000, ring, segment_size=1024, **kw))
                opened = b"".join(S.open_stream(io.BytesIO(sealed), ring, **kw))
                assert opened == b"x" * 3000
            ring.close()
    assert len(rec.calls) > 3 * len(Suite)
    return rec.calls


def test_every_internal_info_is_reserved_and_refused(internal):
    ring = Keyring([Key(1, "AEGIS-128X4", MATERIAL, state=KeyState.PRIMARY)])
    infos = {info for _, info, _ in internal}
    from sealstore.stream import header

    for const in (keys_module._SUBKEY_INFO, header._INFO, header._CHECK_INFO, header._BOUND_INFO):
        assert any(info.startswith(const) for info in infos), const  # each one was exercised
    for info in infos:
        assert info.startswith(keys_module.RESERVED_INFO_PREFIX)
        assert not info.startswith(keys_module.KEYED_HASH_INFO_PREFIXES)
        with pytest.raises(ReservedDerivation) as err:
            ring.keyed_hash(1, info, b"data")
        assert info not in str(err.value).encode()


@pytest.mark.parametrize(
    "info",
    [b"sealstore/v1/subkey", b"sealstore/", b"sealstore/v2/anything", b"sealstore/v1/blind-inde",
     b"sealstore/v1/object", b"sealstore/v1/object-bound", b"sealstore/v1/object-location"],
)  # fmt: skip
def test_the_reserved_domain_is_refused_whatever_follows(info):
    ring = Keyring([Key(1, "AES-256-GCM", MATERIAL, state=KeyState.PRIMARY)])
    for tail in (b"", b"\x01\x00\x00\x00\x01", os.urandom(40)):
        with pytest.raises(ReservedDerivation):
            ring.keyed_hash(1, info + tail, b"")
    assert ring._hash_keys == {}  # nothing was derived


def test_no_accepted_info_reproduces_an_internal_key(internal, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(ring_module, "HKDF", rec)
    ring = Keyring([Key(1, "AEGIS-256X4", MATERIAL, state=KeyState.PRIMARY)])
    accepted = [
        b"",
        b"info",
        b"Sealstore/v1/subkey",  # the prefix is case-sensitive bytes, and this is not it
        b"sealstore",
        b"xsealstore/v1/subkey",
        B.index_info(b""),
        B.index_info(b"sealstore/v1/subkey"),
        *(B.index_info(os.urandom(n)) for n in (1, 16, 64)),
        *(info[1:] for _, info, _ in internal[:20]),  # the internal infos shifted by one
        *(b" " + info for _, info, _ in internal[:20]),
    ]
    for info in accepted:
        ring.keyed_hash(1, info, b"data")
    derived = [out for _, _, out in rec.calls]
    assert len(derived) == len(set(accepted))
    for hash_key in derived:
        for _, _, out in internal:
            n = min(len(hash_key), len(out))
            assert hash_key[:n] != out[:n]


def test_every_hkdf_in_the_package_uses_a_reserved_info():
    """The derivations in the source: each HKDF call's info is one of the reserved constants
    (or keyed_hash's own, which is checked); a new derivation must be added here knowingly."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "plugin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "HKDF":
                (info,) = [k.value for k in node.keywords if k.arg == "info"]
                while isinstance(info, ast.BinOp):  # CONST + header + ...: the leading constant
                    info = info.left
                found.setdefault(str(path.relative_to(ROOT)), []).append(ast.unparse(info))
    assert found == {
        "plugin/keyring/keys.py": ["_SUBKEY_INFO"],
        "plugin/keyring/ring.py": ["info"],
        "plugin/stream/object_key.py": ["_INFO", "_CHECK_INFO", "_BOUND_INFO"],
    }
    from sealstore.stream import header

    for const in (keys_module._SUBKEY_INFO, header._INFO, header._CHECK_INFO, header._BOUND_INFO):
        assert const.startswith(keys_module.RESERVED_INFO_PREFIX)
        assert not const.startswith(keys_module.KEYED_HASH_INFO_PREFIXES)
    assert B.INFO_PREFIX in keys_module.KEYED_HASH_INFO_PREFIXES


# Frozen when the reserved domain was added: blind-index values stored in users' databases must
# keep matching, so the derivation of every accepted info never changes.
GOLDEN = {
    (
        b"sealstore/v1/blind-indexusers\x00email",
        b"alice@example.com",
    ): "4753534431892ac5dd70c99b3b04d36f59416cd6a650802d8351b670b69dd402",
    (
        b"sealstore/v1/blind-index",
        b"",
    ): "e93663a7f05356f57efe6b41705238a711a54c502c1bce40f298b660303aa232",
    (
        b"application/own-hash",
        b"value",
    ): "b695e2cdc07de12b6304b24e3d06000d7c7f5319aee7f7dcd541256e87970201",
}


@pytest.mark.parametrize("info,data", list(GOLDEN))
def test_accepted_infos_derive_as_before(info, data):
    ring = Keyring([Key(0x01020304, "AEGIS-128X4", MATERIAL, state=KeyState.PRIMARY)])
    assert ring.keyed_hash(0x01020304, info, data).hex() == GOLDEN[(info, data)]
    if info.startswith(B.INFO_PREFIX):
        value = B.index_value(ring, info, data, 16)
        assert value.hex() == "01020304" + GOLDEN[(info, data)][:32]
