"""Progress of an object rotation (``sealstore s3 rotate``): a rich bar (objects done of the total, rate, ETA) on
a terminal, one line per changed object otherwise.

A reporter is called as ``reporter(report, key, outcome)`` after each object (the
``progress`` callback of :func:`~sealstore.adapters.objects.rotation.rotate_objects`) and closed
with ``close()``.  :func:`make_object_progress` picks one for a mode: ``bar`` (stderr, needs
the total: count it first with :func:`~sealstore.adapters.objects.rotation.pending_objects`),
``lines`` (changed objects on ``out``; ``verbose``: every object), ``none``; ``auto`` is
``bar`` when ``err`` is a terminal and rich is installed, else ``lines``.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, TextIO

__all__ = ["BAR_MODES", "ObjectBar", "ObjectLines", "make_object_progress", "wants_bar"]

#: the ``--progress`` choices
BAR_MODES = ("auto", "bar", "lines", "none")
_QUIET = ("current", "not_sealed")  # outcomes listed only with --verbose


class ObjectLines:
    """``outcome  key`` for every object that changed (every object with ``verbose``)."""

    def __init__(self, out: TextIO | None = None, verbose: bool = False) -> None:
        self.out: TextIO = out if out is not None else sys.stdout
        self.verbose = verbose

    def __call__(self, report: Any, key: str, outcome: str) -> None:
        if outcome not in _QUIET or self.verbose:
            print(f"{outcome:>16}  {key}", file=self.out, flush=True)

    def close(self) -> None:
        pass


class ObjectBar:
    """A rich progress bar on ``err``: objects done / total, objects per second, ETA; the
    objects that changed are printed above it (on ``err`` too)."""

    def __init__(
        self, total: int, err: TextIO | None = None, verbose: bool = False, label: str = "rotate"
    ) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.verbose = verbose
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=err if err is not None else sys.stderr),
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=total, rate="")

    def __call__(self, report: Any, key: str, outcome: str) -> None:
        if outcome not in _QUIET or self.verbose:
            self._progress.console.print(f"{outcome:>16}  {key}", markup=False, highlight=False)
        task = self._progress.tasks[0]
        rate = "" if task.speed is None else f"{task.speed:,.1f} objects/s"
        self._progress.update(self._task, advance=1, rate=rate)

    def close(self) -> None:
        self._progress.stop()


def wants_bar(mode: str, err: TextIO | None = None, *, json_output: bool = False) -> bool:
    """Whether ``mode`` shows the bar (never with JSON output; ``auto``: on a terminal, when
    rich is installed)."""
    if json_output or mode in ("lines", "none"):
        return False
    if mode == "bar":
        return True
    err = err if err is not None else sys.stderr
    tty = getattr(err, "isatty", lambda: False)()
    return bool(tty) and importlib.util.find_spec("rich") is not None


def make_object_progress(
    mode: str,
    total: int | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    verbose: bool = False,
    json_output: bool = False,
) -> ObjectLines | ObjectBar | _Silent:
    """The reporter for ``mode`` (see the module docstring); ``total`` is needed for the bar."""
    if mode not in BAR_MODES:
        raise ValueError(f"progress mode must be one of {', '.join(BAR_MODES)}, not {mode!r}")
    if json_output or mode == "none":
        return _Silent()
    if wants_bar(mode, err):
        if total is None:
            raise ValueError("the progress bar needs the total (pending_objects)")
        return ObjectBar(total, err, verbose)
    return ObjectLines(out, verbose)


class _Silent:
    def __call__(self, report: Any, key: Any, outcome: Any) -> None:
        pass

    def close(self) -> None:
        pass
