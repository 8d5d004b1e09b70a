"""The Python/C boundary (issue 17): how a context reaches sealstore._speedups, the sizes the
cffi helpers check, overlapping buffers in every into-call, and the GIL declaration."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import sysconfig

import pytest

import sealstore.native as native
from sealstore import _speedups
from sealstore.aead import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM
from sealstore.errors import OverlappingBuffers, SealstoreError
from sealstore.suites import SUITES

KEY = bytes(range(16))
CIPHERS = [s.cipher for s in SUITES]


# ---- contexts cross as capsules ----


@pytest.mark.parametrize("address", [0, 1, 4096, id(object())])
def test_context_refuses_an_integer_address(address):
    with pytest.raises(TypeError, match="capsule"):
        _speedups.Context(address, None)


def test_context_refuses_another_modules_capsule():
    with pytest.raises(TypeError, match="capsule"):
        _speedups.Context(datetime.datetime_CAPI, None)


def test_context_is_initialized_once():
    """Re-initializing would change the context (and its tag size) under a running call."""
    a = AEGIS128L(KEY)
    ctx32 = native.new_ctx("AEGIS-128L", KEY, 32, None)
    with pytest.raises(TypeError, match="once"):
        a._fast.__init__(native._ctx_capsule(ctx32), ctx32)
    nonce = bytes(16)
    assert len(a.encrypt(nonce, b"x")) == 1 + 16  # still the 16-byte-tag context


def test_uninitialized_context_is_refused():
    with pytest.raises(ValueError, match="uninitialized"):
        _speedups.Context.__new__(_speedups.Context).encrypt(bytes(16), b"x")


def test_capsules_are_made_only_for_native_contexts():
    for bad in (1, native.ffi.NULL, native.ffi.new("char[]", 64), object()):
        with pytest.raises(TypeError, match="native context"):
            native._ctx_capsule(bad)
    ctx = native.new_ctx("AEGIS-128X2", KEY, 16, None)
    with pytest.raises(TypeError, match="owner"):
        _speedups.Context(native._ctx_capsule(ctx), None)
    fast = _speedups.Context(native._ctx_capsule(ctx), ctx)
    assert fast.decrypt(bytes(16), AEGIS128X2(KEY).encrypt(bytes(16), b"same")) == b"same"
    ctx2, fast2 = native.new_fast_ctx("AEGIS-128X2", KEY, 16, None)
    assert isinstance(fast2, _speedups.Context) and fast2.encrypt(bytes(16), b"same") == (
        AEGIS128X2(KEY).encrypt(bytes(16), b"same")
    )


# ---- the cffi helpers check their sizes ----


@pytest.mark.parametrize("n", [0, 15, 17, 64])
def test_cffi_encrypt_checks_the_nonce_length(n):
    ctx = AEGIS128X4(KEY)._ctx
    with pytest.raises(ValueError, match="nonce must be 16 bytes"):
        native.cffi_encrypt(ctx, bytes(n), b"data")


def test_cffi_encrypt_checks_types_and_counts_bytes_not_items():
    c = AEGIS128X4(KEY)
    nonce = bytes(16)
    with pytest.raises(TypeError, match="data"):
        native.cffi_encrypt(c._ctx, nonce, "text")
    with pytest.raises(TypeError, match="native context"):
        native.cffi_encrypt(1, nonce, b"data")
    wide = memoryview(bytes(range(64))).cast("I")  # 16 items, 64 bytes
    assert native.cffi_encrypt(c._ctx, nonce, wide, b"ad") == c.encrypt(nonce, bytes(wide), b"ad")


def test_new_ctx_checks_key_and_tag_sizes():
    for key in (bytes(15), bytes(17), bytes(32)):
        with pytest.raises(ValueError, match="key must be 16 bytes"):
            native.new_ctx("AEGIS-128L", key, 16, None)
    for tag in (0, 8, 24, 64):
        with pytest.raises(ValueError, match="tag_size"):
            native.new_ctx("AEGIS-128L", KEY, tag, None)


def test_the_uncalled_cffi_encrypt_into_is_gone():
    """It wrote ``len(data) + tag`` bytes into ``out`` without checking its size."""
    assert not hasattr(native, "cffi_encrypt_into")


# ---- overlapping buffers ----


def _make(cls):
    size = getattr(cls, "key_size", 16)  # AESGCM: an instance attribute (16, 24 or 32)
    return cls(bytes(range(size)) if size != 16 else KEY)


@pytest.fixture(params=CIPHERS, ids=lambda c: c.__name__)
def cipher(request):
    return _make(request.param)


def _nonce(c):
    return bytes(range(c.nonce_size))


@pytest.mark.parametrize("shift", [1, 7, -1, -9])
def test_encrypt_into_refuses_partial_overlap(cipher, shift):
    n, t = 100, cipher.tag_size
    buf = bytearray(os.urandom(n + t + 20))
    start = 10
    data = memoryview(buf)[start : start + n]
    out = memoryview(buf)[start + shift : start + shift + n + t]
    before = bytes(buf)
    with pytest.raises(OverlappingBuffers, match="buf overlaps data") as e:
        cipher.encrypt_into(_nonce(cipher), data, None, out)
    assert bytes(buf) == before  # nothing written
    assert isinstance(e.value, ValueError) and isinstance(e.value, SealstoreError)
    assert before.hex()[:16] not in str(e.value)


@pytest.mark.parametrize("shift", [1, 16, -1])
def test_decrypt_into_refuses_partial_overlap(cipher, shift):
    nonce, plain = _nonce(cipher), os.urandom(100)
    sealed = cipher.encrypt(nonce, plain, b"ad")
    buf = bytearray(len(sealed) + 40)
    buf[20 : 20 + len(sealed)] = sealed
    data = memoryview(buf)[20 : 20 + len(sealed)]
    out = memoryview(buf)[20 + shift : 20 + shift + len(plain)]
    before = bytes(buf)
    with pytest.raises(OverlappingBuffers):
        cipher.decrypt_into(nonce, data, b"ad", out)
    assert bytes(buf) == before


def test_exact_in_place_is_supported(cipher):
    nonce, plain = _nonce(cipher), os.urandom(1000)
    expected = cipher.encrypt(nonce, plain, b"ad")
    buf = bytearray(plain) + bytearray(cipher.tag_size)
    assert cipher.encrypt_into(nonce, memoryview(buf)[: len(plain)], b"ad", buf) == len(buf)
    assert bytes(buf) == expected
    assert cipher.decrypt_into(nonce, bytes(buf), b"ad", buf) == len(plain)
    mv = memoryview(buf)
    assert cipher.decrypt_into(nonce, bytearray(expected), b"ad", mv) == len(plain)
    buf[:] = expected
    assert cipher.decrypt_into(nonce, mv, b"ad", mv[: len(plain)]) == len(plain)
    assert bytes(buf[: len(plain)]) == plain


def test_out_may_not_overlap_nonce_or_ad(cipher):
    nonce = _nonce(cipher)
    buf = bytearray(200)
    buf[: len(nonce)] = nonce
    with pytest.raises(OverlappingBuffers, match="nonce"):
        cipher.encrypt_into(memoryview(buf)[: len(nonce)], b"data", None, memoryview(buf))
    with pytest.raises(OverlappingBuffers, match="associated_data"):
        cipher.encrypt_into(nonce, b"data", memoryview(buf)[10:30], memoryview(buf)[:40])
    # disjoint slices of one buffer are fine
    n = cipher.encrypt_into(nonce, b"data", memoryview(buf)[100:120], memoryview(buf)[:40])
    assert bytes(buf[:n]) == cipher.encrypt(nonce, b"data", bytes(buf[100:120]))


def _segment_prefix(c):
    return bytes(c.nonce_size - 5)


def test_segment_calls_refuse_any_overlap(cipher):
    prefix, data = _segment_prefix(cipher), os.urandom(3 * 64 + 5)
    out = bytearray(len(data) + 4 * cipher.tag_size)
    n = cipher.seal_segments_into(out, data, 64, prefix, 0, True, b"ad")
    sealed = bytes(out[:n])
    for same_start in (True, False):
        buf = bytearray(len(sealed) + 64)
        off = 0 if same_start else 3
        buf[off : off + len(data)] = data
        with pytest.raises(OverlappingBuffers, match="out must not overlap data"):
            cipher.seal_segments_into(
                memoryview(buf), memoryview(buf)[off : off + len(data)], 64, prefix, 0, True, b"ad"
            )
        buf[off : off + len(sealed)] = sealed
        with pytest.raises(OverlappingBuffers, match="out must not overlap data"):
            cipher.open_segments_into(
                memoryview(buf),
                memoryview(buf)[off : off + len(sealed)],
                64,
                prefix,
                0,
                True,
                b"ad",
            )
    buf = bytearray(len(sealed) + 100)
    with pytest.raises(OverlappingBuffers, match="associated_data"):
        cipher.seal_segments_into(
            memoryview(buf)[:n], data, 64, prefix, 0, True, memoryview(buf)[n - 10 : n + 10]
        )
    with pytest.raises(OverlappingBuffers, match="nonce_prefix"):
        cipher.open_segments_into(
            memoryview(buf), sealed, 64, memoryview(buf)[: len(prefix)], 0, True, b"ad"
        )
    back = bytearray(len(data))
    assert cipher.open_segments_into(back, sealed, 64, prefix, 0, True, b"ad") == len(data)
    assert back == data


def test_check_disjoint_direct():
    buf = bytearray(100)
    mv = memoryview(buf)
    _speedups.check_disjoint(mv[:10], 10, False, mv[10:20], None, mv[90:], b"elsewhere")
    _speedups.check_disjoint(mv[:10], 10, True, mv[:10])
    _speedups.check_disjoint(mv[:50], 0, False, mv[:50])  # nothing written
    _speedups.check_disjoint(mv[:50], 10, False, mv[10:20])  # only the first 10 are written
    with pytest.raises(OverlappingBuffers):
        _speedups.check_disjoint(mv[:10], 10, False, mv[:10])
    with pytest.raises(OverlappingBuffers, match="nonce_prefix"):
        _speedups.check_disjoint(mv[:20], 20, True, b"x", None, None, mv[19:21])
    with pytest.raises(TypeError):
        _speedups.check_disjoint(mv, 1, False)


# ---- free-threaded CPython ----


@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="not a free-threaded (3.13t+) build"
)
def test_importing_the_extension_keeps_the_gil_on_a_free_threaded_build():
    code = "import sys, sealstore._speedups; print(sys._is_gil_enabled())"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON_GIL": ""},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_module_declares_it_needs_the_gil():
    """The slot is compiled in only where the C API has it (3.13+); the source must say so."""
    src = native.__file__.rsplit("/", 2)[0] + "/native/python/module.c"
    if not os.path.exists(src):
        pytest.skip("installed without the sources")
    text = open(src).read()
    assert "{Py_mod_gil, Py_MOD_GIL_USED}" in text and "PyModuleDef_Init" in text
