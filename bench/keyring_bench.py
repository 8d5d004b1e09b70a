"""Keyring benchmark: seal/open and seal_many/open_many per suite and value size.

    python bench/keyring_bench.py [--seconds 0.3] [--json out.json]

Reports values per second and GB/s (plaintext bytes) for 16 B, 100 B, 1 KiB and 16 KiB values,
for the default AEGIS-128X4 keyring (size-adaptive: AEGIS-128L below 1 KiB), AEGIS-128X4 with
the adaptive choice off, and AES-256-GCM, all through ``Keyring`` with a column context, on one
core, with docs/BENCH.md's goals beside the figures: at 100 B at least 1M ``seal`` calls/s and 3M
``seal_many`` values/s, and the AEGIS suite ahead of AES-256-GCM at every size.

Batches hold up to 1000 values and at most 256 KiB of plaintext: a batch keeps all its
results alive, as a caller does, and past a few MiB the rate measures the allocator (fresh
pages from the OS after glibc trims its heap) rather than the cipher; a loop of single
calls reuses one freed buffer.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

import argparse
import statistics
import json
import os
import sys
import time

import sealstore.native
from sealstore.format import column_context
from sealstore.keyring import Keyring

SIZES = [16, 100, 1024, 16384]
BATCH = 1000
BATCH_BYTES = 256 * 1024
CONFIGS: dict[str, dict[str, Any]] = {
    "AEGIS-128X4": dict(suite="AEGIS-128X4"),
    "AEGIS-128X4 fixed": dict(suite="AEGIS-128X4", adaptive_threshold=0),
    "AES-256-GCM": dict(suite="AES-256-GCM"),
}


def rate(fn: Callable[[], object], values_per_call: int, seconds: float) -> tuple[float, float]:
    """Five runs of ``fn`` for about ``seconds`` each: (median values per second, spread)."""
    rates = []
    for _ in range(5):
        calls = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(16):
                fn()
            calls += 16
            now = time.perf_counter()
            if now >= deadline:
                break
        rates.append(calls * values_per_call / (now - start))
    med = statistics.median(rates)
    return med, (max(rates) - min(rates)) / med


def run(seconds: float, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    ctx = column_context("users", "email")
    rows = []
    for name, kw in CONFIGS.items():
        kr = Keyring.generate(**kw)
        for size in SIZES:
            pt = os.urandom(size)
            sealed = kr.seal(pt, ctx)
            batch = [pt] * max(1, min(BATCH, BATCH_BYTES // size))
            sealed_batch = kr.seal_many(batch, ctx)
            results = {
                "seal": rate(lambda: kr.seal(pt, ctx), 1, seconds),
                "open": rate(lambda: kr.open(sealed, ctx), 1, seconds),
                "seal_many": rate(lambda: kr.seal_many(batch, ctx), len(batch), seconds),
                "open_many": rate(lambda: kr.open_many(sealed_batch, ctx), len(batch), seconds),
            }
            for op, (vps, spread) in results.items():
                rows.append(
                    {
                        "suite": name,
                        "size": size,
                        "op": op,
                        "values_per_s": vps,
                        "spread": spread,
                        "gb_per_s": vps * size / 1e9,
                    }
                )
            if progress:
                progress(f"{name}, {size} B values")
    return rows


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """docs/BENCH.md's goals for the keyring, next to what this run measured."""
    get = {(r["suite"], r["size"], r["op"]): r["values_per_s"] for r in rows}
    items = [
        {
            "what": "AEGIS-128X4 seal, 100 B values/s",
            "measured": f"{get[('AEGIS-128X4', 100, 'seal')]:,.0f}",
            "goal": ">= 1,000,000",
            "reached": get[("AEGIS-128X4", 100, "seal")] >= 1e6,
        },
        {
            "what": "AEGIS-128X4 seal_many, 100 B values/s",
            "measured": f"{get[('AEGIS-128X4', 100, 'seal_many')]:,.0f}",
            "goal": ">= 3,000,000",
            "reached": get[("AEGIS-128X4", 100, "seal_many")] >= 3e6,
        },
    ]
    behind = [
        f"{op} {size} B"
        for size in SIZES
        for op in ("seal", "open", "seal_many", "open_many")
        if get[("AEGIS-128X4", size, op)] <= get[("AES-256-GCM", size, op)]
    ]
    items.append(
        {
            "what": "AEGIS-128X4 ahead of AES-256-GCM at every size and op",
            "measured": "behind at " + ", ".join(behind) if behind else "ahead everywhere",
            "goal": "ahead everywhere",
            "reached": not behind,
        }
    )
    return items


def section(opts: argparse.Namespace) -> dict[str, Any]:
    """The keyring section of ``sealstore bench`` (its tables: ``sealstore.bench.grids.keyring``)."""
    rows = run(0.02 if getattr(opts, "quick", False) else 0.25, getattr(opts, "progress", None))
    gcm = {(r["size"], r["op"]): r["values_per_s"] for r in rows if r["suite"] == "AES-256-GCM"}
    for r in rows:
        r["vs_aes256gcm"] = r["values_per_s"] / gcm[(r["size"], r["op"])]
    return {"rows": rows, "targets": targets(rows)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args()
    rows = run(args.seconds, progress=lambda s: print(f"  measured {s}", file=sys.stderr))
    for r in rows:
        print(f"{r['suite']:18} {r['size']:>6} {r['op']:>10} {r['values_per_s']:>12,.0f} values/s")
    for t in targets(rows):
        print(f"{t['what']}: {t['measured']} (goal {t['goal']})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"info": sealstore.native.info(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
