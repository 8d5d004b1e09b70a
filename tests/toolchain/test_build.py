"""The native sources build warning-free, and the kernels pass the draft vectors straight from C.

* every C source compiles with ``-Wall -Wextra -Werror`` under gcc and clang (x86-64);
* the C driver ``tests/native/kat.c`` (vectors, every kernel against the portable one, the
  context calls) passes when built with either compiler;
* aarch64 builds the portable and the ARMv8 Crypto Extension (armcrypto) kernels, other non-x86
  targets the portable ones alone; the aarch64 sources cross-compile warning-free (gcc and
  clang), and ``tools/cross_aarch64.sh`` runs the driver built from them under ``qemu-aarch64``:
  vectors, Wycheproof, armcrypto against portable on every length 0..4096 and large ones, and
  a CPU without the Crypto Extension (HWCAP_AES cleared) falling back to portable.

Compilers or cross tools that are missing skip their tests locally; under CI (``CI=true``,
where ``.ci/run`` installs them) a missing tool is a failure, so nothing is skipped silently.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import pytest

from sealstore import native

pytestmark = [
    pytest.mark.toolchain
]  # compilers, builds, whole runs: pytest -m 'not toolchain' skips them

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
INCLUDE = NATIVE / "include"
KAT = ROOT / "tests" / "native" / "kat.c"
WARN = ["-Wall", "-Wextra", "-Werror"]
IN_CI = os.environ.get("CI", "").lower() == "true"
X86 = platform.machine().lower() in ("x86_64", "amd64")
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"

sys.path.insert(0, str(ROOT / "tools"))
import kat_vectors  # noqa: E402

sys.path.pop(0)


def _builder():
    spec = importlib.util.spec_from_file_location("_sealstore_build_ffi", NATIVE / "build_ffi.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BUILD_FFI = _builder()


SPEEDUPS = sorted((NATIVE / "python").glob("*.c"))  # the CPython entry points


def builder_sources(machine: str | None = None) -> list[Path]:
    """The C sources the cffi builder compiles, as on ``machine`` (default: this one)."""
    if machine is None:
        rel = BUILD_FFI.kernel_sources()
    else:
        with mock.patch.object(BUILD_FFI.platform, "machine", return_value=machine):
            rel = BUILD_FFI.kernel_sources()
    return [ROOT / p for p in rel]


def need_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{name} is not installed")
    return path


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def compile_all(cc: list[str], sources, outdir: Path | None = None, extra=()):
    """Compile each source to an object (in ``outdir``, or discarded).

    Returns ``(errors, objects)``: the error reports of the sources that failed, and the
    objects of those that compiled."""

    def one(src: Path):
        out = os.devnull if outdir is None else str(outdir / (src.stem + ".o"))
        cmd = cc + ["-c", "-O3", *WARN, f"-I{INCLUDE}", *extra, str(src), "-o", out]
        r = run(cmd)
        if r.returncode:
            return f"{src.relative_to(ROOT)}:\n{r.stderr}", None
        return None, out

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, sources))
    return [e for e, _ in results if e], [o for _, o in results if o]


_BUILDS: dict[str, tuple[list[str], list[str]]] = {}


def build_objects(key: str, cc: list[str], sources, tmp_path_factory):
    """Compile ``sources`` once per session and toolchain ``key``; (errors, objects)."""
    if key not in _BUILDS:
        outdir = tmp_path_factory.mktemp(f"obj-{key}")
        _BUILDS[key] = compile_all(cc, sources, outdir)
    return _BUILDS[key]


@pytest.fixture(scope="session")
def vectors_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kat") / "vectors.txt"
    path.write_text("\n".join(kat_vectors.lines() + kat_vectors.wycheproof_lines()) + "\n")
    return path


#: the cases of each Wycheproof file (tests/core/test_aead_vectors.py checks the files hold them)
WYCHEPROOF_CASES = {"AEGIS-128L": 479, "AEGIS-256": 472}


def test_wycheproof_lines_are_every_case_of_the_file():
    lines = kat_vectors.wycheproof_lines()
    cols = [line.split() for line in lines]
    # every file of a variant the registry has, whole (AEGIS-256 once its suite is there)
    want = {alg: n for alg, n in WYCHEPROOF_CASES.items() if alg in kat_vectors.ALGS}
    assert "AEGIS-128L" in want
    assert {alg: sum(c[0] == alg for c in cols) for alg in want} == want
    assert len(cols) == sum(want.values())
    assert all(len(c) == 9 and c[1] == "16" for c in cols)
    assert {c[2] for c in cols} == {"0", "1"}  # valid cases and must-fail ones
    # the C drivers read at most 4095 hex characters per field
    assert max(len(f) for c in cols for f in c[3:]) < 4096


def test_wycheproof_lines_check_each_variants_sizes(monkeypatch):
    """The AEGIS-256 file (32-byte keys and nonces) passes with AEGIS-256's sizes, and is
    refused with the AEGIS-128 family's (whatever the registry holds today)."""
    from types import SimpleNamespace

    sizes = {"AEGIS-256": SimpleNamespace(key_size=32, nonce_size=32)}
    real = kat_vectors.by_native_variant
    monkeypatch.setattr(kat_vectors, "ALGS", (*kat_vectors.ALGS, "AEGIS-256"))
    monkeypatch.setattr(kat_vectors, "by_native_variant", lambda v: sizes.get(v) or real(v))
    cols = [line.split() for line in kat_vectors.wycheproof_lines()]
    ours = [c for c in cols if c[0] == "AEGIS-256"]
    assert len(ours) == WYCHEPROOF_CASES["AEGIS-256"]
    assert all(len(c[3]) == 64 and len(c[4]) == 64 for c in ours)  # hex of 32-byte key, nonce
    sizes["AEGIS-256"] = SimpleNamespace(key_size=16, nonce_size=16)
    with pytest.raises(ValueError, match="aegis256_test.json"):
        kat_vectors.wycheproof_lines()


@pytest.mark.parametrize(
    "group,result",
    [({"keySize": 128, "ivSize": 96, "tagSize": 128}, "valid"),
     ({"keySize": 128, "ivSize": 128, "tagSize": 128}, "acceptable")],
)  # fmt: skip
def test_wycheproof_lines_refuse_what_the_drivers_cannot_check(tmp_path, group, result):
    import json

    case = {"tcId": 1, "key": "00", "iv": "00", "aad": "", "msg": "", "ct": "", "tag": "00"}
    doc = {"testGroups": [dict(group, tests=[dict(case, result=result)])]}
    (tmp_path / "aegis128L_test.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError):
        kat_vectors.wycheproof_lines(str(tmp_path))


def _kernel_files(machine: str) -> list[str]:
    return sorted(p.name for p in builder_sources(machine) if p.parent.name.startswith("aegis"))


PORTABLE_FILES = [f"{v}_portable.c" for v in BUILD_FFI.VARIANTS]
ARMCRYPTO_FILES = [f"{v}_armcrypto.c" for v in BUILD_FFI.VARIANTS]


def test_builder_variants_are_the_c_librarys():
    """build_ffi.VARIANTS names one source directory per variant of the C library, in its
    order (sealstore_variant_name)."""
    dirs = sorted(p.name for p in (NATIVE / "src").iterdir() if p.is_dir())
    assert sorted(BUILD_FFI.VARIANTS) == dirs
    names = [n.lower().replace("-", "") for n in native.VARIANTS]
    assert list(BUILD_FFI.VARIANTS) == names


def test_builder_uses_every_kernel_source_on_x86_or_aarch64():
    on_x86 = {p.relative_to(ROOT) for p in builder_sources("x86_64")}
    on_arm = {p.relative_to(ROOT) for p in builder_sources("aarch64")}
    in_tree = {p.relative_to(ROOT) for p in (NATIVE / "src").rglob("*.c")}
    assert on_x86 | on_arm == in_tree
    assert not any("armcrypto" in p.name for p in on_x86)


def test_aarch64_builds_the_portable_and_armcrypto_kernels():
    assert _kernel_files("aarch64") == sorted(ARMCRYPTO_FILES + PORTABLE_FILES)
    assert _kernel_files("arm64") == _kernel_files("aarch64")  # macOS's name for it


def test_other_machines_build_only_the_portable_kernels():
    assert _kernel_files("riscv64") == PORTABLE_FILES


@pytest.mark.skipif(not X86, reason="the x86 kernels are checked on an x86-64 host")
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_sources_compile_warning_free(compiler, tmp_path_factory):
    cc = need_tool(compiler)
    errors, _ = build_objects(compiler, [cc], builder_sources() + [KAT], tmp_path_factory)
    # the aarch64 kernel files must compile to nothing here (their code is guarded)
    arm_only = sorted(set(builder_sources("aarch64")) - set(builder_sources("x86_64")))
    errors = errors + compile_all([cc], arm_only)[0]
    # the CPython entry points, against this interpreter's headers
    inc = sysconfig.get_paths()["include"]
    errors = errors + compile_all([cc], SPEEDUPS, extra=[f"-I{inc}"])[0]
    assert not errors, "\n".join(errors)


@pytest.mark.skipif(not X86, reason="checked on an x86-64 host")
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_test_drivers_compile_warning_free(compiler):
    """The other C programs of tests/native (constant time, wipe, libFuzzer target)."""
    cc = need_tool(compiler)
    drivers = [ROOT / "tests" / "native" / n for n in ("wipe.c", "fuzz_open.c")]
    if Path("/usr/include/valgrind/memcheck.h").exists():
        drivers.append(ROOT / "tests" / "native" / "ct.c")
    elif IN_CI:
        pytest.fail("valgrind/memcheck.h is missing in CI")
    errors, _ = compile_all([cc], drivers)
    assert not errors, "\n".join(errors)


@pytest.fixture(scope="session", params=["gcc", "clang"])
def kat_binary(request, tmp_path_factory) -> Path:
    cc = need_tool(request.param)
    errors, objects = build_objects(
        request.param, [cc], builder_sources() + [KAT], tmp_path_factory
    )
    assert not errors, "\n".join(errors)
    out = tmp_path_factory.mktemp(f"kat-{request.param}") / "kat"
    r = run([cc, *objects, "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return out


def test_c_driver_passes_on_every_kernel(kat_binary, vectors_file):
    r = run([str(kat_binary), str(vectors_file)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failures" in r.stdout
    nlines = len(kat_vectors.lines()) + len(kat_vectors.wycheproof_lines())
    assert f"kat: {nlines} vector lines" in r.stdout, r.stdout
    listed = r.stdout.rsplit("kernels:", 1)[1].split()
    cpu = run([str(kat_binary), "kernels"]).stdout.splitlines()
    # one "VARIANT: kernel ..." line per variant of the C library, the kernels of all of them run
    assert [line.split(":")[0] for line in cpu] == list(native.VARIANTS)
    assert listed and set(listed) == {k for line in cpu for k in line.split(":")[1].split()}


def test_c_driver_fails_on_a_wrong_vector(kat_binary, tmp_path):
    lines = kat_vectors.lines()
    cols = lines[0].split()
    cols[7] = ("0" if cols[7][0] != "0" else "1") + cols[7][1:]  # first ciphertext nibble
    bad = tmp_path / "bad.txt"
    bad.write_text(" ".join(cols) + "\n")
    r = run([str(kat_binary), "-q", str(bad)], timeout=300)
    assert r.returncode == 1
    assert "encrypt differs from the vector" in r.stderr


# ---- aarch64: portable kernels only ------------------------------------------------------

AARCH64_CC = "aarch64-linux-gnu-gcc"


def aarch64_objects(tmp_path_factory):
    cc = need_tool(AARCH64_CC)
    return cc, build_objects("aarch64", [cc], builder_sources("aarch64") + [KAT], tmp_path_factory)


def test_aarch64_sources_cross_compile_warning_free(tmp_path_factory):
    cc, (errors, _) = aarch64_objects(tmp_path_factory)
    # the x86 kernel files must compile to nothing there (their code is guarded)
    x86_only = sorted(set(builder_sources("x86_64")) - set(builder_sources("aarch64")))
    errors = errors + compile_all([cc], x86_only)[0]
    # the CPython entry points (syntax only: this host's pyconfig.h stands in for aarch64's)
    inc = sysconfig.get_paths()["include"]
    for src in SPEEDUPS:
        r = run([cc, "-fsyntax-only", *WARN, f"-I{INCLUDE}", f"-I{inc}", str(src)])
        if r.returncode:
            errors.append(f"{src.relative_to(ROOT)}:\n{r.stderr}")
    assert not errors, "\n".join(errors)


def test_aarch64_clang_cross_compile_warning_free():
    clang = need_tool("clang")
    if not Path(AARCH64_SYSROOT, "include").is_dir():
        if IN_CI:
            pytest.fail(f"{AARCH64_SYSROOT} is missing in CI (.ci/run installs it)")
        pytest.skip("no aarch64 sysroot")
    errors = compile_all(
        [clang, "--target=aarch64-linux-gnu", f"--sysroot={AARCH64_SYSROOT}"],
        builder_sources("aarch64"),
        extra=[f"-isystem{AARCH64_SYSROOT}/include"],
    )[0]
    assert not errors, "\n".join(errors)


def test_aarch64_kernels_pass_under_qemu():
    """tools/cross_aarch64.sh: the armcrypto kernels under qemu-aarch64 -cpu max, and the
    fallback to portable on a CPU without the Crypto Extension."""
    need_tool(AARCH64_CC)
    need_tool("qemu-aarch64")
    if not Path(AARCH64_SYSROOT, "lib").is_dir():
        if IN_CI:
            pytest.fail(f"{AARCH64_SYSROOT} is missing in CI (.ci/run installs it)")
        pytest.skip("no aarch64 sysroot")
    env = dict(os.environ, PYTHON=sys.executable)
    r = run(["bash", str(ROOT / "tools" / "cross_aarch64.sh")], env=env, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failures; kernels: armcrypto" in r.stdout, r.stdout
    assert "cross_aarch64: all passed" in r.stdout, r.stdout


# ---- Windows (MSVC mode, mingw-w64) and macOS, checked on Linux ------------------------------


@pytest.mark.skipif(not X86, reason="checked on an x86-64 host")
def test_windows_and_macos_cross_build():
    """tools/crossbuild.sh: the AMD64 sources in MSVC mode (clang-cl with __clang__ undefined,
    zig cc -target x86_64-windows-msvc) and with mingw-w64, kat.exe from the MSVC-mode objects
    and from the mingw ones under wine (the native build's kernels selected, 0 failures),
    portable_check.c from its MSVC-mode object under wine, the
    inline guard over clang-cl's COFF objects at /Ob1 and /Ob2, and the x86_64-macos and
    aarch64-macos builds (zig)."""
    for tool in ("clang", "llvm-objdump", "x86_64-w64-mingw32-gcc", "wine"):
        need_tool(tool)
    if importlib.util.find_spec("ziglang") is None:
        if IN_CI:
            pytest.fail("the ziglang package is missing in CI (.ci/run installs it)")
        pytest.skip("the ziglang package is not installed")
    env = dict(os.environ, PYTHON=sys.executable)
    r = run(["bash", str(ROOT / "tools" / "crossbuild.sh")], env=env, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    win, arm = len(builder_sources("AMD64")), len(builder_sources("arm64"))
    for label in ("clang-cl", "zig-msvc", "zig-clang", "macos-x86_64"):
        assert f"{label}: {win} sources compiled" in out, out
    assert f"mingw: {win + 1} sources compiled" in out, out  # and kat.c
    assert f"macos-aarch64: {arm} sources compiled" in out, out
    nlines = len(kat_vectors.lines()) + len(kat_vectors.wycheproof_lines())
    for exe in ("kat-msvc", "kat-mingw"):
        assert f"{exe}: kat: {nlines} vector lines" in out, out
    assert out.count(" 0 failures;") == 2, out
    # tests/native/portable_check.c from its MSVC-mode object (scalar planes) under wine
    assert "tests/native/kat.c and portable_check.c compiled in MSVC mode" in out, out
    assert re.search(
        r"^pc-msvc: portable check \(scalar[^)]*\): \d+ checks, 0 failures$", out, re.M
    ), out
    assert f"no GNU C in the MSVC branches of {win + 2} sources" in out, out
    assert "inline guard: 30 builds, 0 failing" in out, out
    assert "crossbuild: all passed" in out, out


def _gnu_scan(stream: str, tmp_path: Path, source_text: str) -> subprocess.CompletedProcess:
    src = tmp_path / "native" / "src" / "probe.c"
    src.parent.mkdir(parents=True)
    src.write_text(source_text)
    text = stream.replace("SRC", str(src))
    scan = ROOT / "tools" / "msvc_shim" / "gnu_scan.py"
    return run([sys.executable, str(scan), "probe.c"], input=text)


@pytest.mark.parametrize(
    "code",
    [
        "static int x __attribute__((unused));",
        "int f(int a) { return ({ a; }); }",
        "int g(void) { return __builtin_popcount(3); }",
        'void h(void) { __asm__("nop"); }',
    ],
)
def test_gnu_scan_finds_gnu_c_in_the_msvc_branches(tmp_path, code):
    # a preprocessed stream (line markers as clang writes them) holding our own line
    stream = f'# 1 "SRC"\n{code}\n'
    r = _gnu_scan(stream, tmp_path, code + "\n")
    assert r.returncode == 1 and "GNU C under MSVC" in r.stdout, r.stdout + r.stderr
    # a kept #define of ours too
    r = _gnu_scan('# 1 "SRC"\n#define U __attribute__((unused))\n', tmp_path / "d", "")
    assert r.returncode == 1, r.stdout


def test_gnu_scan_leaves_the_compilers_headers_and_their_expansions(tmp_path):
    # builtins from a header, and from an intrinsic macro expanded on our line
    stream = (
        '# 1 "/usr/lib/clang/include/avxintrin.h" 3\n'
        "static __inline __attribute__((__always_inline__)) int a(void);\n"
        '# 3 "SRC"\n'
        "v = ((__m128i)__builtin_ia32_extract128i256((__v4di)acc, (int)(1)));\n"
    )
    source = "\n\nv = _mm256_extracti128_si256(acc, 1);\n"
    r = _gnu_scan(stream, tmp_path, source)
    assert r.returncode == 0, r.stdout + r.stderr
