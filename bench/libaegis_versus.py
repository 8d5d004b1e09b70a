"""Versus libaegis, C level: sealstore's kernels and libaegis (PyPI's ``aeg``, the build a user
would install) called on the same buffers from one C loop (``versus_libaegis.c``), round robin,
encrypt and decrypt, with no Python between the calls.

    python -m sealstore.bench.libaegis_versus [--rounds N] [--batch-ms MS] [--json PATH]

Each kernel of each variant this CPU runs (the portable one aside) is timed against libaegis's
own choice for the CPU; the ratio is libaegis's batch time over
sealstore's, both the fastest batch of many short round-robin rounds (the least disturbed by
a busy machine; above 1: sealstore is faster), with the median of the per-round ratios beside
it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from cffi import FFI

from sealstore import native
from sealstore.errors import InternalError

from .cbuild import compiler, run_build
from .grids import size_name
from .json_output import write_json

SIZES = (1024, 16384, 1 << 20)
OPS = ("encrypt", "decrypt")
_CDEF = """
typedef struct versus_case {
    int decrypt; size_t n; uint8_t *out; const uint8_t *src; uint8_t *tag_out;
    const uint8_t *mac; size_t maclen; const uint8_t *ad; size_t adlen;
    const uint8_t *npub; const uint8_t *key;
} versus_case;
int versus_time(const versus_case *vc, uintptr_t a, uintptr_t b, size_t iters, int rounds,
                double *ta, double *tb);
"""


def _build(tmp: str):
    """versus_libaegis.c as a shared library in ``tmp``, opened with cffi (ABI mode)."""
    cc = compiler()
    src = Path(__file__).resolve().parent / "versus_libaegis.c"
    so = os.path.join(tmp, "versus_libaegis.so")
    run_build([cc, "-O2", "-shared", "-fPIC", "-o", so, str(src)], cc, "versus_libaegis.c")
    ffi = FFI()
    ffi.cdef(_CDEF)
    return ffi, ffi.dlopen(so)


def _address(lib_ffi, fn) -> int:
    return int(lib_ffi.cast("uintptr_t", fn))


def _entry_points(variant: str, kernel: str, aff, alib) -> dict[str, tuple[int, int]]:
    """{op: (sealstore's function address, libaegis's)} for one (variant, kernel)."""
    impl = native.lib.sealstore_impl(native.VARIANTS[variant], native.KERNELS.index(kernel))
    if impl == native.ffi.NULL:
        raise InternalError(f"{variant} has no {kernel} kernel entry points")
    prefix = variant.lower().replace("-", "")
    return {
        op: (
            _address(native.ffi, getattr(impl, op)),
            _address(aff, aff.addressof(alib, f"{prefix}_{op}_detached")),
        )
        for op in OPS
    }


class _Buffers:
    """One message size's buffers, owned by the comparison library's ffi: a random message,
    its ciphertext and tag, and scratch outputs."""

    def __init__(self, ffi, size: int):
        self.ffi, self.size = ffi, size
        self.m = ffi.new("uint8_t[]", os.urandom(size))
        self.c = ffi.new("uint8_t[]", size)
        self.out = ffi.new("uint8_t[]", size)
        self.tag = ffi.new("uint8_t[16]")
        # room for every variant's key and nonce (32 bytes for AEGIS-256)
        kb, nb = native.lib.SEALSTORE_MAX_KEYBYTES, native.lib.SEALSTORE_MAX_NPUBBYTES
        self.key = ffi.new(f"uint8_t[{kb}]", os.urandom(kb))
        self.npub = ffi.new(f"uint8_t[{nb}]", os.urandom(nb))

    def case(self, op: str):
        vc = self.ffi.new("versus_case *")
        vc.decrypt, vc.n, vc.maclen = int(op == "decrypt"), self.size, 16
        vc.ad, vc.adlen, vc.npub, vc.key = self.ffi.NULL, 0, self.npub, self.key
        if op == "decrypt":
            vc.out, vc.src, vc.mac = self.out, self.c, self.tag
        else:
            vc.out, vc.src, vc.tag_out = self.c, self.m, self.tag
        return vc


def _sealed(ffi, clib, bufs: _Buffers, vc, fn: int) -> bytes:
    """Ciphertext and tag of one encryption by ``fn``."""
    if clib.versus_time(vc, fn, fn, 1, 1, ffi.new("double[1]"), ffi.new("double[1]")) != 0:
        raise InternalError("an encryption failed")
    return bytes(ffi.buffer(bufs.c)) + bytes(ffi.buffer(bufs.tag))


def _check_same(ffi, clib, bufs: _Buffers, label: str, ours: int, theirs: int) -> None:
    """Both produce the same ciphertext and tag (then bufs.c and bufs.tag hold them)."""
    vc = bufs.case("encrypt")
    if _sealed(ffi, clib, bufs, vc, ours) != _sealed(ffi, clib, bufs, vc, theirs):
        raise InternalError(f"{label}: sealstore and libaegis disagree on one encryption")


def _iters(ffi, clib, vc, fn: int, batch_s: float) -> int:
    """Calls per batch so that one batch of ``fn`` takes about ``batch_s`` seconds."""
    iters, t = 1, ffi.new("double[2]")
    while True:
        if clib.versus_time(vc, fn, fn, iters, 1, t, t + 1) != 0:
            raise InternalError("a call failed while calibrating")
        if t[0] >= batch_s or iters >= 1 << 30:
            return iters
        iters = iters * 2 if t[0] < batch_s / 8 else int(iters * batch_s / t[0]) + 1


def _time(ffi, clib, vc, ours: int, theirs: int, rounds: int, batch_s: float) -> dict[str, Any]:
    iters = _iters(ffi, clib, vc, theirs, batch_s)
    ta, tb = ffi.new("double[]", rounds), ffi.new("double[]", rounds)
    if clib.versus_time(vc, ours, theirs, iters, rounds, ta, tb) != 0:
        raise InternalError("a call failed while timing")
    size = vc.n * iters
    paired = sorted(tb[r] / ta[r] for r in range(rounds))
    return {
        "sealstore_gbps": size / min(ta) / 1e9,
        "libaegis_gbps": size / min(tb) / 1e9,
        "ratio": min(tb) / min(ta),
        "ratio_median": statistics.median(paired),
        "rounds": rounds,
        "calls_per_batch": iters,
    }


def compare(
    rounds: int = 101,
    batch_ms: float = 0.2,
    sizes: Iterable[int] = SIZES,
    every_kernel: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]] | None:
    """Every (variant, x86 kernel, size, op) against libaegis, as rows (docs/BENCH.md), or
    only each variant's selected kernel when ``every_kernel`` is false; None
    when the ``aeg`` package is not installed.  Raises HarnessUnavailable without a compiler
    and InternalError when the two disagree on a ciphertext."""
    try:
        from aeg._loader import ffi as aff, lib as alib
    except ImportError:
        return None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ffi, clib = _build(tmp)
        for variant in native.VARIANTS:
            selected = native.selected_kernel(variant)
            kernels = native.variant_kernels(variant) if every_kernel else [selected]
            for kernel in [k for k in kernels if k != "portable"]:
                fns = _entry_points(variant, kernel, aff, alib)
                for size in sizes:
                    bufs = _Buffers(ffi, size)
                    label = f"{variant} ({kernel}) {size_name(size)}"
                    _check_same(ffi, clib, bufs, label, *fns["encrypt"])
                    for op in OPS:
                        row = _time(ffi, clib, bufs.case(op), *fns[op], rounds, batch_ms / 1e3)
                        row.update(variant=variant, kernel=kernel, selected=kernel == selected)
                        row.update(op=op, size=size, size_name=size_name(size))
                        rows.append(row)
                        if progress:
                            progress(f"versus libaegis: {label} {op}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sealstore.bench.libaegis_versus", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--rounds", type=int, default=101, help="round-robin rounds per case")
    ap.add_argument("--batch-ms", type=float, default=0.2, help="milliseconds per batch")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = ap.parse_args(argv)
    rows = compare(args.rounds, args.batch_ms)
    if rows is None:
        print("libaegis comparison: not run (pip install 'sealstore[bench]' adds aeg)")
        return 1
    for r in rows:
        print(
            f"{r['variant']:12} {r['kernel']:7} {r['size_name']:>7} {r['op']:8}"
            f" sealstore {r['sealstore_gbps']:7.2f}  libaegis {r['libaegis_gbps']:7.2f} GB/s"
            f"  x{r['ratio']:.3f} (paired median x{r['ratio_median']:.3f})"
        )
    write_json(args.json, {"versus_libaegis": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
