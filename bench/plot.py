"""``sealstore bench --plot PATH``: one PNG of a report (matplotlib, the ``bench`` extra).

Left: AEAD encryption throughput against message size per algorithm (log-log), the kernel
in the label and the CPU in the title.  Right: rows/s of the column paths and MB/s of the S3
objects, as bars per variant, when those sections ran.
"""

from __future__ import annotations

from typing import Any


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sections = report["sections"]
    panels = [
        name
        for name in ("aead", "columns", "objects")
        if sections.get(name, {}).get("status") == "ok"
    ]
    if not panels:
        raise ValueError("nothing to plot: no section of aead, columns, objects ran")
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    for ax, name in zip(axes[0], panels):
        {"aead": _aead, "columns": _columns, "objects": _objects}[name](ax, sections[name])
    nat = report["environment"]["native"]
    fig.suptitle(f"sealstore bench, {nat['cpu']} ({report['started']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _aead(ax, sec):
    series: dict[str, list] = {}
    for r in sec["rows"]:
        if r["op"] != "encrypt" or r["algorithm"] == "memcpy":
            continue
        label = (
            r["algorithm"]
            if r["kernel"] in ("openssl", "-")
            else f"{r['algorithm']} ({r['kernel']})"
        )
        series.setdefault(label, []).append((r["size"], r["gbps"]))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("encrypt GB/s (median)")
    ax.set_title("AEAD encryption")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _bars(ax, groups, variants, values, ylabel, title):
    width = 0.8 / max(1, len(variants))
    for i, variant in enumerate(variants):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [values.get((grp, variant), 0) for grp in groups], width, label=variant)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=8, rotation=25, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def _columns(ax, sec):
    groups = list(dict.fromkeys(r["path"] for r in sec["rows"]))
    variants = list(dict.fromkeys(r["variant"] for r in sec["rows"]))
    values = {(r["path"], r["variant"]): r["rows_per_s"] for r in sec["rows"]}
    _bars(ax, groups, variants, values, "rows/s (median)", f"columns ({sec.get('db', '')})")


def _objects(ax, sec):
    rows = sec["rows"]["s3"] if isinstance(sec["rows"], dict) else []
    groups = list(dict.fromkeys(f"{r['op']} {r['size_mib']:g} MiB" for r in rows))
    variants = list(dict.fromkeys(r["suite"] for r in rows))
    values = {(f"{r['op']} {r['size_mib']:g} MiB", r["suite"]): r["mb_per_s"] for r in rows}
    _bars(ax, groups, variants, values, "MB/s (median)", "S3 objects")
