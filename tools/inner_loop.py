"""Print the instruction mix of the aarch64 kernels' message loop (sealstore.bench.inner_loop)
as a Markdown table, built from this source tree: per 64 bytes of message, against the
minimum the algorithm needs.

    python tools/inner_loop.py

Needs aarch64-linux-gnu-gcc and aarch64-linux-gnu-objdump (or an aarch64 host); exit 2 without.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sealstore.bench import inner_loop

ROOT = Path(__file__).resolve().parent.parent


def table(rows: list[dict]) -> str:
    cols = [c for c in inner_loop.CLASSES]
    out = ["| kernel | " + " | ".join(cols) + " | loop insns | bytes/iter |"]
    out.append("|" + "---|" * (len(cols) + 3))
    mins = [str(inner_loop.MINIMUM.get(c, "-")) for c in cols]
    out.append("| minimum | " + " | ".join(mins) + " | | |")
    for r in rows:
        cells = [f"{r['per_64_bytes'][c]:g}" for c in cols]
        name = f"{r['variant']} {r['direction']}"
        out.append(
            f"| {name} | " + " | ".join(cells) + f" | {r['loop_instructions']} | "
            f"{r['bytes_per_iteration']} |"
        )
    return "\n".join(out)


def main() -> int:
    why = inner_loop.available()
    if why:
        print(f"inner_loop: {why}", file=sys.stderr)
        return 2
    rows = inner_loop.measure(ROOT / "native")
    print(table(rows))
    print(f"\ncompiler: {rows[0]['compiler']}; per 64 bytes of message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
