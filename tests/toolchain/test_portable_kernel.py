"""The bitsliced portable kernels (native/src/aes_portable.h, portable_blk.h, portable_core.h;
portable256_blk.h, portable256_core.h for the AEGIS-256 family).

* its building blocks against the definitions (``tests/native/portable_check.c``: the S-box
  circuit on every input, the bitsliced AESRound, a chain of AEGIS Updates and keystreams on
  the bitsliced state), with a control that a one-bit fault is caught;
* every form of its plane word: GNU C vectors with whole-block loads (little-endian hosts),
  with bytewise loads (what a big-endian host compiles), and the struct of four lanes
  (compilers without vector extensions); natively with gcc and clang and for aarch64 under
  qemu;
* the whole kernel built in the struct (AEGIS-128L, AEGIS-256) and bytewise (X2, X4) forms,
  through the C known-answer driver (draft vectors, and byte identity with every other kernel of this CPU on
  inputs of every length around the block and lane boundaries).

The default form runs in every other test (tests/toolchain/test_build.py, test_native.py, the vectors).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.toolchain]

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
CHECK = ROOT / "tests" / "native" / "portable_check.c"
KAT = ROOT / "tests" / "native" / "kat.c"
WARN = ["-Wall", "-Wextra", "-Werror"]
IN_CI = os.environ.get("CI", "").lower() == "true"
X86 = platform.machine().lower() in ("x86_64", "amd64")
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"
FORMS = {
    "vector": [],
    "bytewise": ["-DSEALSTORE_PORTABLE_BYTEWISE"],
    "scalar": ["-DSEALSTORE_PORTABLE_SCALAR"],
}

sys.path.insert(0, str(ROOT / "tools"))
import kat_vectors  # noqa: E402

sys.path.pop(0)


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if IN_CI:
            pytest.fail(f"{tool} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{tool} is not installed")
    return path


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build_check(cc: list[str], flags: list[str], out: Path) -> Path:
    inc = [f"-I{NATIVE / 'include'}", f"-I{NATIVE / 'src'}"]
    # the struct form takes the optimizer long: -O1 there
    level = "-O1" if "-DSEALSTORE_PORTABLE_SCALAR" in flags else "-O2"
    r = run([*cc, level, *WARN, *flags, *inc, str(CHECK), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize(
    "compiler,form",
    [("gcc", "vector"), ("gcc", "bytewise"), ("gcc", "scalar"), ("clang", "vector")],
)
def test_building_blocks_match_the_definitions(compiler, form, tmp_path):
    exe = build_check([need(compiler)], FORMS[form], tmp_path / "check")
    r = run([str(exe)], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failures" in r.stdout
    vector = "vector" if form != "scalar" else "scalar"
    loads = "memcpy" if form == "vector" else "bytewise"
    assert f"({vector}, {loads} loads)" in r.stdout


def test_the_check_catches_a_one_bit_fault(tmp_path):
    exe = build_check([need("gcc")], [], tmp_path / "check")
    r = run([str(exe), "broken"], timeout=120)
    assert r.returncode == 1
    assert "FAIL: S-box circuit" in r.stderr and " 0 failures" not in r.stdout


def test_building_blocks_under_qemu_aarch64(tmp_path):
    qemu = need("qemu-aarch64")
    exe = build_check([need("aarch64-linux-gnu-gcc")], [], tmp_path / "check-aarch64")
    r = run([qemu, "-L", AARCH64_SYSROOT, str(exe)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(vector, memcpy loads)" in r.stdout and " 0 failures" in r.stdout


def _kernel_sources() -> list[Path]:
    sys.path.insert(0, str(NATIVE))
    try:
        import build_ffi
    finally:
        sys.path.pop(0)
    return [ROOT / p for p in build_ffi.kernel_sources()]


def _compile(cc: str, jobs: list[tuple[Path, list[str], str]], out: Path) -> list[Path]:
    """Compile each (source, flags, optimization level), in parallel; the objects."""

    def one(job):
        src, flags, level = job
        obj = out / f"{src.parent.name}_{src.stem}.o"
        inc = f"-I{NATIVE / 'include'}"
        r = run([cc, "-c", level, *WARN, *flags, inc, str(src), "-o", str(obj)])
        return obj, (r.stderr if r.returncode else "")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, jobs))
    errors = [e for _, e in results if e]
    assert not errors, "\n".join(errors)
    return [obj for obj, _ in results]


def test_kernel_forms_pass_the_vectors_and_match_every_kernel(tmp_path):
    """One driver build: AEGIS-128L and AEGIS-256 in the struct form, the X2 and X4 variants
    with bytewise loads (the forms share all code but the plane word's operations and loads),
    the other kernels as usual (-O1: only their results matter here)."""
    cc = need("gcc")
    forms = {
        "aegis128l_portable.c": (FORMS["scalar"], "-O1"),  # the optimizer is slow on it
        "aegis128x2_portable.c": (FORMS["bytewise"], "-O2"),
        "aegis128x4_portable.c": (FORMS["bytewise"], "-O2"),
        "aegis256_portable.c": (FORMS["scalar"], "-O1"),
        "aegis256x2_portable.c": (FORMS["bytewise"], "-O2"),
        "aegis256x4_portable.c": (FORMS["bytewise"], "-O2"),
    }
    jobs = [(src, *forms.get(src.name, ([], "-O1"))) for src in _kernel_sources() + [KAT]]
    # the slowest first
    objects = _compile(
        cc, sorted(jobs, key=lambda j: j[0].name != "aegis128l_portable.c"), tmp_path
    )
    exe = tmp_path / "kat"
    r = run([cc, *(str(o) for o in objects), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("\n".join(kat_vectors.lines()) + "\n")
    r = run([str(exe), str(vectors)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failures" in r.stdout
    if X86:
        # the cross-kernel half compared these forms with the AES-NI kernels byte for byte
        assert "aesni" in r.stdout.rsplit("kernels:", 1)[1]
