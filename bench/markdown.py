"""Turn a ``sealstore bench --json`` report into the Markdown tables the README shows.

    python -m sealstore.bench.markdown docs/bench/REPORT.json

The README's figures are pasted from this output, never typed by hand.
"""

from __future__ import annotations

import json
import sys

SIZES = {64: "64 B", 1024: "1 KiB", 16384: "16 KiB", 1 << 20: "1 MiB", 16 << 20: "16 MiB"}


def _aead(sec) -> list[str]:
    rows = sec["rows"]
    sizes = [s for s in SIZES if any(r["size"] == s for r in rows)]
    algos = []
    for r in rows:
        key = (r["algorithm"], r["kernel"])
        if r["op"] == "encrypt" and key not in algos and r["algorithm"] != "memcpy":
            algos.append(key)
    out = ["| encrypt, GB/s (x AES-256-GCM) | " + " | ".join(SIZES[s] for s in sizes) + " |",
           "| --- |" + " --- |" * len(sizes)]
    for algo, kernel in algos:
        cells = []
        for s in sizes:
            r = next((r for r in rows if (r["algorithm"], r["kernel"], r["op"], r["size"])
                      == (algo, kernel, "encrypt", s)), None)
            cells.append("-" if r is None else
                         f"{r['gbps']:.2f} (x{r['speedup_vs_aes256gcm']:.2f})")
        name = algo if kernel in ("openssl", "-") else f"{algo} ({kernel})"
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    copy = {r["size"]: r for r in rows if r["algorithm"] == "memcpy"}
    out.append("| memory copy | " + " | ".join(f"{copy[s]['gbps']:.2f}" if s in copy else "-"
                                           for s in sizes) + " |")
    small = [r for r in rows if r["size"] == 64 and r["algorithm"] == "AEGIS-128X4"]
    if small:
        out.append("")
        out.append("64-byte AEGIS-128X4 calls: " + ", ".join(
            f"`{r['op']}` {r['ns_per_call']:.0f} ns" for r in small) + "; AES-256-GCM `encrypt` "
            + "{:.0f} ns.".format(next(r["ns_per_call"] for r in rows if r["size"] == 64
                                       and r["algorithm"] == "AES-256-GCM" and r["op"] == "encrypt")))
    lib = sec.get("versus_libaegis")
    if lib:
        out += ["", "| encrypt via cffi, prepared pointers | size | libaegis GB/s | sealstore GB/s | sealstore / libaegis |",
                "| --- | --- | --- | --- | --- |"]
        for r in lib:
            out.append(f"| {r['variant']} ({r['kernel']}) | {r['size_name']} | {r['libaegis_gbps']:.2f} | "
                       f"{r['sealstore_gbps']:.2f} | x{r['ratio']:.2f} |")
    harness = sec.get("c_harness")
    if harness:
        out += ["", "| C kernel alone, 16 KiB | encrypt GB/s | decrypt GB/s | encrypt TSC cycles/byte |",
                "| --- | --- | --- | --- |"]
        for v in ("AEGIS-128L", "AEGIS-128X2", "AEGIS-128X4"):
            for k in ("avx512", "avx2", "aesni", "portable"):
                e = [r for r in harness["results"] if (r["variant"], r["kernel"], r["size"]) == (v, k, 16384)]
                if e:
                    enc = next(r for r in e if r["op"] == "encrypt")
                    dec = next(r for r in e if r["op"] == "decrypt")["gbps_median"]
                    cpb = enc.get("tsc_cycles_per_byte")
                    out.append(f"| {v} ({k}) | {enc['gbps_median']:.2f} | {dec:.2f} | "
                               + ("-" if cpb is None else f"{cpb:.3f}") + " |")
    return out


def _keyring(sec) -> list[str]:
    out = ["| 100-byte values | seal/s | open/s | seal_many values/s | open_many values/s |",
           "| --- | --- | --- | --- | --- |"]
    for suite in dict.fromkeys(r["suite"] for r in sec["rows"]):
        get = {r["op"]: r["values_per_s"] for r in sec["rows"] if r["suite"] == suite and r["size"] == 100}
        out.append(f"| {suite} | " + " | ".join(f"{get[o]:,.0f}" for o in
                                                 ("seal", "open", "seal_many", "open_many")) + " |")
    return out


def _columns(sec) -> list[str]:
    paths = list(dict.fromkeys(r["path"] for r in sec["rows"]))
    out = [f"{sec['n']:,} rows (100 B + 1 KiB encrypted), {sec['db']}, rows/s (x plaintext):", "",
           "| variant | " + " | ".join(paths) + " |", "| --- |" + " --- |" * len(paths)]
    for variant in dict.fromkeys(r["variant"] for r in sec["rows"]):
        cells = []
        for p in paths:
            r = next((r for r in sec["rows"] if r["variant"] == variant and r["path"] == p), None)
            cells.append("-" if r is None else f"{r['rows_per_s']:,.0f} (x{r['vs_plaintext']:.2f})")
        out.append(f"| {variant} | " + " | ".join(cells) + " |")
    return out


def _objects(sec) -> list[str]:
    s3 = sec["rows"]["s3"]
    out = [f"S3 on {sec['rows'].get('s3_endpoint', 'moto')}, MB/s (x plaintext):", "",
           "| object | op | plaintext | AES-256-GCM | AEGIS-128X4 |", "| --- | --- | --- | --- | --- |"]
    for key in dict.fromkeys((r["size_mib"], r["op"]) for r in s3):
        get = {r["suite"]: r for r in s3 if (r["size_mib"], r["op"]) == key}
        cells = [f"{get[s]['mb_per_s']:.0f}" + ("" if s == "plaintext" else f" (x{get[s]['vs_plaintext']:.2f})")
                 if s in get else "-" for s in ("plaintext", "AES-256-GCM", "AEGIS-128X4")]
        out.append(f"| {key[0]:g} MiB | {key[1]} | " + " | ".join(cells) + " |")
    stream = sec["rows"]["stream"]
    out += ["", "| stream layer without the network | 1 thread GB/s | x raw kernel | 2 threads GB/s |",
            "| --- | --- | --- | --- |"]
    for r in stream:
        if r["path"] == "stream layer":
            out.append(f"| {r['op']} ({r['kernel']}) | {r['gb_per_s_1t']:.2f} | x{r['vs_raw_1t']:.2f} | "
                       f"{r['gb_per_s_2t']:.2f} |")
    return out


def render(report: dict) -> str:
    nat = report["environment"]["native"]
    lines = [f"Run of `{report['command']}` on {report['started'][:10]}, CPU {nat['cpu']} "
             f"({', '.join(nat['features'])}), kernels " + ", ".join(
                 f"{v}: {k}" for v, k in nat["selected"].items()) + "."]
    for name, fn in (("aead", _aead), ("keyring", _keyring), ("columns", _columns), ("objects", _objects)):
        sec = report["sections"].get(name)
        if sec and sec.get("status") == "ok":
            lines += ["", f"**{name}**", ""] + fn(sec)
        elif sec:
            lines += ["", f"**{name}**: not run ({sec.get('reason')})"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.stdout.write(render(json.load(f)))
