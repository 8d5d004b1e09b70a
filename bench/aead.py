"""AEAD micro-benchmark: every AEGIS variant on the selected (or every) kernel against
AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 from ``cryptography``, in one process.

    python -m sealstore.bench.aead [--quick] [--kernels all] [--json PATH] [--c-harness]

Reports GB/s and ns per call (medians of repeated batches, with the spread) and the ratio to
AES-256-GCM measured in the same run, with the CPU and the kernel each variant ran on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import aead as crypto_aead

from sealstore import native
from sealstore.suites import SUITES

from . import inner_loop, libaegis_versus
from .cbuild import HarnessUnavailable, compiler, run_build
from .grids import size_name as _size_name
from .json_output import write_json
from .timing import measure

SIZES = (64, 1024, 16384, 1 << 20, 16 << 20)
QUICK_SIZES = (64, 16384, 1 << 20)
#: The natively run suites (the registry's), by label.
CLASSES = {s.label: s.cipher for s in SUITES if s.native_variant is not None}
BASELINE = "AES-256-GCM"


def _budget(size: int, quick: bool) -> float:
    base = 0.04 if quick else 0.4
    return base * (2 if size >= 1 << 20 else 1)


def _baselines():
    yield "AES-128-GCM", crypto_aead.AESGCM(os.urandom(16)), 12
    yield "AES-256-GCM", crypto_aead.AESGCM(os.urandom(32)), 12
    yield "ChaCha20-Poly1305", crypto_aead.ChaCha20Poly1305(os.urandom(32)), 12


def _row(algorithm, kernel, op, size, sample):
    return {
        "algorithm": algorithm,
        "kernel": kernel,
        "op": op,
        "size": size,
        "seconds_per_call": sample.median,
        "ns_per_call": sample.median * 1e9,
        "gbps": size / sample.median / 1e9,
        "spread": sample.spread,
        "calls_per_batch": sample.number,
        "batches": sample.repeats,
    }


def run(
    quick: bool = False, all_kernels: bool = False, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Measure everything; returns a JSON-ready dict (see docs/BENCH.md for the fields).
    ``progress(text)`` is called after each case."""
    sizes = QUICK_SIZES if quick else SIZES
    ad = os.urandom(16)
    rows = []

    def add(algorithm, kernel, op, size, fn, budget):
        rows.append(_row(algorithm, kernel, op, size, measure(fn, budget=budget)))
        if progress:
            progress(f"{_size_name(size)} {algorithm} ({kernel}) {op}")

    for size in sizes:
        data = os.urandom(size)
        budget = _budget(size, quick)
        for name, aead, nlen in _baselines():
            nonce = os.urandom(nlen)
            ct = aead.encrypt(nonce, data, ad)
            add(name, "openssl", "encrypt", size, lambda: aead.encrypt(nonce, data, ad), budget)
            add(name, "openssl", "decrypt", size, lambda: aead.decrypt(nonce, ct, ad), budget)
        for variant, cls in CLASSES.items():
            kernels = (
                native.variant_kernels(variant)
                if all_kernels
                else [native.selected_kernel(variant)]
            )
            for kernel in kernels:
                if kernel == "portable" and size > 16384:
                    continue  # the portable kernel at 1 MiB+ adds a minute and nothing new
                c = cls(cls.generate_key(), 16, kernel=kernel)
                _kernel_cases(add, variant, c, data, ad, budget)
        dst = bytearray(size)
        src = memoryview(data)

        def copy():
            dst[:] = src

        add("memcpy", "-", "copy", size, copy, budget)
    _add_ratios(rows)
    return {"info": native.info(), "platform": _platform(), "rows": rows}


def _kernel_cases(add, variant: str, c, data: bytes, ad: bytes, budget: float) -> None:
    """One cipher object's cases at one size: the one-shot and ``_into`` calls both ways, and at
    64 bytes the same call through cffi (what the fast path saves)."""
    size = len(data)
    kernel = c.kernel
    nonce = os.urandom(c.nonce_size)
    ct = c.encrypt(nonce, data, ad)
    out = bytearray(size + c.tag_size)
    add(variant, kernel, "encrypt", size, lambda: c.encrypt(nonce, data, ad), budget)
    add(variant, kernel, "encrypt_into", size, lambda: c.encrypt_into(nonce, data, ad, out), budget)
    add(variant, kernel, "decrypt", size, lambda: c.decrypt(nonce, ct, ad), budget)
    add(variant, kernel, "decrypt_into", size, lambda: c.decrypt_into(nonce, ct, ad, out), budget)
    if size == 64:
        ctx = c._ctx
        add(
            variant,
            kernel,
            "encrypt (cffi path)",
            size,
            lambda: native.cffi_encrypt(ctx, nonce, data, ad),
            budget,
        )


def _add_ratios(rows):
    base = {
        (r["op"].split("_")[0], r["size"]): r["seconds_per_call"]
        for r in rows
        if r["algorithm"] == BASELINE
    }
    for r in rows:
        op = "encrypt" if r["op"].startswith("encrypt") else "decrypt"
        b = base.get((op, r["size"])) if r["algorithm"] != "memcpy" else None  # a copy is no AEAD
        r["speedup_vs_aes256gcm"] = b / r["seconds_per_call"] if b else None


def _platform() -> dict[str, Any]:
    import cryptography
    from cryptography.hazmat.backends.openssl.backend import backend

    return {
        "python": platform.python_version(),
        "cryptography": cryptography.__version__,
        "openssl": backend.openssl_version_text(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def _kernel_sources() -> Path:
    """The kernel sources this installed sealstore was built from (shipped as ``sealstore._csrc``)."""
    try:
        from importlib.resources import files

        root = Path(str(files("sealstore._csrc")))
    except ModuleNotFoundError:
        raise HarnessUnavailable(
            "this sealstore was installed without its kernel sources "
            "(sealstore._csrc); reinstall it from the sdist or the source tree"
        ) from None
    if (
        not (root / "src" / "dispatch.c").is_file()
        or not (root / "include" / "sealstore.h").is_file()
    ):
        raise HarnessUnavailable(f"the kernel sources are incomplete in {root}")
    return root


def c_harness(seconds: float = 0.3, largest: int | None = None) -> dict[str, Any]:
    """Build kernel_bench.c against the installed package's kernel sources and run it, for
    message sizes up to ``largest`` bytes (every size when None).  Raises HarnessUnavailable
    (with the reason) when it cannot be built here."""
    src = _kernel_sources()
    cc = compiler()
    bench_c = Path(__file__).resolve().parent / "kernel_bench.c"
    sources: list[tuple[Path, tuple[str, ...]]] = [
        (bench_c, ()),
        *((s, ()) for s in sorted((src / "src").rglob("*.c"))),
    ]
    # the portable kernel's pre-bitsliced baseline, one object per degree (portable_baseline)
    baseline = bench_c.with_name("kernel_baseline.c")
    sources += [(baseline, (f"-DLANES={n}", f"-I{src / 'src'}")) for n in (1, 2, 4)]
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "kernel_bench")
        objects = _compile_objects(cc, src / "include", sources, tmp)
        run_build([cc, "-O3", "-o", exe, *objects], cc)
        args = [exe, str(seconds)] + ([] if largest is None else [str(largest)])
        out = subprocess.run(args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _compile_objects(
    cc: str, include: Path, sources: list[tuple[Path, tuple[str, ...]]], tmp: str
) -> list[str]:
    """Each (source, extra flags) compiled to an object file, one compiler per core (the -O3
    kernels take most of the harness's time when compiled one after the other)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i_src):
        i, (source, extra) = i_src
        obj = os.path.join(tmp, f"{i}-{source.stem}.o")
        run_build([cc, "-O3", "-I", str(include), *extra, "-c", "-o", obj, str(source)], cc)
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(one, enumerate(sources)))


def _aarch64_loop(result: dict[str, Any]) -> list[str]:
    """The armcrypto loop's instruction mix into ``result`` when the aarch64 tools are here
    (three compiles, three more for libaegis when ``SEALSTORE_LIBAEGIS_SRC`` names its source
    tree); otherwise a note saying what is missing."""
    why = inner_loop.available()
    if why is None:
        try:
            result["aarch64_loop"] = inner_loop.measure(_kernel_sources())
        except (HarnessUnavailable, subprocess.CalledProcessError, ValueError) as e:
            why = str(e).splitlines()[0]
    if why is not None:
        return [f"aarch64 instruction mix: not run ({why})"]
    return _libaegis_loop(result["aarch64_loop"])


def _libaegis_loop(rows: list[dict[str, Any]]) -> list[str]:
    """libaegis's rows appended to ``rows`` when its source tree is named, else a note."""
    tree = inner_loop.libaegis_tree()
    if tree is None:
        return [
            "aarch64 instruction mix: libaegis rows not run "
            f"(set {inner_loop.LIBAEGIS_ENV} to a libaegis source tree)"
        ]
    try:
        rows += inner_loop.measure_libaegis(tree)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        why = (getattr(e, "stderr", None) or str(e)).strip().splitlines()[0]
        return [f"aarch64 instruction mix: libaegis rows not run ({why})"]
    return []


def section(opts: argparse.Namespace) -> dict[str, Any]:
    """The AEAD section of ``sealstore bench`` (its tables: ``sealstore.bench.grids.aead``)."""
    quick = bool(getattr(opts, "quick", False))
    progress = getattr(opts, "progress", None)
    result = run(
        quick=quick, all_kernels=getattr(opts, "kernels", "selected") == "all", progress=progress
    )
    notes = []
    try:
        result["c_harness"] = c_harness(0.01, 1 << 20) if quick else c_harness(0.2)
        if progress:
            progress("C kernel harness")
    except HarnessUnavailable as e:
        notes.append(f"C kernel harness: not run: {e}")
    notes += _aarch64_loop(result)
    try:
        # quick: each variant's selected kernel, fewer rounds; otherwise every x86 kernel
        lib_rows = libaegis_versus.compare(
            rounds=31 if quick else 101, every_kernel=not quick, progress=progress
        )
    except HarnessUnavailable as e:
        notes.append(f"versus libaegis, C level: not run: {e}")
    else:
        if lib_rows is None:
            notes.append(
                "versus libaegis, C level: not run "
                "(pip install 'sealstore[bench]' adds the aeg package)"
            )
        else:
            result["versus_libaegis"] = lib_rows
    result["notes"] = notes
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sealstore.bench.aead", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="smaller sizes and budgets")
    ap.add_argument("--kernels", choices=("selected", "all"), default="selected")
    ap.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    ap.add_argument("--c-harness", action="store_true", help="also build and run the C harness")
    args = ap.parse_args(argv)
    result = run(
        quick=args.quick,
        all_kernels=args.kernels == "all",
        progress=lambda s: print(f"  measured {s}", file=sys.stderr),
    )
    if args.c_harness:
        result["c_harness"] = c_harness(0.02, 1 << 20) if args.quick else c_harness(0.3)
    from rich.console import Console

    from .run import render_section

    render_section("aead", dict(result, status="ok", seconds=0), Console(width=120))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
