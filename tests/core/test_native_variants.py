"""One home per native variant: native/include/sealstore_variants.h, and no second list.

The X-macro table is the only place a variant's facts are written: the C ids, externs,
dispatch, name and size tables expand it, native/build_ffi.py and tools/inline_guard.py parse
it, and the Python classes read their sizes from the library.  These tests check that what is
derived agrees with the table and the tree, and fail on a second hand-kept list (Python: a
collection literal naming two variants; C: two variants' ids, kernel symbols or names in one
file outside their own kernel directory).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from sealstore import aead, native

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "native" / "include" / "sealstore_variants.h"
SRC = ROOT / "native" / "src"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[name]
    return mod


build_ffi = _load("build_ffi_table_probe", ROOT / "native" / "build_ffi.py")
ROWS = build_ffi.read_variants()
CLASSES = {c._variant: c for c in vars(aead).values() if getattr(c, "_variant", "")}


# ---- what is derived agrees with the table ----------------------------------------------------


def test_the_library_offers_the_table_rows_in_order():
    assert native.lib.SEALSTORE_NVARIANTS == len(ROWS)
    assert list(native.VARIANTS) == [r["name"] for r in ROWS]
    assert list(native.VARIANTS.values()) == list(range(len(ROWS)))
    for v, r in enumerate(ROWS):
        assert native.lib.sealstore_key_size(v) == r["keybytes"]
        assert native.lib.sealstore_nonce_size(v) == r["npubbytes"]
    for bad in (-1, len(ROWS), 1 << 30):
        assert native.lib.sealstore_key_size(bad) == 0
        assert native.lib.sealstore_nonce_size(bad) == 0


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_each_cipher_class_takes_its_sizes_from_the_library(row):
    cls = CLASSES[row["name"]]
    assert (cls.key_size, cls.nonce_size) == (row["keybytes"], row["npubbytes"])
    assert len(cls.generate_key()) == row["keybytes"]
    with pytest.raises(ValueError, match="key must be"):
        cls(bytes(row["keybytes"] + 1))


def test_a_class_for_a_variant_the_library_lacks_fails_at_definition():
    from sealstore.errors import InternalError

    with pytest.raises(InternalError, match="no variant 'AEGIS-999'"):
        type("AEGIS999", (aead._AEGIS,), {"_variant": "AEGIS-999"})


def test_every_kernel_file_is_a_table_column_and_every_column_a_file():
    """The sources build_ffi.py compiles on x86-64 and aarch64 are exactly the kernel files."""
    listed = set()
    for arch in ("x86_64", "aarch64", None):
        for r in ROWS:
            for k in build_ffi.variant_kernels(r, arch):
                listed.add(f"{r['dir']}/{r['dir']}_{k}.c")
    tree = {str(p.relative_to(SRC)) for p in SRC.glob("aegis*/*.c")}
    assert listed == tree
    assert {r["dir"] for r in ROWS} == {p.name for p in SRC.glob("aegis*") if p.is_dir()}


def test_the_table_reader_rejects_a_malformed_row(tmp_path):
    bad = tmp_path / "v.h"
    bad.write_text('SEALSTORE_VARIANT(AEGIS1, aegis1, "AEGIS-1", 128, 16, 16, 1, 1)\n')
    with pytest.raises(ValueError, match="columns"):
        build_ffi.read_variants(bad)
    bad.write_text("/* nothing */\n")
    with pytest.raises(ValueError, match="no SEALSTORE_VARIANT rows"):
        build_ffi.read_variants(bad)


def test_the_table_is_well_formed():
    for field in ("id_name", "dir", "name"):
        values = [r[field] for r in ROWS]
        assert len(set(values)) == len(values), field
    for r in ROWS:
        assert r["id_name"] == r["name"].replace("-", "")
        assert r["dir"] == r["id_name"].lower()
        assert r["family"] in (128, 256) and r["lanes"] in (1, 2, 4, 8, 16)
        assert r["keybytes"] == r["npubbytes"] == r["family"] // 8
        assert all(r[k] in (0, 1) for k in build_ffi.VARIANT_FIELDS[7:])


# ---- no second list ---------------------------------------------------------------------------

_TOKENS = {}
for _r in ROWS:
    for _t in (_r["dir"], _r["id_name"], _r["name"], f"SEALSTORE_{_r['id_name']}"):
        _TOKENS[_t.lower()] = _r["dir"]


def _python_lists(tree) -> list[str]:
    """Collection literals (or a dict's keys) holding two variants' names, dirs or ids."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        named = {
            _TOKENS[i.value.lower()]
            for i in items
            if isinstance(i, ast.Constant) and isinstance(i.value, str)
            and i.value.lower() in _TOKENS
        }  # fmt: skip
        if len(named) >= 2:
            out.append(f"line {node.lineno}: {sorted(named)}")
    return out


# C: an id, a kernel or batch symbol, or a name literal of a variant
_C_REF = re.compile(
    r"\bSEALSTORE_(AEGIS\w+)\b|\bsealstore_(aegis\w+?)_(?:portable|aesni|avx2|avx512|armcrypto"
    r"|encrypt4_\w+|decrypt4_\w+)\b|\"(AEGIS-[0-9A-Z]+)\""
)
_C_HEADER_GUARD = re.compile(r"^#(?:ifndef|define) SEALSTORE_AEGIS\w+_H\b", re.M)


def _c_refs(text: str) -> set[str]:
    text = _C_HEADER_GUARD.sub("", text)
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)  # comments may name relatives
    refs = set()
    for m in _C_REF.finditer(text):
        token = next(g for g in m.groups() if g)
        if token.lower() in _TOKENS:
            refs.add(_TOKENS[token.lower()])
    return refs


def _python_files():
    for d in ("native", "tools", "bench"):
        yield from sorted((ROOT / d).rglob("*.py"))


def _c_files():
    for d in ("native", "bench", "tests/native"):
        for ext in ("*.c", "*.h"):
            for p in sorted((ROOT / d).rglob(ext)):
                if p != TABLE:
                    yield p


@pytest.mark.parametrize("path", list(_python_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_python_file_keeps_a_second_list_of_variants(path):
    assert _python_lists(ast.parse(path.read_text())) == [], (
        f"{path.relative_to(ROOT)} lists variants: derive it from native/include/"
        "sealstore_variants.h (build_ffi.read_variants) or from sealstore.native.VARIANTS"
    )


@pytest.mark.parametrize("path", list(_c_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_c_file_names_two_variants(path):
    refs = _c_refs(path.read_text())
    assert len(refs) <= 1, (
        f"{path.relative_to(ROOT)} names {sorted(refs)}: expand native/include/"
        "sealstore_variants.h (an X-macro) instead of listing variants"
    )


@pytest.mark.parametrize(
    "source",
    [
        'VARIANTS = ("aegis128l", "aegis128x2")\n',
        'X86 = {"aegis256": ("aesni",), "aegis256x4": ("avx2",)}\n',
        'NAMES = ["AEGIS-128L", "AEGIS-256X4"]\n',
    ],
)
def test_the_python_check_catches_the_lists_the_tree_used_to_hold(source):
    assert _python_lists(ast.parse(source)) != []


def test_the_python_check_passes_kernel_entries_and_single_names():
    src = 'KNOWN = {"aegis128l_aesni": 1, "aegis256x4_avx2": 2}\nv = ("AEGIS-256", 32)\n'
    assert _python_lists(ast.parse(src)) == []


@pytest.mark.parametrize(
    "source",
    [
        "#define SEALSTORE_AEGIS128L 0\n#define SEALSTORE_AEGIS128X2 1\n",
        "extern const sealstore_aead_impl sealstore_aegis256_portable;\n"
        "extern const sealstore_aead_impl sealstore_aegis256x2_portable;\n",
        'static const char *const n[] = {"AEGIS-128L", "AEGIS-256"};\n',
    ],
)
def test_the_c_check_catches_the_lists_the_tree_used_to_hold(source):
    assert len(_c_refs(source)) >= 2


def test_the_c_check_passes_comments_and_one_variants_own_kernel():
    src = (
        "/* as AEGIS-256X2 and AEGIS-128X4 do */\n#ifndef SEALSTORE_AEGIS128L_BATCH_H\n"
        "#define SEALSTORE_AEGIS128L_BATCH_H\n#define AEGIS_IMPL sealstore_aegis256x4_avx2\n"
    )
    assert _c_refs(src) == {"aegis256x4"}
