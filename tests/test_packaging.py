"""The sdist carries everything the native build needs (builder, cdef, headers, every kernel), and
the installed package carries the kernel sources the bench's C harness compiles."""

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

ROOT = Path(__file__).resolve().parents[1]


def test_sdist_ships_the_native_build(tmp_path):
    proc = subprocess.run(  # `build` and the build backend come with the test extra
        [
            sys.executable,
            "-m",
            "build",
            "--sdist",
            "--no-isolation",
            "-o",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (
        f"sdist build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    (sdist,) = tmp_path.glob("sealstore-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = {
        "setup.py",
        "pyproject.toml",
        "native/build_ffi.py",
        "native/sealstore_cdef.h",
        "native/python/module.c",
        "native/include/sealstore.h",
        "plugin/__init__.py",
    }
    expected |= {str(p.relative_to(ROOT)) for p in (ROOT / "native" / "src").rglob("*.[ch]")}
    missing = expected - names
    assert not missing, f"sdist lacks {sorted(missing)}"


def test_installed_package_ships_the_kernel_sources():
    from importlib.resources import files

    shipped = Path(str(files("sealstore._csrc")))
    expected = {p.relative_to(ROOT / "native") for p in (ROOT / "native" / "src").rglob("*.[ch]")}
    expected |= {Path("include/sealstore.h")}
    missing = {p for p in expected if not (shipped / p).is_file()}
    assert not missing, f"the installed sealstore lacks {sorted(map(str, missing))}"
