"""Progress of a ``sealstore bench`` run: a live bar in a terminal, one line per finished case in
a log.

Sections call ``opts.progress(text)`` when a case (a size, a variant's run, an object) is
measured.  In a terminal that text updates the bar under the tables already printed; when
stdout is not a terminal (CI, ``| tee``), each case is a line on stderr with the elapsed time,
so a long run is never silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

import sys
import time

if TYPE_CHECKING:
    from rich.console import Console
    from typing_extensions import Self


class Reporter:
    """The progress of ``sections`` sections on ``console`` (a live bar on a terminal), or
    one line per case on ``stream`` (default stderr) otherwise."""

    def __init__(
        self, sections: int, console: Console | None = None, stream: TextIO | None = None
    ) -> None:
        from rich.console import Console

        self.console: Console = console or Console()
        self.live: bool = self.console.is_terminal
        self.stream: TextIO = stream or sys.stderr
        self.sections = sections
        self._progress: Any = None
        self._task: Any = None
        self._section = ""
        self._t0 = time.perf_counter()

    def __enter__(self) -> Self:
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("benchmark", total=self.sections)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _line(self, text: str) -> None:
        print(f"[{time.perf_counter() - self._t0:7.1f} s] {text}", file=self.stream, flush=True)

    def start(self, section: str) -> None:
        self._section = section
        if self._progress is not None:
            self._progress.update(self._task, description=f"{section}: starting")
        else:
            self._line(f"{section}: started")

    def case(self, text: str) -> None:
        """One case of the current section is measured."""
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self._section}: {text}")
        else:
            self._line(f"{self._section}: {text}")

    def finish(self, section: str, result: dict[str, Any]) -> None:
        """``section`` ended with ``result`` (its status, reason and seconds)."""
        status = result["status"] + ("" if result["status"] == "ok" else f" ({result['reason']})")
        if self._progress is not None:
            self._progress.advance(self._task)
        else:
            self._line(f"{section}: {status} in {result['seconds']:.1f} s")
