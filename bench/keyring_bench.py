"""Keyring benchmark: seal/open and seal_many/open_many per suite and value size.

    python bench/keyring_bench.py [--seconds 0.3] [--json out.json]

Reports values per second and GB/s (plaintext bytes) for 16 B, 100 B, 1 KiB and 16 KiB values,
for the default AEGIS-128X4 keyring (size-adaptive: AEGIS-128L below 1 KiB), AEGIS-128X4 with
the adaptive choice off, and AES-256-GCM, all through ``Keyring`` with a column context, on one
core.  Then it checks the issue's targets: at 100 B at least 1M ``seal`` calls/s and 3M
``seal_many`` values/s, and the AEGIS suite ahead of AES-256-GCM at every size.

Batches hold up to 1000 values and at most 256 KiB of plaintext: a batch keeps all its
results alive, as a caller does, and past a few MiB the rate measures the allocator (fresh
pages from the OS after glibc trims its heap) rather than the cipher; a loop of single
calls reuses one freed buffer.
"""

from __future__ import annotations

import argparse
import statistics
import json
import os
import sys
import time

import sealstore.native
from sealstore.format import column_context
from sealstore.keyring import DEFAULT_ADAPTIVE_THRESHOLD, Keyring

SIZES = [16, 100, 1024, 16384]
BATCH = 1000
BATCH_BYTES = 256 * 1024
CONFIGS = {
    "AEGIS-128X4": dict(suite="AEGIS-128X4"),
    "AEGIS-128X4 fixed": dict(suite="AEGIS-128X4", adaptive_threshold=0),
    "AES-256-GCM": dict(suite="AES-256-GCM"),
}


def rate(fn, values_per_call: int, seconds: float) -> float:
    """Median of five runs of ``fn`` for about ``seconds`` each: values per second."""
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
    return statistics.median(rates)


def run(seconds: float) -> list[dict]:
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
            for op, vps in results.items():
                rows.append(
                    {
                        "suite": name,
                        "size": size,
                        "op": op,
                        "values_per_s": vps,
                        "gb_per_s": vps * size / 1e9,
                    }
                )
    return rows


def report(rows: list[dict]) -> int:
    info = sealstore.native.info()
    print(f"cpu: {info.get('cpu')}  selected kernels: {info.get('selected')}")
    print(f"{'suite':18} {'size':>6} {'op':>10} {'values/s':>12} {'GB/s':>8}")
    for r in rows:
        print(
            f"{r['suite']:18} {r['size']:>6} {r['op']:>10} {r['values_per_s']:>12,.0f} "
            f"{r['gb_per_s']:>8.3f}"
        )
    get = {(r["suite"], r["size"], r["op"]): r["values_per_s"] for r in rows}
    checks = [
        ("seal 100 B >= 1M/s", get[("AEGIS-128X4", 100, "seal")] >= 1e6),
        ("seal_many 100 B >= 3M values/s", get[("AEGIS-128X4", 100, "seal_many")] >= 3e6),
    ]
    for size in SIZES:
        for op in ("seal", "open", "seal_many", "open_many"):
            checks.append(
                (
                    f"AEGIS ahead of AES-256-GCM: {op} {size} B",
                    get[("AEGIS-128X4", size, op)] > get[("AES-256-GCM", size, op)],
                )
            )
    for size in (s for s in SIZES if s < DEFAULT_ADAPTIVE_THRESHOLD):  # same code above it
        for op in ("seal", "seal_many", "open_many"):
            a, f = get[("AEGIS-128X4", size, op)], get[("AEGIS-128X4 fixed", size, op)]
            print(f"AEGIS-128L (adaptive) vs AEGIS-128X4 (fixed), {op} {size} B: x{a / f:.2f}")
    failed = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 1 if failed else 0


def section(opts) -> dict:
    """The keyring section of ``sealstore bench``."""
    rows = run(0.02 if getattr(opts, "quick", False) else 0.25)
    gcm = {(r["size"], r["op"]): r["values_per_s"] for r in rows if r["suite"] == "AES-256-GCM"}
    for r in rows:
        r["vs_aes256gcm"] = r["values_per_s"] / gcm[(r["size"], r["op"])]
    return {
        "rows": rows,
        "tables": [{
            "title": "Keyring.seal/open per value and seal_many/open_many per list (medians)",
            "columns": [("suite", "suite", ""), ("size", "size", ""), ("op", "op", ""),
                        ("values/s", "values_per_s", ",.0f"), ("GB/s", "gb_per_s", ".3f"),
                        ("vs AES-256-GCM", "vs_aes256gcm", "ratio")],
            "rows": rows,
        }],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args()
    rows = run(args.seconds)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"info": sealstore.native.info(), "rows": rows}, fh, indent=1)
    return report(rows)


if __name__ == "__main__":
    sys.exit(main())
