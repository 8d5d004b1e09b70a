"""``sealstore.errors`` names every exception class it defines, each one a SealstoreError,
and library code raises no bare RuntimeError (impossible states are InternalError)."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import sealstore.errors as errors

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)

ROOT = Path(__file__).resolve().parents[2]


def test_all_lists_every_class_and_only_them():
    defined = {
        n for n, v in vars(errors).items() if inspect.isclass(v) and v.__module__ == errors.__name__
    }
    assert set(errors.__all__) == defined
    assert len(errors.__all__) == len(set(errors.__all__))


def test_every_class_is_a_sealstore_error():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.SealstoreError), name


def test_library_code_raises_no_bare_runtime_error():
    found = []
    for folder in layout.LIBRARY:  # the library (the bench is a program)
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\braise RuntimeError\b", line):
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    for path in (ROOT / layout.NATIVE).glob("*.c"):
        if "PyExc_RuntimeError" in path.read_text():
            found.append(str(path.relative_to(ROOT)))
    assert found == []
