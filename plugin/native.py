"""The one module that talks to the native library (``sealstore._native``, built with cffi).

It reads ``SEALSTORE_KERNEL`` once at import, reports what the CPU offers and which kernel each
variant runs on, and creates keyed contexts.  The cipher classes call into it; no other module
of the library uses ``ffi`` or ``lib`` (the benchmark does, to time the bare kernel calls).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import _native, _speedups
from .errors import InternalError, KernelUnavailable

if TYPE_CHECKING:
    from _cffi_backend import FFI
    from cryptography.utils import Buffer

    from ._native import _Lib
    from typing_extensions import TypeAlias

    #: a cffi ``sealstore_ctx *`` (its struct fields are not typed)
    CData: TypeAlias = Any

ffi: FFI = _native.ffi
lib: _Lib = _native.lib

__all__ = ["KERNELS", "VARIANTS", "info", "kernels", "variant_kernels", "variant_sizes"]


def _c_str(p: CData) -> str:
    name = ffi.string(p)
    return name.decode("ascii") if isinstance(name, bytes) else name


#: Kernel names, from the least to the most preferred.
KERNELS = ("portable", "aesni", "avx2", "avx512", "armcrypto")
#: Variant names and their native ids, as the C library reports them (the suite registry,
#: ``sealstore.suites``, names each suite's variant; tests/core/test_suites.py checks they agree).
VARIANTS = {_c_str(lib.sealstore_variant_name(v)): v for v in range(lib.SEALSTORE_NVARIANTS)}


def variant_sizes(variant: str) -> tuple[int, int]:
    """(key bytes, nonce bytes) of a variant, from the library's variant table
    (native/include/sealstore_variants.h); InternalError for a variant the library lacks."""
    v = VARIANTS.get(variant)
    if v is None:
        raise InternalError(f"the native library has no variant {variant!r}")
    return lib.sealstore_key_size(v), lib.sealstore_nonce_size(v)


_FEATURES = (
    "aesni",
    "pclmul",
    "avx",
    "avx2",
    "vaes",
    "avx512f",
    "os_ymm",
    "os_zmm",
    "arm_aes",
)


def _kernel_id(name: str) -> int:
    try:
        return KERNELS.index(name)
    except ValueError:
        raise KernelUnavailable(
            f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}"
        ) from None


def features() -> list[str]:
    """CPU features seen (x86: cpuid, and xgetbv for the register state the OS saves;
    aarch64: ``arm_aes`` from HWCAP_AES or macOS's FEAT_AES)."""
    bits = lib.sealstore_cpu_features()
    return [name for i, name in enumerate(_FEATURES) if bits & (1 << i)]


def kernels() -> list[str]:
    """The kernels this build and CPU can run."""
    return [k for i, k in enumerate(KERNELS) if lib.sealstore_kernel_supported(i)]


def variant_kernels(variant: str) -> list[str]:
    """The kernels ``variant`` (e.g. ``"AEGIS-128X4"``) has that this CPU can run."""
    v = VARIANTS[variant]
    return [k for i, k in enumerate(KERNELS) if lib.sealstore_variant_has_kernel(v, i)]


def selected_kernel(variant: str) -> str:
    """The kernel a new cipher of ``variant`` gets when none is named."""
    return KERNELS[lib.sealstore_selected_kernel(VARIANTS[variant])]


def force_kernel(name: str | None) -> None:
    """Make ``name`` the kernel of every variant that has it (``None`` restores the best).
    Cipher objects created before keep the kernel they were given."""
    global _forced
    if name is None:
        lib.sealstore_force_kernel(-1)
        _forced = None
        return
    kid = _kernel_id(name)
    if lib.sealstore_force_kernel(kid) != 0:
        raise KernelUnavailable(
            f"kernel {name!r} cannot run on this CPU/build; runnable: {', '.join(kernels())}"
        )
    _forced = name


def info() -> dict[str, Any]:
    """CPU features seen, the kernels runnable, and the kernel chosen per variant."""
    import platform

    return {
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "features": features(),
        "kernels": kernels(),
        "forced": _forced,
        "selected": {v: selected_kernel(v) for v in VARIANTS},
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def new_ctx(variant: str, key: Buffer, tag_size: int, kernel: str | None) -> CData:
    """A keyed native context (freed and wiped when garbage-collected)."""
    v = VARIANTS[variant]
    if kernel is None:
        kid = -1
    else:
        kid = _kernel_id(kernel)
        if not lib.sealstore_variant_has_kernel(v, kid):
            raise KernelUnavailable(
                f"{variant} has no {kernel!r} kernel this CPU can run; "
                f"available: {', '.join(variant_kernels(variant))}"
            )
    k, _ = _span(key, "key", lib.sealstore_key_size(v))
    if tag_size not in (16, 32):
        raise ValueError(f"tag_size must be 16 or 32 bytes, got {tag_size!r}")
    ctx = lib.sealstore_ctx_new(v, kid, k, tag_size)
    if ctx == ffi.NULL:
        raise MemoryError("sealstore: could not allocate a cipher context")
    return ffi.gc(ctx, lib.sealstore_ctx_free)


def ctx_kernel(ctx: CData) -> str:
    return KERNELS[ctx.kernel]


def hide_features(names: Iterable[str]) -> None:
    """Tests only: behave as if the CPU lacked ``names`` (e.g. ``["vaes"]``); an empty list
    restores what cpuid reported.  Contexts created before keep their kernel."""
    keep = ~0
    for name in names:
        try:
            keep &= ~(1 << _FEATURES.index(name))
        except ValueError:
            raise ValueError(f"unknown CPU feature {name!r}; expected one of {_FEATURES}") from None
    lib.sealstore_cpu_mask(keep & 0xFFFFFFFF)


_forced: str | None = None


def _from_environment() -> None:
    # _SEALSTORE_HIDE_CPU_FEATURES (comma-separated) lets tests play a CPU without some features.
    hidden = os.environ.get("_SEALSTORE_HIDE_CPU_FEATURES", "").strip()
    if hidden:
        hide_features([f.strip() for f in hidden.split(",") if f.strip()])
    env = os.environ.get("SEALSTORE_KERNEL", "").strip().lower()
    if env:
        try:
            force_kernel(env)
        except KernelUnavailable as e:
            raise KernelUnavailable(f"SEALSTORE_KERNEL={env}: {e}") from None


_from_environment()


# A context crosses to sealstore._speedups as a capsule of this name (speedups.h), made here
# when the context is created: the extension never takes a number for an address.
CTX_CAPSULE = b"sealstore._native.ctx"
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_CTX_TYPE = ffi.typeof("sealstore_ctx *")


def new_fast_ctx(
    variant: str, key: Buffer, tag_size: int, kernel: str | None
) -> tuple[CData, _speedups.Context]:
    """:func:`new_ctx` and its ``sealstore._speedups.Context`` (which keeps the context alive):
    the capsule they are joined with never leaves this module."""
    ctx = new_ctx(variant, key, tag_size, kernel)
    return ctx, _speedups.Context(_ctx_capsule(ctx), ctx)


def _is_ctx(ctx: object) -> bool:
    return isinstance(ctx, ffi.CData) and ffi.typeof(ctx) is _CTX_TYPE and ctx != ffi.NULL


def _ctx_capsule(ctx: CData) -> Any:
    if not _is_ctx(ctx):
        raise TypeError("expected a native context made by sealstore.native.new_ctx")
    return _capsule_new(int(ffi.cast("uintptr_t", ctx)), CTX_CAPSULE, None)


def _span(
    obj: Buffer, what: str, size: int | None = None, writable: bool = False
) -> tuple[CData, int]:
    """(cdata, nbytes) of a contiguous buffer, checking its size when ``size`` is given."""
    try:
        n = memoryview(obj).nbytes
        ptr = ffi.from_buffer(obj, require_writable=writable)  # type: ignore[call-overload]
    except TypeError:
        kind = "a writable" if writable else "a"
        raise TypeError(
            f"{what} must be {kind} contiguous bytes-like object, not {type(obj).__name__}"
        ) from None
    if size is not None and n != size:
        raise ValueError(f"{what} must be {size} bytes, got {n}")
    return ptr, n


def cffi_encrypt(
    ctx: CData, nonce: Buffer, data: Buffer, associated_data: Buffer | None = None
) -> bytes:
    """Encrypt through cffi alone (no ``_speedups``): the reference path the benchmark
    compares the CPython entry point against.  Every size is checked before C runs.

    (An ``encrypt_into`` twin, never called, was removed: issue 17/20.)"""
    if not _is_ctx(ctx):
        raise TypeError("ctx must be a native context made by sealstore.native.new_ctx")
    npub, _ = _span(nonce, "nonce", ctx.npublen)
    m, n = _span(data, "data")
    ad, adlen = _span(b"" if associated_data is None else associated_data, "associated_data")
    out = bytearray(n + ctx.maclen)
    if lib.sealstore_encrypt(ctx, ffi.from_buffer(out), m, n, ad, adlen, npub) != 0:
        raise InternalError("sealstore: native encryption failed")
    return bytes(out)
