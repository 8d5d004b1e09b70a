"""The suite registry (sealstore.suites) agrees with the format, the native kernels, the cipher
classes and the docs, and every layer reads it: no list of suites, variants or tag rules is
written out anywhere else in the library, the bench or the tools."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

import sealstore
from sealstore import format as fmt
from sealstore import native
from sealstore import stream as S
from sealstore.errors import InvalidTag, MalformedCiphertext, MalformedObject
from sealstore.keyring import Key, Keyring, KeyState, make_cipher
from sealstore.suites import (
    COLUMN_OVERHEAD,
    SUITES,
    Suite,
    by_label,
    by_native_variant,
    native_variants,
    spec,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)

SPEC_TAGS = [pytest.param(s, t, id=f"{s.label}-tag{t}") for s in SUITES for t in s.tag_sizes]
SPECS = [pytest.param(s, id=s.label) for s in SUITES]
NATIVE = [pytest.param(s, id=s.label) for s in SUITES if s.native_variant is not None]


def _ring(s, tag_size, **kw) -> Keyring:
    key = Key(0x0A0B0C0D, s.suite, os.urandom(32), state=KeyState.PRIMARY)
    return Keyring([key], tag_size=tag_size, **kw)


# ---- the registry itself ---------------------------------------------------------------------


def test_one_record_per_suite_member_with_unique_ids_labels_and_variants():
    assert [s.suite for s in SUITES] == sorted(Suite)
    assert len({s.id for s in SUITES}) == len({s.label for s in SUITES}) == len(Suite)
    variants = [s.native_variant for s in SUITES if s.native_variant is not None]
    assert len(set(variants)) == len(variants) and tuple(variants) == native_variants()
    for s in SUITES:
        assert 0 < s.id <= 0xFF and s.default_tag_size in s.tag_sizes
        assert s.small_suite is None or s.small_suite.spec.family == s.family


def test_the_public_suite_names_keep_working():
    assert sealstore.Suite is fmt.Suite is Suite
    assert "Suite" in fmt.__all__ and "Suite" in sealstore.__all__
    for s in SUITES:
        assert Suite.parse(s.label) is Suite.parse(s.label.lower().replace("-", "_")) is s.suite
        assert Suite.parse(s.id) is Suite.parse(s.suite) is s.suite
        assert str(s.suite) == s.suite.label == s.label and s.suite.spec is s
        assert spec(s.label) is spec(s.id) is by_label(s.label) is s
    with pytest.raises(ValueError, match="unknown suite 'AEGIS-999'; expected one of"):
        Suite.parse("AEGIS-999")
    with pytest.raises(ValueError, match="unknown suite id 0x7f"):
        spec(0x7F)
    with pytest.raises(TypeError):
        Suite.parse(1.0)
    for bad in ("AEGIS-999", None, 3):
        with pytest.raises(ValueError, match="unknown native variant"):
            by_native_variant(bad)


def test_format_doc_table_is_the_registry():
    """docs/FORMAT.md's suite table: id, subkey, nonce, tags and both overheads per suite."""
    rows = {}
    text = (ROOT / "docs" / "FORMAT.md").read_text()
    for m in re.finditer(r"^\| (\S+) +\| 0x(\w\w) \| (\d+) B +\| (\d+) B +\| ([\d, ]+?) +\|"
                         r" +([*\d-]+) +\| +([\d-]+) +\|$", text, re.M):  # fmt: skip
        label, ident, key, nonce, tags, o32, o16 = m.groups()
        rows[label] = (int(ident, 16), int(key), int(nonce),
                       tuple(int(t) for t in tags.split(",")), o32.strip("*"), o16)  # fmt: skip
    expected = {
        s.label: (s.id, s.key_size, s.nonce_size, s.tag_sizes,
                  str(s.overhead(32)) if 32 in s.tag_sizes else "-",
                  str(s.overhead(16)) if 16 in s.tag_sizes else "-")
        for s in SUITES
    }  # fmt: skip
    assert rows == expected


@pytest.mark.parametrize("s", SPECS)
def test_every_suite_has_frozen_golden_vectors(s):
    path = ROOT / "tests" / "vectors" / "golden" / f"{s.label.lower()}.json"
    assert path.is_file(), f"{s.label} has no golden vectors ({path.name})"


def test_every_label_fits_the_key_tables_suite_column():
    from sealstore.keysources.database import sealstore_keys

    width = sealstore_keys.c.suite.type.length
    assert max(len(s.label) for s in SUITES) <= width


def test_column_overhead_is_pinned_and_wider_suites_are_known():
    """Column widths are sized for COLUMN_OVERHEAD, pinned so that adding a suite never widens
    an existing column; a (suite, tag) needing more must be sized explicitly (``overhead=`` on
    the column, refused with ValueTooLong otherwise) and is listed here on purpose."""
    assert COLUMN_OVERHEAD == 55
    wider = {(s.label, t) for s in SUITES for t in s.tag_sizes if s.overhead(t) > COLUMN_OVERHEAD}
    assert wider == {("AEGIS-256", 32), ("AEGIS-256X2", 32), ("AEGIS-256X4", 32)}


# ---- registry <-> format ---------------------------------------------------------------------


@pytest.mark.parametrize("s,tag", SPEC_TAGS)
def test_overhead_is_what_the_format_and_a_real_value_say(s, tag):
    assert s.overhead(tag) == fmt.overhead(s.suite, tag) == fmt.sealed_size(0, s.label, tag)
    assert s.overhead(tag) == fmt.HEADER_SIZE + s.nonce_size + tag
    assert fmt.nonce_size(s.id) == s.nonce_size and fmt.tag_sizes(s.label) == s.tag_sizes
    ring = _ring(s, tag, adaptive_threshold=0)
    for n in (0, 1, 100, 5000):
        sealed = ring.seal(bytes(n), b"ctx")
        h = fmt.parse_header(sealed)
        assert (h.suite, h.tag_size, h.nonce_size) == (s.suite, tag, s.nonce_size)
        assert len(sealed) == n + s.overhead(tag) == fmt.sealed_size(n, s.suite, tag)
        assert h.overhead == s.overhead(tag)


@pytest.mark.parametrize("s", SPECS)
def test_tag_sizes_outside_the_record_are_refused_everywhere(s):
    for tag in {8, 16, 24, 32, 64} - set(s.tag_sizes):
        for call in (lambda: s.overhead(tag), lambda: fmt.overhead(s.suite, tag),
                     lambda: fmt.pack_header(s.suite, 1, tag), lambda: s.new_cipher(bytes(s.key_size), tag)):  # fmt: skip
            with pytest.raises(ValueError, match=f"{s.label} tag_size must be"):
                call()


@pytest.mark.parametrize("s", SPECS)
def test_headers_with_a_tag_flag_the_suite_does_not_allow_are_malformed(s):
    """Values and objects: the flag byte may only name a tag size of the suite's record."""
    for tag in (16, 32):
        flags = fmt.FLAG_TAG256 if tag == 32 else 0
        value = bytes([fmt.VERSION, s.id, 0, 0, 0, 1, flags]) + bytes(100)
        obj = bytearray(S.ObjectHeader(S.VERSION, Suite.AEGIS_128L, flags, 16, 1, bytes(32),
                                       bytes(32)).pack())  # fmt: skip
        obj[5] = s.id
        if tag in s.tag_sizes:
            assert fmt.parse_header(value).tag_size == tag
            assert S.parse_object_header(bytes(obj)).tag_size == tag
        else:
            with pytest.raises(MalformedCiphertext, match=f"{s.label} values"):
                fmt.parse_header(value)
            with pytest.raises(MalformedObject, match=f"{s.label} objects"):
                S.parse_object_header(bytes(obj))


# ---- registry <-> native kernels -------------------------------------------------------------


def test_native_variants_are_the_c_librarys():
    assert tuple(native.VARIANTS) == native_variants()
    assert set(native.info()["selected"]) == set(native_variants())
    assert native.lib.SEALSTORE_NVARIANTS == len(native_variants())
    for bad in (-1, native.lib.SEALSTORE_NVARIANTS, 1 << 30):
        assert native.lib.sealstore_variant_name(bad) == native.ffi.NULL


def test_native_variants_are_the_native_directories_the_build_compiles():
    build = importlib.util.spec_from_file_location(
        "build_ffi_probe", ROOT / "native" / "build_ffi.py"
    )
    mod = importlib.util.module_from_spec(build)
    build.loader.exec_module(mod)
    dirs = tuple(v.lower().replace("-", "") for v in native_variants())
    rows = mod.read_variants()
    assert tuple(r["dir"] for r in rows) == dirs
    assert tuple(r["name"] for r in rows) == native_variants()
    for d in dirs:
        assert (ROOT / "native" / "src" / d / f"{d}_portable.c").is_file()


@pytest.mark.parametrize("s", NATIVE)
def test_native_suites_run_on_their_variants_kernels(s):
    kernels = native.variant_kernels(s.native_variant)
    assert "portable" in kernels and set(kernels) <= set(native.kernels())
    assert native.info()["selected"][s.native_variant] in kernels
    for k in kernels:
        c = s.cipher(bytes(s.key_size), s.default_tag_size, kernel=k)
        assert c.kernel == k
        assert c.decrypt(bytes(s.nonce_size), c.encrypt(bytes(s.nonce_size), b"x")) == b"x"


# ---- registry <-> cipher classes -------------------------------------------------------------


@pytest.mark.parametrize("s,tag", SPEC_TAGS)
def test_cipher_objects_have_the_records_sizes(s, tag):
    key = os.urandom(s.key_size)
    for c in (s.new_cipher(key, tag), make_cipher(s.suite, key, tag)):
        assert type(c) is s.cipher
        assert (c.key_size, c.nonce_size, c.tag_size) == (s.key_size, s.nonce_size, tag)
        nonce = os.urandom(s.nonce_size)
        sealed = c.encrypt(nonce, b"payload", b"ad")
        assert len(sealed) == len(b"payload") + tag
        with pytest.raises(InvalidTag):
            c.decrypt(nonce, sealed[:-1] + bytes([sealed[-1] ^ 1]), b"ad")
    if s.native_variant is not None:
        assert s.cipher._variant == s.native_variant
        with pytest.raises(ValueError, match="key must be"):
            s.new_cipher(bytes(s.key_size + 1), tag)


@pytest.mark.parametrize("s", SPECS)
def test_keyring_subkeys_have_the_records_key_size(s):
    from sealstore.keyring import _derive_subkey

    ring = _ring(s, s.default_tag_size)
    header = fmt.pack_header(s.suite, ring.primary.key_id, s.default_tag_size)
    assert len(_derive_subkey(ring.primary, header, s.suite)) == s.key_size


# ---- the layers read the registry's rules ----------------------------------------------------


@pytest.mark.parametrize("s", SPECS)
@pytest.mark.parametrize("preferred", [16, 32])
def test_new_values_and_objects_take_the_tag_size_the_record_gives(s, preferred):
    expected = preferred if preferred in s.tag_sizes else s.default_tag_size
    assert s.tag_size_for(preferred) == expected
    ring = _ring(s, preferred, adaptive_threshold=0)
    assert fmt.parse_header(ring.seal(b"v")).tag_size == expected
    obj = S.ObjectCipher.create(ring)
    assert obj.tag_size == S.parse_object_header(obj.header_bytes).tag_size == expected


@pytest.mark.parametrize("s", SPECS)
def test_short_values_use_the_records_small_suite(s):
    ring = _ring(s, s.default_tag_size)
    short, long = ring.seal(b"x"), ring.seal(bytes(ring.adaptive_threshold))
    assert fmt.parse_header(long).suite is s.suite
    assert fmt.parse_header(short).suite is (s.small_suite or s.suite)
    assert ring.open(short) == b"x"


@pytest.mark.parametrize("s", SPECS)
def test_a_key_opens_only_values_of_its_family(s):
    """Rewrite the suite byte of a value to every other suite: another family is refused as
    malformed before any decryption, the same family reaches the AEAD (and fails its tag)."""
    tag = 16  # a tag size every current suite allows
    ring = _ring(s, tag, adaptive_threshold=0)
    sealed = bytearray(ring.seal(bytes(200)))
    for other in SUITES:
        if other is s or tag not in other.tag_sizes:
            continue
        sealed[1] = other.id
        if other.family == s.family:
            with pytest.raises(InvalidTag):
                ring.open(bytes(sealed))
        else:
            with pytest.raises(MalformedCiphertext, match=f"names suite {other.label}"):
                ring.open(bytes(sealed))


def test_the_places_that_held_lists_are_built_from_the_registry():
    from sealstore import cli
    from sealstore.bench import aead as bench_aead
    from sealstore.bench import grids

    labels = [s.label for s in SUITES]
    native_labels = [s.label for s in SUITES if s.native_variant is not None]
    assert list(bench_aead.CLASSES) == native_labels
    assert [c for c in bench_aead.CLASSES.values()] == [by_label(v).cipher for v in native_labels]
    assert list(grids.ALGORITHM_ORDER[-len(native_labels) :]) == native_labels
    assert cli._SUITES == labels
    kat = importlib.util.spec_from_file_location("kat_probe", ROOT / "tools" / "kat_vectors.py")
    mod = importlib.util.module_from_spec(kat)
    kat.loader.exec_module(mod)
    assert tuple(mod.ALGS) == native_variants()
    assert {line.split()[0] for line in mod.lines()} == set(native_variants())


# ---- no second list ----------------------------------------------------------------------------

_SOURCE_DIRS = (*layout.PACKAGES, "tools")
_RULE_DIRS = tuple(layout.LIBRARY)  # where a suite-specific rule may not live
_LABELS = {s.label for s in SUITES}
_MEMBERS = {m.name for m in Suite}
_CLASSES = {s.cipher.__name__ for s in SUITES}


def _sources():
    for d in _SOURCE_DIRS:
        for path in sorted((ROOT / d).rglob("*.py")):
            if path != ROOT / layout.CORE / "suites.py":
                yield path, d


def _collections(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            yield node, node.elts
        elif isinstance(node, ast.Dict):
            yield node, [k for k in node.keys if k is not None] + node.values


def _list_problems(tree) -> list[str]:
    out = []
    for node, items in _collections(tree):
        labels = {i.value for i in items if isinstance(i, ast.Constant) and i.value in _LABELS}
        members = {i.attr for i in items if isinstance(i, ast.Attribute) and i.attr in _MEMBERS
                   and isinstance(i.value, ast.Name) and i.value.id == "Suite"}  # fmt: skip
        classes = {i.id for i in items if isinstance(i, ast.Name) and i.id in _CLASSES}
        if len(labels) >= 3 or len(members) >= 2 or len(classes) >= 2:
            out.append(f"line {node.lineno}: {sorted(labels | members | classes)}")
    return out


def _rule_problems(tree) -> list[str]:
    """A suite singled out by name in library code: a rule that belongs in its record."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "Suite" and node.attr == "AES_256_GCM":  # fmt: skip
            out.append(f"line {node.lineno}: Suite.AES_256_GCM")
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in _LABELS:
                    out.append(f"line {node.lineno}: compares with {side.value!r}")
    return out


def test_no_list_of_suites_variants_or_cipher_classes_outside_the_registry():
    problems = []
    for path, _ in _sources():
        for p in _list_problems(ast.parse(path.read_text())):
            problems.append(f"{path.relative_to(ROOT)} {p}")
    assert problems == []


def test_no_suite_specific_rule_outside_the_registry():
    problems = []
    for path, d in _sources():
        if d in _RULE_DIRS:
            for p in _rule_problems(ast.parse(path.read_text())):
                problems.append(f"{path.relative_to(ROOT)} {p}")
    assert problems == []


@pytest.mark.parametrize(
    "source,kind",
    [
        ('_LABELS = {Suite.AEGIS_128L: "AEGIS-128L", Suite.AES_256_GCM: "AES-256-GCM"}', "list"),
        ('VARIANTS = {"AEGIS-128L": 0, "AEGIS-128X2": 1, "AEGIS-128X4": 2}', "list"),
        ("cls = {1: AEGIS128L, 2: AEGIS128X2}", "list"),
        ("ok = suite in (Suite.AEGIS_128X2, Suite.AEGIS_128X4)", "list"),
        ("tag = 16 if suite is Suite.AES_256_GCM else ring.tag_size", "rule"),
        ('tag = 16 if str(primary.suite) == "AES-256-GCM" else ring.tag_size', "rule"),
    ],
)
def test_the_no_second_list_checks_catch_what_the_tree_used_to_hold(source, kind):
    tree = ast.parse(source)
    assert (_list_problems(tree) if kind == "list" else _rule_problems(tree)) != []


def test_the_no_second_list_checks_pass_registry_reads():
    tree = ast.parse("tag = suite.spec.tag_size_for(ring.tag_size)\n"
                     "CLASSES = {s.label: s.cipher for s in SUITES}\n"
                     'CONFIGS = {"AEGIS-128X4": 1, "AES-256-GCM": 2}\n')  # fmt: skip
    assert _list_problems(tree) == [] and _rule_problems(tree) == []
