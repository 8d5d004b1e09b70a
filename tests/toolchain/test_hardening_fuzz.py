"""Replay the fuzz corpus (seeds and saved regressions) through the fuzz targets' properties,
without atheris, so every input that ever broke a property stays a regression test; and show the
properties can fail.  The bounded fuzzing itself runs from ``tools/fuzz.sh`` (CI)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
TARGETS = ("sealed", "aead", "object", "keyfile", "metadata", "columns", "config", "registry")

sys.path.insert(0, str(FUZZ))
harness = importlib.import_module("harness")
sys.path.pop(0)


def target(name: str):
    sys.path.insert(0, str(FUZZ))
    try:
        return importlib.import_module(f"fuzz_{name}")
    finally:
        sys.path.pop(0)


def corpus(name: str) -> list[Path]:
    return sorted(p for p in (FUZZ / "corpus" / name).iterdir() if p.is_file())


@pytest.mark.parametrize("name", TARGETS)
def test_corpus_is_present(name):
    assert len(corpus(name)) >= 8


@pytest.mark.parametrize(
    "name,path",
    [(n, p) for n in TARGETS for p in corpus(n)],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_corpus_input_keeps_the_properties(name, path):
    target(name).check(path.read_bytes())


def test_seeds_open_so_the_corpus_reaches_the_decrypting_code():
    """At least some sealed-value and object seeds are valid values (not just junk)."""
    ring = harness.keyring()
    opened = 0
    for path in corpus("sealed"):
        try:
            ring.open(path.read_bytes(), harness.CONTEXT)
            opened += 1
        except Exception:  # noqa: BLE001 - counting the valid ones only
            pass
    assert opened >= 8


def test_open_property_fires_for_plaintext_from_an_unknown_input(monkeypatch):
    mod = target("sealed")
    seed = (FUZZ / "corpus" / "sealed" / "seed-000").read_bytes()
    monkeypatch.setattr(mod, "SEEDS", {})
    with pytest.raises(AssertionError, match="never sealed"):
        mod.check(seed)


def test_exception_property_fires_for_an_undocumented_exception(monkeypatch):
    mod = target("sealed")

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(mod, "parse_header", broken)
    with pytest.raises(AssertionError, match="KeyError"):
        mod.check(b"\x01\x03")


def test_object_property_fires_when_a_modified_object_completes(monkeypatch):
    mod = target("object")
    seeds = corpus("object")
    monkeypatch.setattr(mod, "SEEDS", {})
    fired = 0
    for path in seeds:
        try:
            mod.check(path.read_bytes())
        except AssertionError as exc:
            assert "never sealed" in str(exc)
            fired += 1
    assert fired >= 6


def test_keyfile_property_fires_when_a_message_shows_material(monkeypatch):
    mod = target("keyfile")
    seed = (FUZZ / "corpus" / "keyfile" / "seed-002").read_bytes()  # material cut short

    class Loud(mod.KeyFile):
        def load(self):
            with open(self.path) as f:
                raise mod.ConfigError(f"bad key file: {f.read()}")

    monkeypatch.setattr(mod, "KeyFile", Loud)
    with pytest.raises(AssertionError, match="shows key material"):
        mod.check(seed)


def test_metadata_property_fires_when_a_disagreeing_field_is_accepted(monkeypatch):
    mod = target("metadata")
    seed = (FUZZ / "corpus" / "metadata" / "seed-000").read_bytes()
    edited = seed.replace(b"sealstore-segment-size=", b"sealstore-segment-size=1")
    mod.check(seed)
    mod.check(edited)  # refused with MalformedObject, which is documented

    def unchecked(meta):  # a reader that forgot to compare the repeated fields
        raw = mod.md.base64.b64decode(mod.decode_field(meta, mod.md.HEADER))
        return mod.md.parse_object_header(raw), raw

    monkeypatch.setattr(mod.md, "header_from_metadata", unchecked)
    with pytest.raises(AssertionError, match="disagrees"):
        mod.check(edited)


def test_columns_property_fires_when_map_columns_pairs_rows_wrongly(monkeypatch):
    mod = target("columns")
    seed = bytes([0, 5]) + b"enough bytes for five rows"

    def reversed_rows(rows, plan):
        ((i, fn),) = plan
        return [tuple(fn(v) if k == i else v for k, v in enumerate(r)) for r in rows][::-1]

    mod.check(seed)
    monkeypatch.setattr(mod, "map_columns", reversed_rows)
    with pytest.raises(AssertionError, match="paired rows wrongly"):
        mod.check(seed)


def test_columns_property_fires_when_the_opener_accepts_a_modified_value():
    mod = target("columns")
    with pytest.raises(AssertionError, match="modified value"):
        mod._check_tamper(lambda v: b"opened anyway", b"sealed value", 3)
