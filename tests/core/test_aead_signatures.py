"""Introspection: every public method of every cipher class has a signature
(``inspect.signature``), the C entry points included, and it is the one the class documents.
"""

from __future__ import annotations

import inspect
import types

import pytest

from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM, _speedups

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

KEY = bytes(16)
CLASSES = [AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM]


def public_methods(obj) -> list[str]:
    return sorted(n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n)))


def params(fn) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_public_method_has_the_documented_signature(cls):
    obj = cls(KEY)
    names = public_methods(obj)
    assert {"encrypt", "decrypt", "encrypt_into", "decrypt_into", "seal_prefixed"} <= set(names)
    for name in names:
        bound = getattr(obj, name)
        documented = getattr(cls, name)
        want = params(documented)
        if not isinstance(inspect.getattr_static(cls, name), classmethod):
            want = want[1:]  # self
        assert params(bound) == want, f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", [AEGIS128L, AEGIS128X2, AEGIS128X4], ids=lambda c: c.__name__)
def test_aegis_methods_are_the_c_entry_points_with_text_signatures(cls):
    obj = cls(KEY)
    c_backed = [
        n for n in public_methods(obj) if isinstance(getattr(obj, n), types.BuiltinMethodType)
    ]
    assert len(c_backed) == 10, c_backed  # every per-call entry point is the C method itself
    for name in c_backed:
        assert getattr(obj, name).__text_signature__, name


def test_the_cipher_classes_agree_on_every_shared_method():
    shared = set.intersection(*(set(public_methods(c)) for c in CLASSES)) - {"generate_key"}
    assert len(shared) >= 10
    for name in sorted(shared):
        want = params(getattr(AEGIS128X4(KEY), name))
        for cls in CLASSES:
            assert params(getattr(cls(KEY), name)) == want, f"{cls.__name__}.{name}"


def test_every_c_callable_of_the_fast_path_has_a_text_signature():
    for name in ("check_disjoint", "map_columns"):
        assert getattr(_speedups, name).__text_signature__, name
        inspect.signature(getattr(_speedups, name))
    for type_name in ("Context", "NamedSealer", "NamedOpener"):
        cls = getattr(_speedups, type_name)
        assert cls.__text_signature__, type_name
        inspect.signature(cls)
        for name, member in vars(cls).items():
            if isinstance(member, types.MethodDescriptorType):
                assert member.__text_signature__, f"{type_name}.{name}"
                inspect.signature(member)


def test_into_signatures_are_cryptographys():
    sig = inspect.signature(AEGIS128X4(KEY).encrypt_into)
    assert str(sig) == "(nonce, data, associated_data, buf)"
    assert str(inspect.signature(AEGIS128X4(KEY).encrypt)) == "(nonce, data, associated_data=None)"
