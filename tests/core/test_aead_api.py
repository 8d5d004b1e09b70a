"""The cipher API contract: argument checking, buffer types, error classes and messages,
kernel selection, thread safety, repr hygiene.  One checklist, run for every cipher class
(AEGIS128L, AEGIS128X2, AEGIS128X4, AEGIS256, AEGIS256X2, AEGIS256X4, AESGCM); AEGIS- and AESGCM-specific checks after it.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import sealstore
import sealstore.native as native
from aead_cases import ALL_KERNELS, VARIANTS, cipher_class
from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM
from sealstore.errors import InvalidTag, KernelUnavailable, SealstoreError
from sealstore.suites import SUITES

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

AEGIS = [s.cipher for s in SUITES if s.native_variant is not None]
KEY = bytes(range(0x40, 0x50))
KEY32 = bytes(range(0x40, 0x60))  # AEGIS-256 keys


def key_of(cls) -> bytes:
    """A fixed test key of the size ``cls`` takes."""
    return KEY32 if getattr(cls, "key_size", 16) == 32 else KEY


class Spec:
    """What the checklist needs to know about one cipher class."""

    def __init__(self, cls, key_size, nonce_size, tag_size, key_names, nonce_names):
        self.cls, self.key_size = cls, key_size
        self.nonce_size, self.tag_size = nonce_size, tag_size
        self.key_names = key_names  # substrings, one of which the bad-key message must contain
        self.nonce_names = nonce_names

    def __repr__(self):
        return self.cls.__name__

    @property
    def key(self):
        return KEY if self.key_size == 16 else KEY32

    def make(self, key=None):
        return self.cls(self.key if key is None else key)

    @property
    def nonce(self):
        return bytes(range(self.nonce_size))


SPECS = [
    Spec(c, c.key_size, c.nonce_size, 16, (str(c.key_size),), (str(c.nonce_size),)) for c in AEGIS
] + [Spec(AESGCM, 16, 12, 16, ("16", "128"), ("12", "8"))]


@pytest.fixture(params=SPECS, ids=repr)
def spec(request):
    return request.param


def _msg(excinfo) -> str:
    return str(excinfo.value)


# --- the checklist -------------------------------------------------------------------------


def test_exports():
    for name in [c.__name__ for c in AEGIS] + ["AESGCM"]:
        assert name in sealstore.__all__
    assert issubclass(InvalidTag, SealstoreError) and issubclass(KernelUnavailable, SealstoreError)


def test_round_trip_returns_bytes(spec):
    c = spec.make()
    sealed = c.encrypt(spec.nonce, b"hello", b"ad")
    assert type(sealed) is bytes and len(sealed) == 5 + spec.tag_size
    plain = c.decrypt(spec.nonce, sealed, b"ad")
    assert type(plain) is bytes and plain == b"hello"


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 24, 31, 32, 33, 64])
def test_bad_key_size(spec, size):
    if size == spec.key_size:
        assert spec.make(os.urandom(size)).key_size == size
        return
    if spec.cls is AESGCM and size in (24, 32):  # AES-192/256 keys are valid for AES-GCM
        c = spec.cls(bytes(size))
        assert c.decrypt(bytes(12), c.encrypt(bytes(12), b"k", None), None) == b"k"
        return
    with pytest.raises(ValueError) as e:
        spec.cls(os.urandom(size))
    assert any(n in _msg(e) for n in spec.key_names), _msg(e)


def test_bad_nonce_size(spec):
    # AES-GCM takes 8..128-byte nonces, as cryptography does; AEGIS exactly its nonce size.
    sizes = [0, 1, 4, 7, 129] if spec.cls is AESGCM else [0, 1, 4, 15, 16, 17, 31, 32, 33]
    for size in sizes:
        if size == spec.nonce_size:
            continue
        _check_bad_nonce(spec, size)


def _check_bad_nonce(spec, size):
    c = spec.make()
    sealed = c.encrypt(spec.nonce, b"x", None)
    for call in (
        lambda: c.encrypt(bytes(size), b"x", None),
        lambda: c.decrypt(bytes(size), sealed, None),
        lambda: c.encrypt_into(bytes(size), b"x", None, bytearray(64)),
        lambda: c.decrypt_into(bytes(size), sealed, None, bytearray(64)),
    ):
        with pytest.raises(ValueError) as e:
            call()
        assert any(n in _msg(e) for n in spec.nonce_names), _msg(e)
        assert not isinstance(e.value, InvalidTag)


@pytest.mark.parametrize("bad", ["0123456789abcdef", 12345, None, [0] * 16, 1.5])
def test_non_buffer_arguments(spec, bad):
    c = spec.make()
    sealed = c.encrypt(spec.nonce, b"data", None)
    calls = [
        lambda: spec.cls(bad),
        lambda: c.encrypt(spec.nonce, bad, None),
        lambda: c.decrypt(spec.nonce, bad, None),
        lambda: c.encrypt_into(spec.nonce, bad, None, bytearray(64)),
        lambda: c.decrypt_into(spec.nonce, bad, None, bytearray(64)),
        lambda: c.encrypt_into(spec.nonce, b"data", None, bad),
        lambda: c.decrypt_into(spec.nonce, sealed, None, bad),
    ]
    if bad is not None:  # None is a valid AD
        calls += [
            lambda: c.encrypt(bad, b"data", None),
            lambda: c.encrypt(spec.nonce, b"data", bad),
            lambda: c.decrypt(spec.nonce, sealed, bad),
        ]
    for call in calls:
        with pytest.raises(TypeError):
            call()


def test_read_only_out_is_a_type_error(spec):
    c = spec.make()
    sealed = c.encrypt(spec.nonce, b"data", None)
    with pytest.raises(TypeError):
        c.encrypt_into(spec.nonce, b"data", None, bytes(64))
    with pytest.raises(TypeError):
        c.decrypt_into(spec.nonce, sealed, None, bytes(64))


def test_out_too_small(spec):
    c = spec.make()
    sealed = c.encrypt(spec.nonce, b"x" * 40, None)
    with pytest.raises(ValueError) as e:
        c.encrypt_into(spec.nonce, b"x" * 40, None, bytearray(40 + spec.tag_size - 1))
    assert str(40 + spec.tag_size) in _msg(e), _msg(e)
    with pytest.raises(ValueError) as e:
        c.decrypt_into(spec.nonce, sealed, None, bytearray(39))
    assert "40" in _msg(e), _msg(e)
    assert not isinstance(e.value, InvalidTag)


def test_out_larger_than_needed_is_written_only_at_the_front(spec):
    c = spec.make()
    out = bytearray(b"\x77" * 100)
    n = c.encrypt_into(spec.nonce, b"abc", b"ad", out)
    assert n == 3 + spec.tag_size
    assert bytes(out[:n]) == c.encrypt(spec.nonce, b"abc", b"ad")
    assert out[n:] == b"\x77" * (100 - n)
    back = bytearray(b"\x77" * 10)
    assert c.decrypt_into(spec.nonce, bytes(out[:n]), b"ad", back) == 3
    assert back == b"abc" + b"\x77" * 7


def test_none_ad_equals_empty_ad(spec):
    c = spec.make()
    a = c.encrypt(spec.nonce, b"payload", None)
    assert a == c.encrypt(spec.nonce, b"payload", b"")
    assert a == c.encrypt(spec.nonce, b"payload")
    assert c.decrypt(spec.nonce, a, b"") == c.decrypt(spec.nonce, a) == b"payload"
    out = bytearray(len(a))
    c.encrypt_into(spec.nonce, b"payload", None, out)
    assert out == a


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "numpy", "memoryview-slice"])
def test_buffer_types(spec, kind):
    def conv(b: bytes):
        if kind == "bytearray":
            return bytearray(b)
        if kind == "memoryview":
            return memoryview(b)
        if kind == "numpy":
            return np.frombuffer(b, dtype=np.uint8).copy()
        return memoryview(b"\x01" + b + b"\x02")[1:-1]

    c = spec.make()
    want = c.encrypt(spec.nonce, b"m" * 33, b"a" * 5)
    c2 = spec.cls(conv(spec.key))
    assert c2.encrypt(conv(spec.nonce), conv(b"m" * 33), conv(b"a" * 5)) == want
    assert c2.decrypt(conv(spec.nonce), conv(want), conv(b"a" * 5)) == b"m" * 33


def test_key_buffer_is_copied(spec):
    # The cipher must not keep a view of the caller's key buffer: callers wipe or reuse it.
    want = spec.make().encrypt(spec.nonce, b"m" * 50, None)
    for key in (bytearray(spec.key), np.frombuffer(spec.key, dtype=np.uint8).copy()):
        c = spec.cls(key)
        memoryview(key).cast("B")[:] = bytes(spec.key_size)
        assert c.encrypt(spec.nonce, b"m" * 50, None) == want
        del key
        assert c.decrypt(spec.nonce, want, None) == b"m" * 50


def test_non_contiguous_buffer_rejected_or_handled(spec):
    c = spec.make()
    backing = bytes(range(64))
    strided = memoryview(backing)[::2]
    try:
        got = c.encrypt(spec.nonce, strided, None)
    except (TypeError, ValueError, BufferError):
        return
    assert got == c.encrypt(spec.nonce, strided.tobytes(), None)


def test_input_shorter_than_tag_is_invalid_tag(spec):
    ciphers = [spec.make()]
    if spec.cls is not AESGCM:
        ciphers.append(spec.cls(spec.key, tag_size=32))
    for c in ciphers:
        tag_size = len(c.encrypt(spec.nonce, b"", None))
        for length in range(tag_size):
            for data in (bytes(length), os.urandom(length)):
                with pytest.raises(InvalidTag):
                    c.decrypt(spec.nonce, data, None)
                with pytest.raises(InvalidTag):
                    c.decrypt_into(spec.nonce, data, None, bytearray(64))


def test_invalid_tag_has_no_message(spec):
    c = spec.make()
    sealed = bytearray(c.encrypt(spec.nonce, b"secret plaintext", None))
    sealed[-1] ^= 1
    with pytest.raises(InvalidTag) as e:
        c.decrypt(spec.nonce, bytes(sealed), None)
    assert str(e.value) == ""


def test_decrypt_into_wipes_on_failure(spec):
    c = spec.make()
    msg = b"plaintext that must not escape" * 10
    sealed = bytearray(c.encrypt(spec.nonce, msg, b"ad"))
    sealed[-3] ^= 0x40
    out = bytearray(b"\xcc" * len(msg))
    with pytest.raises(InvalidTag):
        c.decrypt_into(spec.nonce, bytes(sealed), b"ad", out)
    assert out == bytes(len(msg))


def test_repr_and_errors_hold_no_key(spec):
    key = bytes.fromhex("d1e2f3a4b5c6d7e8f90a1b2c3d4e5f60" * 2)[: spec.key_size]
    c = spec.make(key)
    forms = [
        key.hex(),
        key.hex().upper(),
        repr(key),
        str(key)[2:-1],
        base64.b64encode(key).decode(),
        key.decode("latin-1"),
        key[:8].hex(),
        key[8:].hex(),
    ]
    texts = [repr(c), str(c)]
    for call in (
        lambda: c.encrypt(bytes(3), b"x", None),
        lambda: c.encrypt_into(spec.nonce, b"x", None, bytearray(1)),
        lambda: c.encrypt(spec.nonce, "text", None),
    ):
        with pytest.raises((ValueError, TypeError)) as e:
            call()
        texts.append(str(e.value))
    for text in texts:
        for f in forms:
            assert f not in text, (text, f)


def test_generate_key():
    for cls in AEGIS:
        keys = {cls.generate_key() for _ in range(64)}
        assert len(keys) == 64
        assert all(type(k) is bytes and len(k) == cls.key_size in (16, 32) for k in keys)
        # Crude randomness check: 64 keys x 128 (256) bits, about half the bits set.
        ones = sum(bin(int.from_bytes(k, "big")).count("1") for k in keys)
        bits = 64 * 8 * cls.key_size
        assert 0.45 * bits < ones < 0.55 * bits
        cls(cls.generate_key()).encrypt(bytes(cls.nonce_size), b"x", None)


# --- AEGIS specifics -----------------------------------------------------------------------


@pytest.mark.parametrize("cls", AEGIS, ids=lambda c: c.__name__)
def test_aegis_attributes(cls):
    assert cls.key_size == cls.nonce_size == (32 if "256" in cls.__name__ else 16)
    assert cls(key_of(cls)).tag_size == 16
    assert cls(key_of(cls), tag_size=32).tag_size == 32
    assert cls(key_of(cls), 32).tag_size == 32
    assert len(cls(key_of(cls), tag_size=32).encrypt(bytes(cls.nonce_size), b"", None)) == 32


@pytest.mark.parametrize("cls", AEGIS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("tag_size", [0, 1, 8, 12, 15, 17, 24, 31, 33, 64])
def test_aegis_bad_tag_size(cls, tag_size):
    with pytest.raises(ValueError) as e:
        cls(key_of(cls), tag_size=tag_size)
    assert "16" in _msg(e) and "32" in _msg(e), _msg(e)


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_kernel_is_the_selected_one(variant):
    c = cipher_class(variant)(key_of(cipher_class(variant)))
    assert c.kernel == native.info()["selected"][variant]
    assert c.kernel in native.variant_kernels(variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_argument(variant):
    cls = cipher_class(variant)
    for k in native.variant_kernels(variant):
        assert cls(key_of(cls), kernel=k).kernel == k
    assert cls(key_of(cls), kernel=None).kernel == native.info()["selected"][variant]
    for k in [k for k in ALL_KERNELS if k not in native.variant_kernels(variant)]:
        with pytest.raises(KernelUnavailable) as e:
            cls(key_of(cls), kernel=k)
        assert k in _msg(e), _msg(e)
    with pytest.raises((KernelUnavailable, ValueError)) as e:  # not a kernel name at all
        cls(key_of(cls), kernel="sse9")
    assert "sse9" in _msg(e), _msg(e)


def _run(code: str, kernel: str | None, extra_env: dict | None = None):
    env = {k: v for k, v in os.environ.items() if k != "SEALSTORE_KERNEL"}
    env.update(extra_env or {})
    if kernel is not None:
        env["SEALSTORE_KERNEL"] = kernel
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("bad", ["nosuchkernel", "AVX9", "portable,aesni"])
def test_bad_env_kernel_fails_at_import_with_a_clear_message(bad):
    r = _run("import sealstore", bad)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]  # the exception line the user reads
    assert "SEALSTORE_KERNEL" in last and bad.lower() in last.lower(), r.stderr
    assert "Segmentation" not in r.stderr and r.returncode > 0


@pytest.mark.parametrize(
    "forced,hidden", [("avx512", "avx512f"), ("avx2", "vaes"), ("aesni", "aesni")]
)
def test_env_kernel_the_cpu_cannot_run_fails_cleanly(forced, hidden):
    # _SEALSTORE_HIDE_CPU_FEATURES (test-only) plays a CPU without ``hidden``.
    r = _run("import sealstore", forced, {"_SEALSTORE_HIDE_CPU_FEATURES": hidden})
    assert r.returncode > 0, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "KernelUnavailable" in last and "SEALSTORE_KERNEL" in last and forced in last, last
    ok = _run("import sealstore", None, {"_SEALSTORE_HIDE_CPU_FEATURES": hidden})
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("forced", ALL_KERNELS)
def test_env_kernel_forces_selection(forced):
    if forced not in native.kernels():
        pytest.skip(f"this CPU cannot run the {forced} kernel")
    code = (
        "import json, sealstore, sealstore.native as n\n"
        "from sealstore import AEGIS128X4\n"
        "i = n.info()\n"
        "print(json.dumps({'selected': i['selected'], 'forced': i['forced'],"
        " 'x4': AEGIS128X4(bytes(16)).kernel}))\n"
    )
    r = _run(code, forced)
    assert r.returncode == 0, r.stderr
    import json

    got = json.loads(r.stdout)
    assert got["forced"] == forced
    for v in VARIANTS:
        if forced in native.variant_kernels(v):
            assert got["selected"][v] == forced, got
        else:
            assert got["selected"][v] in native.variant_kernels(v), got
    if forced == "portable":
        assert set(got["selected"].values()) == {"portable"}
    if forced in native.variant_kernels("AEGIS-128X4"):
        assert got["x4"] == forced


@pytest.mark.parametrize("variant", VARIANTS)
def test_thread_safety_one_cipher_many_threads(variant):
    c = cipher_class(variant)(key_of(cipher_class(variant)), tag_size=32)
    jobs = []
    for i in range(200):
        n = (i * 97) % 5000
        jobs.append(
            (
                i.to_bytes(c.nonce_size, "little"),
                bytes([i & 0xFF]) * n,
                bytes([i & 0x7F]) * (i % 40),
            )
        )
    expected = [c.encrypt(nonce, m, ad) for nonce, m, ad in jobs]
    start = threading.Barrier(8)
    errors: list = []

    def worker(t):
        try:
            start.wait()
            for _ in range(10):
                for j in range(t, len(jobs) + t):
                    nonce, m, ad = jobs[j % len(jobs)]
                    want = expected[j % len(jobs)]
                    if c.encrypt(nonce, m, ad) != want:
                        errors.append(("encrypt", t, j))
                    if c.decrypt(nonce, want, ad) != m:
                        errors.append(("decrypt", t, j))
                    out = bytearray(len(want))
                    c.encrypt_into(nonce, m, ad, out)
                    if out != want:
                        errors.append(("encrypt_into", t, j))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(("raised", t, repr(exc)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


# --- AESGCM specifics ----------------------------------------------------------------------


@pytest.mark.parametrize("key_size", [16, 24, 32])
def test_aesgcm_matches_cryptography(key_size):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM as Ref

    key = bytes(range(key_size))
    ours, theirs = AESGCM(key), Ref(key)
    for n in (0, 1, 16, 100, 4097):
        nonce, msg, ad = bytes([n & 0xFF]) * 12, os.urandom(n), b"x" * (n % 7)
        sealed = ours.encrypt(nonce, msg, ad)
        assert sealed == theirs.encrypt(nonce, msg, ad)
        assert ours.decrypt(nonce, sealed, ad) == msg
        for i in (0, len(sealed) - 1):
            bad = bytearray(sealed)
            bad[i] ^= 1
            with pytest.raises(InvalidTag):
                ours.decrypt(nonce, bytes(bad), ad)
        with pytest.raises(InvalidTag):
            ours.decrypt(nonce, sealed, ad + b"!")
