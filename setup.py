"""Declares the native modules; everything else is in pyproject.toml."""

import os
import sys

from setuptools import Extension, setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "native"))
from build_ffi import compile_args  # noqa: E402

setup(
    cffi_modules=["native/build_ffi.py:ffibuilder"],
    ext_modules=[
        Extension(
            "sealstore._speedups",
            sources=["native/speedups.c", "native/src/util.c", "native/src/calls.c"],
            include_dirs=["native/include"],
            extra_compile_args=compile_args(),
        )
    ],
)
