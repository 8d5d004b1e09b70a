"""Build sealstore with its native modules instrumented (ASan/UBSan, or MSan), into a directory
that goes first on PYTHONPATH, plus the C known-answer driver from the same objects.

The sources are the ones the real build uses (``native/build_ffi.py`` for ``_native``, the
``native/build_speedups.py`` for ``_speedups``); every object is compiled once, in parallel,
and shared by both modules and the driver.  This is much faster than ``pip install`` with
sanitizer CFLAGS, which compiles the portable kernels twice, serially and at -O3::

    python tools/sanitized_build.py OUT [--cc clang] [--flags "-fsanitize=address,undefined"]

``OUT/site`` receives the ``sealstore`` package, ``OUT/kat`` the driver, and with clang and
AddressSanitizer ``OUT/fuzz_open`` (tests/native/fuzz_open.c; the objects also carry libFuzzer's
coverage instrumentation).  Prints the runtime library to LD_PRELOAD for the interpreter
(empty when none is needed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / layout.NATIVE
DEFAULT_FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
KAT_C = ROOT / "tests" / "native" / "kat.c"
FUZZ_C = ROOT / "tests" / "native" / "fuzz_open.c"  # linked only with clang and ASan


def builder():
    sys.path.insert(0, str(NATIVE))
    try:
        import build_ffi
    finally:
        sys.path.pop(0)
    return build_ffi


def speedups_sources() -> list[str]:
    """The sources of the ``sealstore._speedups`` extension (``native/build_speedups.py``, which
    setup.py builds it from)."""
    sys.path.insert(0, str(NATIVE))
    try:
        import build_speedups
    finally:
        sys.path.pop(0)
    return list(build_speedups.SOURCES)


def runtime(cc: str, flags: str) -> str:
    """The sanitizer runtime the interpreter must preload ('' if none)."""
    is_clang = "clang" in Path(cc).name
    if "address" in flags:
        name = "libclang_rt.asan-x86_64.so" if is_clang else "libasan.so"
    elif "memory" in flags or not is_clang and "undefined" in flags:
        return ""  # gcc's libubsan loads as a dependency of the module
    else:
        return ""
    path = subprocess.run(
        [cc, f"-print-file-name={name}"], capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        raise SystemExit(f"{cc} has no {name}")
    return path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cc", default=os.environ.get("CC", "clang"))
    ap.add_argument("--flags", default=DEFAULT_FLAGS)
    ap.add_argument("--opt", default="-O1", help="optimisation level (default -O1: fast builds)")
    return ap


def _cflags(args, fuzzing: bool) -> list[str]:
    """Compiler flags shared by every object: ``--opt``, line tables, PIC, ``--flags``."""
    debug = "-gline-tables-only" if "clang" in Path(args.cc).name else "-g1"
    cflags = [args.opt, debug, "-fPIC", "-fvisibility=hidden", *args.flags.split()]
    if fuzzing:
        # coverage for libFuzzer in the same objects, so the C fuzz target links from them
        cflags.append("-fsanitize=fuzzer-no-link")
    return cflags


def _object(src: Path, out: Path) -> Path:
    """Where ``src`` (under the repository or ``out``) compiles to: OUT/obj/<path with __>.o"""
    rel = src.relative_to(out) if src.is_relative_to(out) else src.relative_to(ROOT)
    return out / "obj" / (str(rel).replace(os.sep, "__") + ".o")


def _compile_all(args, cflags: list[str], sources: list[Path], out: Path) -> None:
    """Compile every source once, in parallel; SystemExit with each failing command and its
    errors."""
    inc = [f"-I{NATIVE / 'include'}", f"-I{sysconfig.get_paths()['include']}"]

    def compile_one(src: Path) -> str:
        extra = []
        if src.name.endswith("_portable.c") and "undefined" in args.flags:
            # UBSan's pointer-overflow checks on the unrolled bitsliced rounds (constant
            # indexes only) make these files compile 4x slower; every other check stays on
            extra = ["-fno-sanitize=pointer-overflow"]
        cmd = [args.cc, "-c", *cflags, *extra, *inc, str(src), "-o", str(_object(src, out))]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return "" if r.returncode == 0 else f"{' '.join(cmd)}\n{r.stderr}"

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        errors = [e for e in pool.map(compile_one, sources) if e]
    if errors:
        raise SystemExit("\n".join(errors))


def _copy_package(site: Path) -> None:
    """The package: the mapped directories, without any prebuilt native module."""
    for directory, name in layout.ROOTS.items():
        src = ROOT / directory
        if src.is_dir():
            shutil.copytree(
                src,
                site / name.replace(".", os.sep),
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.pyc"),
            )


def _link(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)


def _link_all(
    args, out: Path, ffi_c: Path, kernel: list[Path], speed: list[Path], fuzzing: bool
) -> None:
    """The two native modules into OUT/site/sealstore, OUT/kat, and OUT/fuzz_open when fuzzing."""
    flags = args.flags.split()

    def objects(srcs) -> list[str]:
        return [str(_object(src, out)) for src in srcs]

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, srcs in (("_native", [ffi_c, *kernel]), ("_speedups", speed)):
        target = out / "site" / "sealstore" / f"{name}{suffix}"
        _link([args.cc, "-shared", *flags, *objects(srcs), "-o", str(target)])
    _link([args.cc, *flags, *objects([KAT_C, *kernel]), "-o", str(out / "kat")])
    if fuzzing:  # OUT/fuzz_open: the libFuzzer target of the C open/decrypt entry points
        _link(
            [
                args.cc,
                "-fsanitize=fuzzer",
                *flags,
                *objects([FUZZ_C, *kernel]),
                "-o",
                str(out / "fuzz_open"),
            ]
        )


def main() -> None:
    args = _parser().parse_args()
    out = Path(args.out).resolve()
    for d in (out / "obj", out / "site"):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    fuzzing = "clang" in Path(args.cc).name and "address" in args.flags
    ffi_mod = builder()
    ffi_c = out / "obj" / "_native.c"
    with contextlib.redirect_stdout(sys.stderr):  # cffi prints "generating ..."
        ffi_mod.ffibuilder.emit_c_code(str(ffi_c))
    kernel = [ROOT / p for p in ffi_mod.kernel_sources()]
    speed = [ROOT / p for p in speedups_sources()]
    sources = sorted({*kernel, *speed, ffi_c, KAT_C, *([FUZZ_C] if fuzzing else [])})
    _compile_all(args, _cflags(args, fuzzing), sources, out)
    _copy_package(out / "site")
    _link_all(args, out, ffi_c, kernel, speed, fuzzing)
    print(runtime(args.cc, args.flags))


if __name__ == "__main__":
    main()
