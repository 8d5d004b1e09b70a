"""The bitsliced portable kernel (native/src/aes_portable.h, portable_blk.h, portable_core.h).

* its building blocks against the definitions (``tests/native/portable_check.c``: the S-box
  circuit on every input, the bitsliced AESRound, a chain of AEGIS Updates and keystreams on
  the bitsliced state), with a control that a one-bit fault is caught;
* every form of its plane word: GNU C vectors with whole-block loads (little-endian hosts),
  with bytewise loads (what a big-endian host compiles), and the struct of four lanes
  (compilers without vector extensions); natively with gcc and clang and for aarch64 under
  qemu;
* the whole kernel built in the bytewise and struct forms, through the C known-answer driver
  (draft vectors, and byte identity with every other kernel of this CPU on inputs of every
  length around the block and lane boundaries).

The default form runs in every other test (tests/test_build.py, test_native.py, the vectors).
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

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.fixture(scope="module")
def kat_objects(tmp_path_factory) -> tuple[str, dict[Path, Path]]:
    """Every kernel source but the portable ones, and the driver, compiled once."""
    cc = need("gcc")
    out = tmp_path_factory.mktemp("portable-forms")
    sources = [s for s in _kernel_sources() if not s.name.endswith("_portable.c")] + [KAT]
    return cc, _compile(cc, sources, out, [])


def _compile(cc: str, sources: list[Path], out: Path, flags: list[str]) -> dict[Path, Path]:
    def one(src: Path):
        obj = out / f"{src.parent.name}_{src.stem}.o"
        level = "-O1" if "-DSEALSTORE_PORTABLE_SCALAR" in flags else "-O2"
        cmd = [cc, "-c", level, *WARN, *flags, f"-I{NATIVE / 'include'}", str(src), "-o", str(obj)]
        r = run(cmd)
        return obj, (r.stderr if r.returncode else "")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = dict(zip(sources, pool.map(one, sources)))
    errors = [e for _, e in results.values() if e]
    assert not errors, "\n".join(errors)
    return {src: obj for src, (obj, _) in results.items()}


@pytest.mark.parametrize(
    "form,variants",
    [
        ("bytewise", ("aegis128l", "aegis128x2", "aegis128x4")),
        # the struct form takes the optimizer long per file: AEGIS-128L here, the other
        # degrees share its code and the building blocks are checked above in this form
        ("scalar", ("aegis128l",)),
    ],
)
def test_kernel_form_passes_the_vectors_and_matches_every_kernel(
    kat_objects, form, variants, tmp_path
):
    cc, objects = kat_objects
    portable = [s for s in _kernel_sources() if s.name.endswith("_portable.c")]
    own = [s for s in portable if s.parent.name in variants]
    # the degrees not rebuilt in this form come from the default form
    objs = {**objects, **_compile(cc, [s for s in portable if s not in own], tmp_path, [])}
    objs.update(_compile(cc, own, tmp_path, FORMS[form]))
    exe = tmp_path / "kat"
    r = run([cc, *(str(o) for o in objs.values()), "-o", str(exe)])
    assert r.returncode == 0, r.stderr
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("\n".join(kat_vectors.lines()) + "\n")
    r = run([str(exe), str(vectors)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failures" in r.stdout
    if X86:
        # the cross-kernel half compared this form with the AES-NI kernels byte for byte
        assert "aesni" in r.stdout.rsplit("kernels:", 1)[1]
