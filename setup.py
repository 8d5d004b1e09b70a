"""Declares the native modules and the packages; everything else is in pyproject.toml."""

import os
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tools"))
from layout import NATIVE, ROOTS  # noqa: E402  (tools/layout.py: pyproject's package-dir)

sys.path.insert(0, os.path.join(HERE, NATIVE))
from build_speedups import extension  # noqa: E402


def packages():
    """Every directory under the mapped roots that holds an __init__.py, and every directory of
    the kernel sources (sealstore._csrc's data: setuptools wants a data directory inside a
    package named as a package of its own, or it warns)."""
    found = []
    for top, name in ROOTS.items():
        for dirpath, dirs, files in os.walk(os.path.join(HERE, top)):
            dirs[:] = [d for d in dirs if d.isidentifier() and d != "__pycache__"]
            if "__init__.py" in files or top == NATIVE:
                rel = os.path.relpath(dirpath, os.path.join(HERE, top))
                found.append(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return sorted(found)


setup(
    packages=packages(),
    cffi_modules=[f"{NATIVE}/build_ffi.py:ffibuilder"],
    # against the full API: the limited one (abi3) measured slower (native/build_speedups.py)
    ext_modules=[extension(limited=False)],
)
