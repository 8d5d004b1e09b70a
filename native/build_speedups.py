"""The extension ``sealstore._speedups`` (the CPython fast path, ``native/python/*.c``): its
sources and the two ways they build.

* against the full API of the building interpreter (``_speedups.cpython-3XY-*.so``): what
  setup.py builds, on every Python;
* against the limited API (``Py_LIMITED_API`` = LIMITED_API, ``_speedups.abi3.so``): one
  module that every CPython >= 3.12 imports.  Not the package's build: measured, the column
  path (``named_sealer``/``named_opener``) costs 13-24% more per 64-byte value on it, past issue
  19's 5% (docs/BENCH.md, "The limited API"); ``sealstore.bench.limited_api`` measures it again,
  tests/toolchain/test_limited_api.py keeps it building and running.
"""

import os

from build_ffi import compile_args
from setuptools import Extension

#: The oldest CPython whose limited API has everything the module uses: vectorcall
#: (PyObject_Vectorcall, vectorcallfunc, Py_TPFLAGS_HAVE_VECTORCALL) is there from 3.12, the
#: buffer protocol from 3.11, METH_FASTCALL from 3.10.
LIMITED_API = (3, 12)

SOURCES = [
    "native/python/module.c",
    "native/python/nonces.c",
    "native/python/buffers.c",
    "native/python/context.c",
    "native/python/prefixed.c",
    "native/python/segments.c",
    "native/python/bound.c",
    "native/python/rowmap.c",
    "native/src/util.c",
    "native/src/calls.c",
]


def extension(limited: bool = False, root: str = "") -> Extension:
    """The extension, built against the limited API or the full one.  Paths are relative to
    the project root (setuptools wants them so), or under ``root`` when given."""
    macros = [("Py_LIMITED_API", "0x%02X%02X0000" % LIMITED_API)] if limited else []
    return Extension(
        "sealstore._speedups",
        sources=[os.path.join(root, s) for s in SOURCES],
        include_dirs=[os.path.join(root, "native/include")],
        extra_compile_args=compile_args(),
        define_macros=macros,
        py_limited_api=limited,
    )
