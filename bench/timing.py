"""Timing helpers shared by the benchmarks: calibrated batches, medians and spreads."""

from __future__ import annotations

import statistics
from collections.abc import Callable
import time
from dataclasses import dataclass


@dataclass
class Sample:
    """Seconds per call over ``repeats`` batches of ``number`` calls."""

    median: float
    low: float
    high: float
    number: int
    repeats: int

    @property
    def spread(self) -> float:
        """(high - low) / median: how noisy the batches were."""
        return (self.high - self.low) / self.median if self.median else 0.0


def measure(
    fn: Callable[[], object], *, budget: float = 0.3, repeats: int = 7, min_number: int = 1
) -> Sample:
    """Time ``fn()``: pick a batch size that takes about ``budget / repeats`` seconds, then
    run ``repeats`` batches and keep the median time per call."""
    per_batch = budget / repeats
    number = min_number
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        dt = time.perf_counter() - t0
        if dt >= per_batch / 2 or number >= 1 << 24:
            break
        number = max(number * 2, int(number * per_batch / max(dt, 1e-9)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return Sample(statistics.median(times), min(times), max(times), number, repeats)
