"""The report's tables as grids: one row per algorithm or variant, one column per size or path.

``sealstore bench`` prints these grids in the terminal (rich) and ``sealstore.bench.markdown``
writes the same grids as the README's Markdown tables, so what a run prints and what the README
shows are one layout.  A cell whose repeats disagree by more than ``NOISY`` of their median is
marked with ``*`` and the grid says so: on a shared machine such a figure needs a rerun.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field

from sealstore.suites import SUITES

NOISY = 0.25  # (high - low) / median above this: the cell is flagged
FLAG = "*"
SIZES = {64: "64 B", 1024: "1 KiB", 16384: "16 KiB", 1 << 20: "1 MiB", 16 << 20: "16 MiB"}
# the cryptography baselines, then the natively run suites in id order
ALGORITHM_ORDER = ("AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305") + tuple(
    s.label for s in SUITES if s.native_variant is not None
)
KERNEL_ORDER = ("openssl", "avx512", "avx2", "aesni", "armcrypto", "portable")


@dataclass
class Grid:
    """A titled table of strings; ``notes`` are printed under it."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def flag_note(self) -> None:
        if any(FLAG in cell for row in self.rows for cell in row):
            self.notes.append(
                f"{FLAG} spread above {NOISY:.0%} between repeats: a noisy machine, "
                "rerun before trusting that figure"
            )


def _noisy(spread) -> str:
    return FLAG if spread is not None and spread > NOISY else ""


def size_name(size: int) -> str:
    return SIZES.get(size) or next(
        (
            f"{size // d} {u}"
            for u, d in (("MiB", 1 << 20), ("KiB", 1 << 10))
            if size >= d and size % d == 0
        ),
        f"{size} B",
    )


def _label(algorithm: str, kernel: str) -> str:
    return algorithm if kernel in ("openssl", "-") else f"{algorithm} ({kernel})"


def _order(key) -> tuple:
    algorithm, kernel = key
    a = ALGORITHM_ORDER.index(algorithm) if algorithm in ALGORITHM_ORDER else len(ALGORITHM_ORDER)
    k = KERNEL_ORDER.index(kernel) if kernel in KERNEL_ORDER else len(KERNEL_ORDER)
    return a, k


def aead(sec: dict[str, Any]) -> list[Grid]:
    rows = sec["rows"]
    sizes = sorted({r["size"] for r in rows})
    grids = []
    for op in ("encrypt", "decrypt"):
        g = Grid(f"{op}, GB/s (x AES-256-GCM of this run)", [op] + [size_name(s) for s in sizes])
        algos = sorted(
            {
                (r["algorithm"], r["kernel"])
                for r in rows
                if r["op"] == op and r["algorithm"] != "memcpy"
            },
            key=_order,
        )
        for algo, kernel in algos:
            cells = []
            for s in sizes:
                r = next(
                    (
                        r
                        for r in rows
                        if (r["algorithm"], r["kernel"], r["op"], r["size"])
                        == (algo, kernel, op, s)
                    ),
                    None,
                )
                ratio = r and r.get("speedup_vs_aes256gcm")
                cells.append(
                    "-"
                    if r is None
                    else f"{r['gbps']:.2f}"
                    + (f" (x{ratio:.2f})" if ratio else "")
                    + _noisy(r["spread"])
                )
            g.rows.append([_label(algo, kernel)] + cells)
        if op == "encrypt":
            copy = {r["size"]: r for r in rows if r["algorithm"] == "memcpy"}
            g.rows.append(
                ["memory copy (no ratio)"]
                + [
                    f"{copy[s]['gbps']:.2f}{_noisy(copy[s]['spread'])}" if s in copy else "-"
                    for s in sizes
                ]
            )
        g.flag_note()
        grids.append(g)
    grids.append(_small_calls(rows))
    if sec.get("versus_libaegis"):
        grids.append(_libaegis(sec["versus_libaegis"]))
    if sec.get("c_harness"):
        grids.append(_harness(sec["c_harness"]["results"]))
        grids.append(_portable_baseline(sec["c_harness"].get("portable_baseline", [])))
    if sec.get("aarch64_loop"):
        grids.append(_aarch64_loop(sec["aarch64_loop"]))
    return [g for g in grids if g.rows]


def _portable_baseline(rows: list[dict[str, Any]]) -> Grid:
    """The portable kernel against its pre-bitsliced baseline, timed round-robin in C."""
    g = Grid(
        "portable kernel vs its pre-bitsliced baseline (kernel_bench.c, round-robin), GB/s",
        ["variant", "op"] + list(dict.fromkeys(SIZES[r["size"]] for r in rows)),
    )
    for variant, op in dict.fromkeys((r["variant"], r["op"]) for r in rows):
        get = {SIZES[r["size"]]: r for r in rows if (r["variant"], r["op"]) == (variant, op)}
        g.rows.append(
            [variant, op]
            + [
                f"{r['portable_gbps']:.3f} vs {r['baseline_gbps']:.3f} (x{r['speedup_median']:.1f})"
                for r in get.values()
            ]
        )
    if rows:
        g.notes.append(
            f"x: median over {rows[0]['reps']} alternating batches of the per-batch speed-up"
        )
    return g


def _aarch64_loop(rows: list[dict[str, Any]]) -> Grid:
    """The armcrypto kernels' message loop per 64 bytes (sealstore.bench.inner_loop)."""
    from .inner_loop import MINIMUMS

    cols = ["aese", "aesmc", "eor", "and", "ld", "st", "stack"]
    g = Grid("aarch64 armcrypto message loop, instructions per 64 bytes", ["kernel", *cols])
    # one minimum row per algorithm family in the rows (rows without one: AEGIS-128)
    families = list(dict.fromkeys(r.get("family", "AEGIS-128") for r in rows))
    for fam in families:
        label = "algorithm minimum" if len(families) == 1 else f"algorithm minimum, {fam}"
        g.rows.append([label, *(str(MINIMUMS[fam][c]) for c in cols)])
    for r in rows:
        mix = r["per_64_bytes"]
        name = f"{r.get('implementation', 'sealstore')} {r['variant']} {r['direction']}"
        g.rows.append([name, *(f"{mix[c]:g}" for c in cols)])
    g.notes.append(f"compiled by {rows[0]['compiler']}; stack = vector spills and reloads")
    for r in rows:
        if r.get("calls"):
            g.notes.append(
                f"{r.get('implementation', 'sealstore')} {r['variant']} {r['direction']}: the loop "
                f"calls {', '.join(r['calls'])} (not inlined), counted with its body"
            )
    return g


def _small_calls(rows: list[dict[str, Any]]) -> Grid:
    ops = list(
        dict.fromkeys(r["op"] for r in rows if r["size"] == 64 and r["algorithm"] != "memcpy")
    )
    g = Grid("64-byte messages, ns per call", ["algorithm"] + ops)
    for algo, kernel in sorted(
        {
            (r["algorithm"], r["kernel"])
            for r in rows
            if r["size"] == 64 and r["algorithm"] != "memcpy"
        },
        key=_order,
    ):
        get = {
            r["op"]: r
            for r in rows
            if (r["algorithm"], r["kernel"], r["size"]) == (algo, kernel, 64)
        }
        g.rows.append(
            [_label(algo, kernel)]
            + [
                f"{get[o]['ns_per_call']:.0f}{_noisy(get[o]['spread'])}" if o in get else "-"
                for o in ops
            ]
        )
    g.flag_note()
    return g


def _libaegis(lib: list[dict[str, Any]]) -> Grid:
    sizes = list(dict.fromkeys(r["size_name"] for r in lib))
    ops = ("encrypt", "decrypt")
    g = Grid(
        "versus libaegis, C level: sealstore GB/s (x libaegis): same run, same buffers, "
        "one C loop, round robin, fastest batches",
        ["kernel"] + [f"{s} {op}" for s in sizes for op in ops],
    )
    for key in dict.fromkeys((r["variant"], r["kernel"]) for r in lib):
        get = {
            (r["size_name"], r.get("op", "encrypt")): r
            for r in lib
            if (r["variant"], r["kernel"]) == key
        }
        g.rows.append(
            [_label(*key)]
            + [
                f"{get[s, op]['sealstore_gbps']:.2f} (x{get[s, op]['ratio']:.2f})"
                if (s, op) in get
                else "-"
                for s in sizes
                for op in ops
            ]
        )
    if any(not r.get("selected", True) for r in lib):
        g.notes.append(
            "libaegis runs its own choice of kernel for this CPU in every row: a sealstore "
            "kernel this CPU does not select is compared with libaegis's best"
        )
    return g


def _harness(results: list[dict[str, Any]]) -> Grid:
    g = Grid(
        "C kernels alone (kernel_bench.c), 16 KiB",
        ["kernel", "encrypt GB/s", "decrypt GB/s", "encrypt TSC cycles/byte"],
    )
    for key in sorted({(r["variant"], r["kernel"]) for r in results}, key=_order):
        e = {r["op"]: r for r in results if (r["variant"], r["kernel"], r["size"]) == (*key, 16384)}
        if "encrypt" in e and "decrypt" in e:
            cpb = e["encrypt"].get("tsc_cycles_per_byte")
            g.rows.append(
                [
                    _label(*key),
                    f"{e['encrypt']['gbps_median']:.2f}",
                    f"{e['decrypt']['gbps_median']:.2f}",
                    "-" if cpb is None else f"{cpb:.3f}",
                ]
            )
    return g


def keyring(sec: dict[str, Any]) -> list[Grid]:
    grids = []
    rows = sec["rows"]
    for size in sorted({r["size"] for r in rows}):
        g = Grid(
            f"{size_name(size)} values, values/s (x AES-256-GCM of this run)",
            ["suite", "seal", "open", "seal_many", "open_many"],
        )
        for suite in dict.fromkeys(r["suite"] for r in rows):
            get = {r["op"]: r for r in rows if r["suite"] == suite and r["size"] == size}
            g.rows.append(
                [suite]
                + [
                    f"{get[o]['values_per_s']:,.0f}"
                    + (f" (x{get[o]['vs_aes256gcm']:.2f})" if suite != "AES-256-GCM" else "")
                    + _noisy(get[o].get("spread"))
                    if o in get
                    else "-"
                    for o in ("seal", "open", "seal_many", "open_many")
                ]
            )
        g.flag_note()
        grids.append(g)
    if sec.get("targets"):
        grids.append(targets(sec["targets"]))
    return grids


def columns(sec: dict[str, Any]) -> list[Grid]:
    rows = sec["rows"]
    paths = list(dict.fromkeys(r["path"] for r in rows))
    g = Grid(
        f"{sec['n']:,} rows (100 B + 1 KiB), {sec['db']}, median of {sec['repeat']}: "
        "rows/s (x plaintext of this run)",
        ["variant"] + paths,
    )
    for variant in dict.fromkeys(r["variant"] for r in rows):
        cells = []
        for p in paths:
            r = next((r for r in rows if r["variant"] == variant and r["path"] == p), None)
            cells.append(
                "-"
                if r is None
                else f"{r['rows_per_s']:,.0f} (x{r['vs_plaintext']:.2f})" + _noisy(r["spread"])
            )
        g.rows.append([variant] + cells)
    g.notes += [f"{variant}: {reason}" for variant, reason in sec.get("unavailable", {}).items()]
    g.flag_note()
    grids = [g]
    if sec.get("targets"):
        grids.append(targets(sec["targets"]))
    return grids


def objects(sec: dict[str, Any]) -> list[Grid]:
    data = sec["rows"]
    grids = []
    if data.get("s3"):
        suites = list(dict.fromkeys(r["suite"] for r in data["s3"]))
        g = Grid(
            f"S3 through {data.get('s3_endpoint')}, MB/s (x plaintext of this run)",
            ["object", "op"] + suites,
        )
        for key in dict.fromkeys((r["size_mib"], r["op"]) for r in data["s3"]):
            get = {r["suite"]: r for r in data["s3"] if (r["size_mib"], r["op"]) == key}
            g.rows.append(
                [f"{key[0]:g} MiB", key[1]]
                + [
                    f"{get[s]['mb_per_s']:.0f}"
                    + ("" if s == "plaintext" else f" (x{get[s]['vs_plaintext']:.2f})")
                    + _noisy(get[s]["spread"])
                    if s in get
                    else "-"
                    for s in suites
                ]
            )
        g.flag_note()
        grids.append(g)
    g = Grid(
        "stream layer without the network, GB/s",
        ["op", "path", "1 thread", "x raw kernel", "2 threads", "2t / 1t"],
    )
    for r in data.get("stream", []):
        vs_raw = f"x{r['vs_raw_1t']:.2f}" if "vs_raw_1t" in r else "-"
        g.rows.append(
            [
                f"{r['op']} ({r['kernel']})",
                r["path"],
                f"{r['gb_per_s_1t']:.2f}{_noisy(r.get('spread_1t'))}",
                vs_raw,
                f"{r['gb_per_s_2t']:.2f}",
                f"x{r['scaling_2t']:.2f}",
            ]
        )
    g.flag_note()
    grids.append(g)
    return [g for g in grids if g.rows]


def targets(items: list[dict[str, Any]]) -> Grid:
    """The goals docs/BENCH.md sets, next to what this run measured (figures, not verdicts)."""
    g = Grid("goals (docs/BENCH.md) and this run", ["measure", "this run", "goal", ""])
    for t in items:
        g.rows.append(
            [t["what"], t["measured"], t["goal"], "reached" if t["reached"] else "not reached"]
        )
    return g


SECTIONS = {"aead": aead, "keyring": keyring, "columns": columns, "objects": objects}
