"""``sealstore bench`` as the console script knows it (an entry point of ``sealstore.programs``):
the benchmark itself, and its imports, load only when it runs (sealstore.bench.run)."""

from __future__ import annotations

import sys

from sealstore.errors import MissingExtra
from sealstore.extras import require


def bench(argv: list[str]) -> int:
    # rich draws every table and the progress: without it nothing runs (a line naming the
    # extra, not a traceback).  A section's own modules (sqlalchemy, boto3, moto, ...) are the
    # section's to check: it says it is unavailable and why, and the other sections run.
    try:
        require("bench", "sealstore bench", ("rich",))
    except MissingExtra as exc:
        print(f"sealstore bench: error: {exc}", file=sys.stderr)
        return 1
    from .run import main

    return main(argv)


setattr(bench, "help", "the at-rest throughput benchmark (sealstore bench --help)")
# what it cannot run without: the console script lists it only where it is installed
setattr(bench, "needs", ("bench", ("rich",)))
