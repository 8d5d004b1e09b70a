"""The package's types (issue 19): the PEP 561 marker and the extension modules' stubs ship with
the package, the stubs name exactly what the extension modules hold, the attributes the
library sets on its exceptions are declared, and the cipher methods have Python signatures."""

from __future__ import annotations

import ast
import fnmatch
import inspect
import io
import re
import sys
from pathlib import Path

import pytest

import sealstore
from sealstore import _native, _speedups, errors
from sealstore.stream.sources import _Input

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugin"


def _stub(name: str) -> ast.Module:
    return ast.parse((PLUGIN / f"{name}.pyi").read_text())


def _defs(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_marker_and_stubs_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["sealstore"]
    for name in ("py.typed", "_native.pyi", "_speedups.pyi"):
        assert (PLUGIN / name).is_file(), name
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name
    # and the installed package has them beside its modules
    installed = Path(sealstore.__file__).parent
    for name in ("py.typed", "_native.pyi", "_speedups.pyi"):
        assert (installed / name).is_file(), name


def test_speedups_stub_names_what_the_module_holds():
    tree = _stub("_speedups")
    assert _defs(tree.body) == _public(_speedups)
    for cls in ("Context", "NamedSealer", "NamedOpener"):
        declared = _defs(_class(tree, cls).body) - {"__init__", "__new__", "__call__"}
        assert declared == _public(getattr(_speedups, cls)), cls


def test_speedups_stub_takes_the_buffer_last_as_cryptography():
    context = _class(_stub("_speedups"), "Context")
    for name in ("encrypt_into", "decrypt_into"):
        fn = next(n for n in context.body if isinstance(n, ast.FunctionDef) and n.name == name)
        args = [a.arg for a in fn.args.args]
        assert args == ["self", "nonce", "data", "associated_data", "buf"], name


def test_native_stub_names_every_declaration_of_the_cdef():
    cdef = (ROOT / "native" / "sealstore_cdef.h").read_text()
    functions = set(re.findall(r"\b(sealstore_\w+)\(", cdef)) - {"sealstore_encrypt_fn"}
    constants = set(re.findall(r"#define (SEALSTORE_\w+)", cdef))
    lib = _class(_stub("_native"), "_Lib")
    assert _defs(lib.body) == functions | constants
    assert functions | constants <= set(dir(_native.lib))
    assert _defs(_stub("_native").body) >= {"ffi", "lib"}


def test_exception_attributes_are_declared():
    assert errors.InvalidTag().index is None
    assert errors.TruncatedObject().index is None
    assert errors.UndecodableValue("x").failed is None
    err = errors.RetryBudgetExhausted("x")
    assert (err.attempts, err.elapsed) == (None, None)
    e = errors.SealstoreError()
    assert (e.table, e.column, e.primary_key, e.sealstore_reason) == (None,) * 4


CIPHER_METHODS = [
    "encrypt",
    "decrypt",
    "encrypt_into",
    "decrypt_into",
    "seal_prefixed",
    "open_prefixed",
    "seal_prefixed_many",
    "open_prefixed_many",
    "seal_segments_into",
    "open_segments_into",
]


@pytest.mark.parametrize("cls", [sealstore.AEGIS128L, sealstore.AEGIS128X4, sealstore.AESGCM])
@pytest.mark.parametrize("method", CIPHER_METHODS)
def test_cipher_methods_have_typed_signatures(cls, method):
    sig = inspect.signature(getattr(cls, method))
    params = list(sig.parameters.values())
    assert params[0].name == "self"
    assert all(p.annotation is not inspect.Parameter.empty for p in params[1:]), sig
    assert sig.return_annotation is not inspect.Signature.empty, sig
    if method in ("encrypt", "decrypt"):
        assert [p.name for p in params] == ["self", "nonce", "data", "associated_data"]


def test_iterable_source_has_no_position():
    src = _Input(iter([b"abc"]))
    with pytest.raises(io.UnsupportedOperation):
        src.tell()
    with pytest.raises(io.UnsupportedOperation):
        src.seek(0)
