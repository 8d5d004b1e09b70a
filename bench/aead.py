"""AEAD micro-benchmark: every AEGIS variant on the selected (or every) kernel against
AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 from ``cryptography``, in one process.

    python -m sealstore.bench.aead [--quick] [--kernels all] [--json PATH] [--c-harness]

Reports GB/s and ns per call (medians of repeated batches, with the spread) and the ratio to
AES-256-GCM measured in the same run, with the CPU and the kernel each variant ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import aead as crypto_aead

from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, native

from .timing import measure

SIZES = (64, 1024, 16384, 1 << 20, 16 << 20)
QUICK_SIZES = (64, 16384, 1 << 20)
CLASSES = {"AEGIS-128L": AEGIS128L, "AEGIS-128X2": AEGIS128X2, "AEGIS-128X4": AEGIS128X4}
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


def run(quick: bool = False, all_kernels: bool = False, progress=None) -> dict:
    """Measure everything; returns a JSON-ready dict (see docs/BENCH.md for the fields)."""
    sizes = QUICK_SIZES if quick else SIZES
    ad = os.urandom(16)
    rows = []
    for size in sizes:
        data = os.urandom(size)
        budget = _budget(size, quick)
        for name, aead, nlen in _baselines():
            nonce = os.urandom(nlen)
            ct = aead.encrypt(nonce, data, ad)
            rows.append(_row(name, "openssl", "encrypt", size,
                             measure(lambda: aead.encrypt(nonce, data, ad), budget=budget)))
            rows.append(_row(name, "openssl", "decrypt", size,
                             measure(lambda: aead.decrypt(nonce, ct, ad), budget=budget)))
        for variant, cls in CLASSES.items():
            kernels = native.variant_kernels(variant) if all_kernels else [native.selected_kernel(variant)]
            for kernel in kernels:
                if kernel == "portable" and size > 16384:
                    continue  # about 0.1 GB/s: minutes for nothing
                c = cls(cls.generate_key(), 16, kernel=kernel)
                nonce = os.urandom(16)
                ct = c.encrypt(nonce, data, ad)
                out = bytearray(size + 16)
                rows.append(_row(variant, kernel, "encrypt", size,
                                 measure(lambda: c.encrypt(nonce, data, ad), budget=budget)))
                rows.append(_row(variant, kernel, "encrypt_into", size,
                                 measure(lambda: c.encrypt_into(out, nonce, data, ad), budget=budget)))
                rows.append(_row(variant, kernel, "decrypt", size,
                                 measure(lambda: c.decrypt(nonce, ct, ad), budget=budget)))
                rows.append(_row(variant, kernel, "decrypt_into", size,
                                 measure(lambda: c.decrypt_into(out, nonce, ct, ad), budget=budget)))
                if size == 64:
                    ctx = c._ctx
                    rows.append(_row(variant, kernel, "encrypt (cffi path)", size, measure(
                        lambda: native.cffi_encrypt(ctx, nonce, data, ad), budget=budget)))
        dst = bytearray(size)
        src = memoryview(data)

        def copy():
            dst[:] = src

        rows.append(_row("memcpy", "-", "copy", size, measure(copy, budget=budget)))
        if progress:
            progress(size)
    _add_ratios(rows)
    return {"info": native.info(), "platform": _platform(), "rows": rows}


def _add_ratios(rows):
    base = {(r["op"].split("_")[0], r["size"]): r["seconds_per_call"]
            for r in rows if r["algorithm"] == BASELINE}
    for r in rows:
        op = "encrypt" if r["op"].startswith("encrypt") else "decrypt"
        b = base.get((op, r["size"]))
        r["speedup_vs_aes256gcm"] = b / r["seconds_per_call"] if b else None


def _platform() -> dict:
    import cryptography
    from cryptography.hazmat.backends.openssl.backend import backend

    return {
        "python": platform.python_version(),
        "cryptography": cryptography.__version__,
        "openssl": backend.openssl_version_text(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def c_harness(seconds: float = 0.3) -> dict | None:
    """Build bench/kernel_bench.c against the native sources and run it (None if no source
    tree or no C compiler is here)."""
    here = Path(__file__).resolve().parent
    src = here.parent / "native"
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not (src / "src" / "dispatch.c").exists() or not (here / "kernel_bench.c").exists():
        return None
    sources = [str(p) for p in sorted((src / "src").rglob("*.c"))]
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "kernel_bench")
        subprocess.run([cc, "-O3", "-I", str(src / "include"), "-o", exe,
                        str(here / "kernel_bench.c"), *sources], check=True)
        out = subprocess.run([exe, str(seconds)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def render(result: dict, console=None) -> None:
    """Print the tables (rich)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    info = result["info"]
    console.print(f"[bold]CPU[/bold] {info['cpu']} ({info['machine']}); features: "
                  f"{', '.join(info['features']) or 'none'}")
    console.print("[bold]kernels selected[/bold] " + ", ".join(
        f"{v}: {k}" for v, k in info["selected"].items())
        + (f" (forced: {info['forced']})" if info["forced"] else ""))
    p = result["platform"]
    console.print(f"Python {p['python']}, cryptography {p['cryptography']} ({p['openssl']})")
    for size in sorted({r["size"] for r in result["rows"]}):
        t = Table(title=f"{_size_name(size)} messages", title_justify="left")
        for col in ("algorithm", "kernel", "op", "GB/s", "ns/call", "spread", f"x {BASELINE}"):
            t.add_column(col, justify="right" if col[0] in "Gnsx" else "left")
        for r in result["rows"]:
            if r["size"] != size:
                continue
            ratio = r.get("speedup_vs_aes256gcm")
            t.add_row(r["algorithm"], r["kernel"], r["op"], f"{r['gbps']:.2f}",
                      f"{r['ns_per_call']:.0f}", f"{100 * r['spread']:.0f}%",
                      f"{ratio:.2f}" if ratio else "")
        console.print(t)
    if result.get("c_harness"):
        t = Table(title="C kernels alone (bench/kernel_bench.c), GB/s medians", title_justify="left")
        for col in ("variant", "kernel", "op", "size", "GB/s", "ns/call"):
            t.add_column(col)
        for r in result["c_harness"]["results"]:
            if r["size"] in (64, 16384, 1 << 20, 16 << 20):
                t.add_row(r["variant"], r["kernel"], r["op"], _size_name(r["size"]),
                          f"{r['gbps_median']:.2f}", f"{r['ns_per_call']:.0f}")
        console.print(t)


def _size_name(size: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div} {unit}"
    return f"{size} B"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sealstore.bench.aead", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and budgets")
    ap.add_argument("--kernels", choices=("selected", "all"), default="selected")
    ap.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    ap.add_argument("--c-harness", action="store_true", help="also build and run the C harness")
    args = ap.parse_args(argv)
    result = run(quick=args.quick, all_kernels=args.kernels == "all",
                 progress=lambda s: print(f"  measured {_size_name(s)}", file=sys.stderr))
    if args.c_harness:
        result["c_harness"] = c_harness()
    render(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def versus_libaegis(quick: bool = False) -> list[dict] | None:
    """libaegis (the ``aeg`` package, an optional bench extra) and sealstore's kernels called
    the same way: through cffi with prepared pointers, in this run.  None when ``aeg`` is
    not installed."""
    try:
        from aeg._loader import ffi as aff, lib as alib
    except ImportError:
        return None
    rows = []
    sizes = (16384, 1 << 20) if quick else (1024, 16384, 1 << 20)
    for size in sizes:
        m = os.urandom(size)
        key, npub = os.urandom(16), os.urandom(16)
        budget = _budget(size, quick)
        for variant in CLASSES:
            f = getattr(alib, variant.lower().replace("-", "") + "_encrypt")
            c, mp, kp, np_ = aff.new("uint8_t[]", size + 16), aff.from_buffer(m), aff.from_buffer(key), aff.from_buffer(npub)
            theirs = measure(lambda: f(c, 16, mp, size, aff.NULL, 0, np_, kp), budget=budget)
            ctx = native.new_ctx(variant, memoryview(key), 16, None)
            c2, mp2, np2 = native.ffi.new("uint8_t[]", size + 16), native.ffi.from_buffer(m), native.ffi.from_buffer(npub)
            ours = measure(lambda: native.lib.sealstore_encrypt(ctx, c2, mp2, size, native.ffi.NULL, 0, np2),
                           budget=budget)
            rows.append({"variant": variant, "kernel": native.ctx_kernel(ctx), "size": size,
                         "size_name": _size_name(size), "libaegis_gbps": size / theirs.median / 1e9,
                         "sealstore_gbps": size / ours.median / 1e9,
                         "ratio": theirs.median / ours.median})
    return rows


def section(opts) -> dict:
    """The AEAD section of ``sealstore bench``."""
    quick = bool(getattr(opts, "quick", False))
    result = run(quick=quick, all_kernels=getattr(opts, "kernels", "selected") == "all")
    rows = sorted(result["rows"], key=lambda r: (r["size"], r["op"], r["algorithm"], r["kernel"]))
    tables = [{
        "title": "throughput per call (median), ratio to AES-256-GCM in this run",
        "columns": [("size", "size_name", ""), ("algorithm", "algorithm", ""),
                    ("kernel", "kernel", ""), ("op", "op", ""), ("GB/s", "gbps", ".2f"),
                    ("ns/call", "ns_per_call", ".0f"), ("spread", "spread", "pct"),
                    ("vs AES-256-GCM", "speedup_vs_aes256gcm", "ratio")],
        "rows": [dict(r, size_name=_size_name(r["size"])) for r in rows],
    }]
    notes = []
    harness = None if quick else c_harness(0.2)
    if quick:
        notes.append("C kernel harness: skipped in --quick (run without it for the C-only figures)")
    elif harness is None:
        notes.append("C kernel harness: not run (no C compiler or no source tree here)")
    else:
        result["c_harness"] = harness
        tables.append({
            "title": "C kernels alone (bench/kernel_bench.c), medians",
            "columns": [("size", "size_name", ""), ("variant", "variant", ""),
                        ("kernel", "kernel", ""), ("op", "op", ""),
                        ("GB/s", "gbps_median", ".2f"), ("ns/call", "ns_per_call", ".0f"),
                        ("TSC cycles/byte", "tsc_cycles_per_byte", ".3f")],
            "rows": [dict(r, size_name=_size_name(r["size"])) for r in harness["results"]
                     if r["size"] in (64, 16384, 1 << 20) and (r["kernel"] != "portable" or r["size"] == 16384)],
        })
    lib_rows = versus_libaegis(quick)
    if lib_rows is None:
        notes.append("libaegis comparison: not run (pip install 'sealstore[bench]' adds the aeg package)")
    else:
        result["versus_libaegis"] = lib_rows
        tables.append({
            "title": "encrypt through cffi with prepared pointers: libaegis (aeg) and sealstore, medians",
            "columns": [("size", "size_name", ""), ("variant", "variant", ""), ("kernel", "kernel", ""),
                        ("libaegis GB/s", "libaegis_gbps", ".2f"), ("sealstore GB/s", "sealstore_gbps", ".2f"),
                        ("sealstore / libaegis", "ratio", "ratio")],
            "rows": lib_rows,
        })
    result.update(tables=tables, notes=notes)
    return result
