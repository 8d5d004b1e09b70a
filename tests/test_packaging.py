"""The sdist carries everything the native build needs (builder, cdef, headers, every kernel)."""

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_sdist_ships_the_native_build(tmp_path):
    pytest.importorskip("build")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    (sdist,) = tmp_path.glob("sealstore-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {
        "setup.py", "pyproject.toml", "native/build_ffi.py", "native/sealstore_cdef.h",
        "native/speedups.c", "native/include/sealstore.h", "plugin/__init__.py",
    }
    expected |= {str(p.relative_to(ROOT)) for p in (ROOT / "native" / "src").rglob("*.[ch]")}
    missing = expected - names
    assert not missing, f"sdist lacks {sorted(missing)}"
