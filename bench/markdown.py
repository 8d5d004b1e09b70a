"""Turn a ``sealstore bench --json`` report into the Markdown tables the README shows.

    python -m sealstore.bench.markdown docs/bench/REPORT.json

The README's figures are pasted from this output, never typed by hand.  The tables are the
grids ``sealstore bench`` prints (``sealstore.bench.grids``).
"""

from __future__ import annotations

from typing import Any

import json
import sys

from . import grids


def _table(g: grids.Grid) -> list[str]:
    out = [f"{g.title}:", "", "| " + " | ".join(g.header) + " |", "|" + " --- |" * len(g.header)]
    out += ["| " + " | ".join(row) + " |" for row in g.rows]
    return out + ([""] + g.notes if g.notes else [])


def render(report: dict[str, Any]) -> str:
    nat = report["environment"]["native"]
    lines = [
        f"Run of `{report['command']}` on {report['started'][:10]}, CPU {nat['cpu']} "
        f"({', '.join(nat['features'])}), kernels "
        + ", ".join(f"{v}: {k}" for v, k in nat["selected"].items())
        + "."
    ]
    for name, sec in report["sections"].items():
        if sec.get("status") != "ok":
            lines += ["", f"**{name}**: {sec.get('status')} ({sec.get('reason')})"]
            continue
        lines += ["", f"**{name}**"]
        for g in grids.SECTIONS[name](sec):
            lines += [""] + _table(g)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as _report:
        sys.stdout.write(render(json.load(_report)))
