"""Print the instruction mix of the aarch64 kernels' message loop (sealstore.bench.inner_loop)
as a Markdown table, built from this source tree: per 64 bytes of message, against the
minimum the algorithm needs; with a libaegis source tree, its armcrypto kernels compiled and
counted the same way beside them.

    python tools/inner_loop.py [--libaegis PATH]   (PATH defaults to $SEALSTORE_LIBAEGIS_SRC)

Needs aarch64-linux-gnu-gcc and aarch64-linux-gnu-objdump (or an aarch64 host); exit 2 without.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from sealstore.bench import inner_loop

ROOT = Path(__file__).resolve().parent.parent


def table(rows: list[dict]) -> str:
    cols = [c for c in inner_loop.CLASSES]
    out = ["| kernel | " + " | ".join(cols) + " | loop insns | bytes/iter |"]
    out.append("|" + "---|" * (len(cols) + 3))
    for family in dict.fromkeys(r.get("family", "AEGIS-128") for r in rows):
        mins = [str(inner_loop.MINIMUMS[family].get(c, "-")) for c in cols]
        out.append(f"| minimum, {family} | " + " | ".join(mins) + " | | |")
    for r in rows:
        cells = [f"{r['per_64_bytes'][c]:g}" for c in cols]
        name = f"{r['implementation']} {r['variant']} {r['direction']}"
        out.append(
            f"| {name} | " + " | ".join(cells) + f" | {r['loop_instructions']} | "
            f"{r['bytes_per_iteration']} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libaegis", type=Path, default=inner_loop.libaegis_tree(), metavar="PATH")
    args = ap.parse_args(argv)
    why = inner_loop.available()
    if why:
        print(f"inner_loop: {why}", file=sys.stderr)
        return 2
    rows = inner_loop.measure(ROOT / "native")
    if args.libaegis is not None:
        try:
            rows += inner_loop.measure_libaegis(args.libaegis)
        except (OSError, subprocess.CalledProcessError, ValueError) as e:
            print(f"inner_loop: libaegis: {getattr(e, 'stderr', None) or e}", file=sys.stderr)
            return 2
    print(table(rows))
    print(f"\ncompiler: {rows[0]['compiler']}; per 64 bytes of message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
