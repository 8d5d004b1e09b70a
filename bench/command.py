"""``sealstore bench`` as the console script knows it (an entry point of ``sealstore.programs``):
the benchmark itself, and its imports, load only when it runs (sealstore.bench.run)."""

from __future__ import annotations


def bench(argv: list[str]) -> int:
    from .run import main

    return main(argv)


setattr(bench, "help", "the at-rest throughput benchmark (sealstore bench --help)")
