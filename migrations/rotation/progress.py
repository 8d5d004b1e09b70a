"""Progress for long jobs: a rich progress bar on a terminal, plain log lines otherwise.

A reporter has ``start(label, total)``, ``update(done)`` (absolute count) and ``finish()``.
:func:`make_progress` picks one: ``"bar"`` (rich: rows done, rows per second, ETA) when the
stream is a TTY, ``"log"`` (one line every ``interval`` seconds with the same figures)
otherwise, or ``"none"``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

__all__ = ["BarProgress", "LogProgress", "Progress", "make_progress"]


class Progress(Protocol):
    """What the workers report to (see the module docstring)."""

    def start(self, label: str, total: int | None) -> None: ...

    def update(self, done: int) -> None: ...

    def finish(self) -> None: ...


def _eta(done: int, total: int | None, rate: float) -> str:
    if not total or rate <= 0 or done >= total:
        return "-"
    seconds = int((total - done) / rate)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


class LogProgress:
    """Plain lines: ``label: done/total rows (pct), rate rows/s, ETA h:mm:ss``."""

    def __init__(
        self,
        stream: TextIO | None = None,
        interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.interval = interval
        self.clock = clock
        self.label: str = ""
        self.total: int | None = None
        self.done: int = 0
        self._t0 = self._last = 0.0
        self._done0 = 0

    def start(self, label: str, total: int | None) -> None:
        self.label, self.total = label, total
        self._t0 = self._last = self.clock()
        self.done = self._done0 = 0
        self._started = False

    def update(self, done: int) -> None:
        if not self._started:  # the first figure may come from a job other workers began
            self._started = True
            self._done0 = done
        self.done = done
        now = self.clock()
        if now - self._last >= self.interval:
            self._last = now
            self._line(now)

    def _line(self, now: float) -> None:
        elapsed = max(now - self._t0, 1e-9)
        rate = (self.done - self._done0) / elapsed
        if self.total:
            pct = 100.0 * min(self.done, self.total) / self.total
            size = f"{self.done}/{self.total} rows ({pct:.1f}%)"
        else:
            size = f"{self.done} rows"
        eta = _eta(self.done, self.total, rate)
        print(
            f"{self.label}: {size}, {rate:,.0f} rows/s, ETA {eta}",
            file=self.stream,
            flush=True,
        )

    def finish(self) -> None:
        self._line(self.clock())


class BarProgress:
    """A rich progress bar (rows done, rows per second, ETA)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        class _Rate(TextColumn):
            def render(self, task):  # rows per second since the bar started
                speed = task.speed
                return super().render(task) if speed is None else f"{speed:,.0f} rows/s"

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            _Rate(""),
            TimeRemainingColumn(),
            console=Console(file=stream if stream is not None else sys.stderr),
        )
        self._task: Any = None

    def start(self, label: str, total: int | None) -> None:
        self._progress.start()
        self._task = self._progress.add_task(label, total=total)

    def update(self, done: int) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=done)

    def finish(self) -> None:
        self._progress.stop()
        self._task = None


class _NoProgress:
    def start(self, label: str, total: int | None) -> None:
        pass

    def update(self, done: int) -> None:
        pass

    def finish(self) -> None:
        pass


def make_progress(
    mode: str = "auto", stream: TextIO | None = None, interval: float = 5.0
) -> LogProgress | BarProgress | _NoProgress:
    """A reporter for ``mode``: ``auto`` (bar on a TTY, else log), ``bar``, ``log``, ``none``."""
    stream = stream if stream is not None else sys.stderr
    if mode == "auto":
        mode = "bar" if getattr(stream, "isatty", lambda: False)() else "log"
    if mode == "bar":
        return BarProgress(stream)
    if mode == "log":
        return LogProgress(stream, interval)
    if mode == "none":
        return _NoProgress()
    raise ValueError(f"progress mode must be auto, bar, log or none, not {mode!r}")
