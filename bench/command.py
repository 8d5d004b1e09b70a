"""``sealstore bench`` as the console script knows it (an entry point of ``sealstore.programs``):
the benchmark itself, and its imports, load only when it runs (sealstore.bench.run)."""

from __future__ import annotations

import sys

from sealstore.errors import MissingExtra
from sealstore.extras import require


def bench(argv: list[str]) -> int:
    try:  # before its imports: a missing one is a line naming the extra, not a traceback
        require("bench", "sealstore bench")
    except MissingExtra as exc:
        print(f"sealstore bench: error: {exc}", file=sys.stderr)
        return 1
    from .run import main

    return main(argv)


bench.help = "the at-rest throughput benchmark (sealstore bench --help)"
