"""sealstore.migrations.rotation.progress: a rich bar on a terminal, log lines otherwise."""

from __future__ import annotations

import io

import pytest
from sealstore.migrations.rotation.progress import BarProgress, LogProgress, make_progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_every_interval_with_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    p = LogProgress(out, interval=5.0, clock=clock)
    p.start("rotate users.ssn", 1000)
    clock.now += 1
    p.update(100)  # within the interval: nothing yet
    assert out.getvalue() == ""
    clock.now += 4
    p.update(250)
    clock.now += 5
    p.update(500)
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines == [
        "rotate users.ssn: 250/1000 rows (25.0%), 30 rows/s, ETA 0:00:25",
        "rotate users.ssn: 500/1000 rows (50.0%), 40 rows/s, ETA 0:00:12",
        "rotate users.ssn: 500/1000 rows (50.0%), 40 rows/s, ETA 0:00:12",
    ]


def test_log_counts_from_the_first_figure_when_joining_a_running_job():
    out, clock = io.StringIO(), Clock()
    p = LogProgress(out, interval=0.0, clock=clock)
    p.start("rotate t.c", None)
    p.update(5000)  # other workers did these before this one joined
    clock.now += 10
    p.update(5600)
    assert out.getvalue().splitlines()[-1] == "rotate t.c: 5600 rows, 60 rows/s, ETA -"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_make_progress_picks_bar_on_a_terminal():
    assert isinstance(make_progress("auto", FakeTTY()), BarProgress)
    assert isinstance(make_progress("auto", io.StringIO()), LogProgress)
    assert isinstance(make_progress("log", FakeTTY()), LogProgress)
    with pytest.raises(ValueError, match="auto, bar, log or none"):
        make_progress("fancy")


def test_bar_shows_rows_and_rate():
    out = FakeTTY()
    p = make_progress("bar", out)
    p.start("rotate t.c", 10)
    p.update(10)
    p.finish()
    text = out.getvalue()
    assert "rotate t.c" in text and "10/10" in text
