"""cffi builder for ``sealstore._native`` (out-of-line API mode, compiled by the package build).

Every kernel file turns on its own instruction set with a target pragma, so no -m flag is
passed here; x86 machines build the x86 kernels, aarch64 ones the ARMv8 Crypto Extension
kernels, anything else the portable kernels alone.
"""

import os
import platform
import re
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _rel(*parts):
    # setuptools wants sources relative to the project root
    return os.path.relpath(os.path.join(HERE, *parts), ROOT)


#: the one table of variants (an X-macro header the C code includes; read here as text)
VARIANTS_H = os.path.join(HERE, "include", "sealstore_variants.h")
#: its columns, in order (the header's comment says what each means)
VARIANT_FIELDS = (
    "id_name",
    "dir",
    "name",
    "family",
    "keybytes",
    "npubbytes",
    "lanes",
    "aesni",
    "avx2",
    "avx512",
    "armcrypto",
    "batch_avx512",
)
#: the kernels of each architecture, as the table's columns name them
X86_KERNELS = ("aesni", "avx2", "avx512", "batch_avx512")
ARM64_KERNELS = ("armcrypto",)
_ROW = re.compile(r"^SEALSTORE_VARIANT\((.*)\)\s*$", re.M)


def read_variants(path=VARIANTS_H):
    """The table's rows, in id order: one dict per variant (ints where the column is a number,
    ``name`` without its quotes).  ValueError on a malformed row."""
    with open(path) as f:
        text = f.read()
    rows = []
    for m in _ROW.finditer(text):
        cells = [c.strip() for c in m.group(1).split(",")]
        if len(cells) != len(VARIANT_FIELDS):
            raise ValueError(f"{path}: {m.group(0)!r}: {len(cells)} columns, not "
                             f"{len(VARIANT_FIELDS)}")  # fmt: skip
        row = dict(zip(VARIANT_FIELDS, cells))
        if not (row["name"].startswith('"') and row["name"].endswith('"')):
            raise ValueError(f"{path}: {m.group(0)!r}: the name is not a string literal")
        row["name"] = row["name"][1:-1]
        for field in VARIANT_FIELDS[3:]:
            row[field] = int(row[field])
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no SEALSTORE_VARIANT rows")
    return rows


def variant_kernels(row, arch):
    """The kernel files (``portable``, then the table's 1 columns) of one variant on ``arch``
    (``"x86_64"``, ``"aarch64"`` or anything else: portable alone)."""
    native = X86_KERNELS if arch == "x86_64" else ARM64_KERNELS if arch == "aarch64" else ()
    return ("portable",) + tuple(k for k in native if row[k])


#: the variants' source directories, in id order
VARIANTS = tuple(row["dir"] for row in read_variants())


def is_x86():
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def is_arm64():
    return platform.machine().lower() in ("aarch64", "arm64")


def kernel_sources():
    sources = [_rel("src", "util.c"), _rel("src", "dispatch.c"), _rel("src", "calls.c")]
    arch = "x86_64" if is_x86() else "aarch64" if is_arm64() else None
    for row in read_variants():
        for kernel in variant_kernels(row, arch):
            sources.append(_rel("src", row["dir"], f"{row['dir']}_{kernel}.c"))
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
