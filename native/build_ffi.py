"""cffi builder for ``sealstore._native`` (out-of-line API mode, compiled by the package build).

Every kernel file turns on its own instruction set with a target pragma, so no -m flag is
passed here; x86 machines build the x86 kernels, aarch64 ones the ARMv8 Crypto Extension
kernels, anything else the portable kernels alone.
"""

import os
import platform
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _rel(*parts):
    # setuptools wants sources relative to the project root
    return os.path.relpath(os.path.join(HERE, *parts), ROOT)


VARIANTS = ("aegis128l", "aegis128x2", "aegis128x4", "aegis256", "aegis256x2", "aegis256x4")
X86_KERNELS = {
    "aegis128l": ("aesni", "avx2", "batch_avx512"),
    "aegis128x2": ("aesni", "avx2"),
    "aegis128x4": ("aesni", "avx2", "avx512"),
    "aegis256": ("aesni", "avx2"),
    "aegis256x2": ("aesni", "avx2"),
    "aegis256x4": ("aesni", "avx2", "avx512"),
}
ARM64_KERNELS = {variant: ("armcrypto",) for variant in VARIANTS}


def is_x86():
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def is_arm64():
    return platform.machine().lower() in ("aarch64", "arm64")


def kernel_sources():
    sources = [_rel("src", "util.c"), _rel("src", "dispatch.c"), _rel("src", "calls.c")]
    for variant in VARIANTS:
        native = X86_KERNELS if is_x86() else ARM64_KERNELS if is_arm64() else {}
        kernels = ("portable",) + native.get(variant, ())
        for kernel in kernels:
            sources.append(_rel("src", variant, f"{variant}_{kernel}.c"))
    return sources


def compile_args():
    if sys.platform == "win32":
        return ["/O2"]
    return ["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"]


ffibuilder = FFI()
with open(os.path.join(HERE, "sealstore_cdef.h")) as f:
    ffibuilder.cdef(f.read())
ffibuilder.set_source(
    "sealstore._native",
    '#include "sealstore.h"\n',
    sources=kernel_sources(),
    include_dirs=[_rel("include")],
    extra_compile_args=compile_args(),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
