"""Constant time: no branch, conditional move or memory address of any kernel depends on the key
or the plaintext (the ctgrind technique, driver ``tests/native/ct.c``).

Two checkers, each with controls proving it sees what it must:

* valgrind memcheck on the machine code as built (-O3), key and plaintext marked undefined with
  ``VALGRIND_MAKE_MEM_UNDEFINED``: the portable and AES-NI kernels (valgrind runs neither VAES
  nor AVX-512 code, and hides those CPU features);
* MemorySanitizer (clang, -O3), secrets poisoned with ``__msan_poison``, run natively: every
  kernel this CPU runs, including AVX2, AVX-512 and the four-value AEGIS-128L batch kernel.

Only the one-bit accept/reject result of the (constant-time) tag comparison is declassified, by
wrapping ``sealstore_verify`` at link time; the comparison itself runs on secret data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sealstore import native

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
CT = ROOT / "tests" / "native" / "ct.c"
IN_CI = os.environ.get("CI", "").lower() == "true"
VALGRIND_KERNELS = ("portable", "aesni")
VARIANTS = tuple(native.VARIANTS)  # the C library's variants (ct.c runs every one)

pytestmark = [
    pytest.mark.toolchain,  # valgrind runs: pytest -m 'not toolchain' skips them
    pytest.mark.skipif(
        sys.platform != "linux" or os.uname().machine != "x86_64",
        reason="the constant-time checks run on x86-64 Linux",
    ),
]


def kernel_sources() -> list[Path]:
    sys.path.insert(0, str(NATIVE))
    try:
        import build_ffi
    finally:
        sys.path.pop(0)
    return [ROOT / p for p in build_ffi.kernel_sources()]


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if IN_CI:
            pytest.fail(f"{tool} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{tool} is not installed")
    return path


def build(cc: str, flags: list[str], out: Path) -> Path:
    """Compile ct.c and the kernel sources (in parallel) and link with the verify wrapper."""
    out.mkdir(parents=True, exist_ok=True)
    inc = f"-I{NATIVE / 'include'}"

    def one(src: Path):
        obj = out / f"{src.parent.name}_{src.stem}.o"
        r = subprocess.run(
            [cc, "-c", "-O3", "-g", *flags, inc, str(src), "-o", str(obj)],
            capture_output=True,
            text=True,
        )
        return obj, (r.stderr if r.returncode else "")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, [CT, *kernel_sources()]))
    errors = [e for _, e in results if e]
    assert not errors, "\n".join(errors)
    exe = out / "ct"
    r = subprocess.run(
        [cc, *flags, *(str(o) for o, _ in results), "-Wl,--wrap=sealstore_verify", "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return exe


# ---- valgrind memcheck ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def ct_valgrind(tmp_path_factory) -> Path:
    need("valgrind")
    if not Path("/usr/include/valgrind/memcheck.h").exists():
        if IN_CI:
            pytest.fail("valgrind/memcheck.h is missing in CI")
        pytest.skip("valgrind/memcheck.h is not installed")
    return build(need("gcc"), [], tmp_path_factory.mktemp("ct-valgrind"))


def memcheck(exe: Path, args: list[str], tmp_path: Path):
    """Run under memcheck; returns (completed process, [(kind, [function, ...]), ...])."""
    xml = tmp_path / "memcheck.xml"
    r = subprocess.run(
        [
            "valgrind",
            "--tool=memcheck",
            "--xml=yes",
            f"--xml-file={xml}",
            "--expensive-definedness-checks=yes",
            str(exe),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = []
    for err in ET.parse(xml).getroot().iter("error"):
        fns = [f.findtext("fn") or "?" for f in err.findall("./stack/frame")]
        errors.append((err.findtext("kind"), fns))
    return r, errors


def test_memcheck_finds_no_secret_dependence(ct_valgrind, tmp_path):
    r, errors = memcheck(ct_valgrind, ["run", *VALGRIND_KERNELS], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not errors, "\n".join(f"{kind} in {' <- '.join(fns[:5])}" for kind, fns in errors)
    for kernel in VALGRIND_KERNELS:
        for variant in VARIANTS:
            assert f"checked {variant} {kernel}" in r.stdout


@pytest.mark.parametrize(
    "control,kind,function",
    [
        ("leak-branch", "UninitCondition", "leaky_compare"),
        ("leak-index", "UninitValue", "leaky_lookup"),
    ],
)
def test_memcheck_control_is_reported(ct_valgrind, tmp_path, control, kind, function):
    """A deliberately leaky function (early-exit compare, secret-indexed table) is caught."""
    _, errors = memcheck(ct_valgrind, [control], tmp_path)
    assert any(k == kind and fns and fns[0].startswith(function) for k, fns in errors), errors


@pytest.mark.parametrize("kernel", VALGRIND_KERNELS)
def test_memcheck_tracks_secrets_to_the_tag(ct_valgrind, tmp_path, kernel):
    """Without declassifying the tag check, the branch on it is reported: the secrets reached
    the computed tag through the whole kernel (a silent run above is meaningful)."""
    _, errors = memcheck(ct_valgrind, ["taint", kernel], tmp_path)
    assert any(k == "UninitCondition" and "aegis_decrypt_detached" in fns for k, fns in errors), (
        errors
    )


# ---- MemorySanitizer -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ct_msan(tmp_path_factory) -> Path:
    clang = need("clang")
    probe = subprocess.run(
        [clang, "-print-file-name=libclang_rt.msan-x86_64.a"], capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(probe):
        if IN_CI:
            pytest.fail("clang's MemorySanitizer runtime is missing in CI")
        pytest.skip("clang has no MemorySanitizer runtime")
    return build(clang, ["-fsanitize=memory", "-DCT_MSAN"], tmp_path_factory.mktemp("ct-msan"))


def test_msan_finds_no_secret_dependence_on_any_kernel(ct_msan):
    kernels = subprocess.run([str(ct_msan), "kernels"], capture_output=True, text=True)
    r = subprocess.run([str(ct_msan), "run"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "MemorySanitizer" not in r.stderr, r.stdout + r.stderr
    for kernel in kernels.stdout.split():
        assert f" {kernel}\n" in r.stdout, f"kernel {kernel} was not checked"
    for variant in VARIANTS:  # every variant, on each of its kernels
        for kernel in native.variant_kernels(variant):
            assert f"checked {variant} {kernel}\n" in r.stdout, f"{variant} {kernel}"
    if "avx512" in kernels.stdout.split():
        assert "checked AEGIS-128L aesni batch of four, tag 16" in r.stdout


@pytest.mark.parametrize(
    "control,function", [("leak-branch", "leaky_compare"), ("leak-index", "leaky_lookup")]
)
def test_msan_control_is_reported(ct_msan, control, function):
    r = subprocess.run([str(ct_msan), control], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "use-of-uninitialized-value" in r.stderr and f"in {function}" in r.stderr, r.stderr
