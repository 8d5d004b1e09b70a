"""``sealstore bench``: the at-rest throughput benchmark, every section side by side.

    sealstore bench [--quick] [--only aead,keyring,columns,objects] [--kernels all]
                    [--db URL] [--s3-endpoint URL] [--json PATH] [--plot PATH]

Runs on embedded defaults with nothing to set up (SQLite in a temporary directory, an
in-process moto S3 server on 127.0.0.1, the C harness compiled from the installed package's
own kernel sources); ``pip install "sealstore[bench]"`` brings everything the sections use.
Every figure is a median of repeated runs with its spread, every comparison a ratio measured
in this run.  A section that cannot run, or fails, says why and the others still run; the JSON
is rewritten after every section.  Exit status: 0 when every section ran, 1 when one did not,
2 for a usage error.  JSON fields: docs/BENCH.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import argparse
import importlib
import json
import platform
import sys
import time
from datetime import datetime, timezone

from . import grids
from .progress import Reporter

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA = "sealstore.bench/1"
SECTIONS = {
    "aead": "sealstore.bench.aead",
    "keyring": "sealstore.bench.keyring_bench",
    "columns": "sealstore.bench.columns_bench",
    "objects": "sealstore.bench.objects_bench",
}
EXTRA_HINT = "pip install 'sealstore[bench]'"


class Unavailable(Exception):
    """A section cannot run here (a missing server, extra or tool); the message says why and
    how to enable it."""


class _Parser(argparse.ArgumentParser):
    """A usage error is one line and exit 2, as every other ``sealstore`` command's."""

    def error(self, message: str) -> NoReturn:
        first = message.splitlines()[0] if message else "bad arguments"
        self.exit(2, f"{self.prog}: error: {first} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    paragraphs = __doc__.split("\n\n")
    p = _Parser(
        prog="sealstore bench",
        description=paragraphs[0] + "\n\n" + paragraphs[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help="small sizes and short budgets (about a minute)"
    )
    p.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {', '.join(SECTIONS)})",
    )
    p.add_argument(
        "--kernels",
        choices=("selected", "all"),
        default="selected",
        help="AEAD section: the selected kernel per variant, or every runnable one",
    )
    p.add_argument(
        "--db", metavar="URL", help="columns section: a SQLAlchemy URL (default: SQLite)"
    )
    p.add_argument(
        "--s3-endpoint",
        metavar="URL",
        help="objects section: an S3-compatible endpoint (default: in-process moto)",
    )
    p.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of the results (needs matplotlib)")
    return p


def _preflight(opts: argparse.Namespace) -> list[str]:
    """Usage errors and missing tools found before anything is measured (exit 2)."""
    wanted = [s.strip() for s in opts.only.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown or not wanted:
        raise SystemExit(
            f"sealstore bench: error: unknown section(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(SECTIONS)}"
        )
    if opts.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit(
                f"sealstore bench: error: --plot needs matplotlib: {EXTRA_HINT}"
            ) from None
    return wanted


def environment() -> dict[str, Any]:
    """CPU, features, selected kernels and library versions for the report header."""
    from sealstore import __version__, native

    versions: dict[str, str | None] = {
        "sealstore": __version__,
        "python": platform.python_version(),
    }
    for mod in ("cryptography", "sqlalchemy", "boto3", "cffi", "moto"):
        try:
            versions[mod] = importlib.import_module(mod).__version__
        except Exception:  # noqa: BLE001 - report what is there
            versions[mod] = None
    try:
        from cryptography.hazmat.backends.openssl.backend import backend

        versions["openssl"] = backend.openssl_version_text()
    except Exception:  # noqa: BLE001
        versions["openssl"] = None
    return {"native": native.info(), "versions": versions}


def _one_section(name: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Run one section; a failure becomes its status and reason, never the end of the run."""
    try:
        module = importlib.import_module(SECTIONS[name])
        result = module.section(opts)
        result["status"] = "ok"
    except Unavailable as e:
        result = {"status": "unavailable", "reason": str(e)}
    except ModuleNotFoundError as e:
        result = {"status": "unavailable", "reason": f"needs the {e.name} module: {EXTRA_HINT}"}
    except KeyboardInterrupt:
        result = {"status": "failed", "reason": "interrupted"}
    except Exception as e:  # noqa: BLE001 - reported, and the next section runs
        result = {"status": "failed", "reason": f"{type(e).__name__}: {str(e)[:500]}"}
    return result


def run(
    opts: argparse.Namespace,
    reporter: Reporter | None = None,
    on_start: Callable[[dict[str, Any]], None] | None = None,
    on_section: Callable[[dict[str, Any], str], None] | None = None,
) -> dict[str, Any]:
    """Every wanted section in turn: ``on_start(report)`` before the first, ``on_section(report,
    name)`` after each one."""
    wanted = _preflight(opts)
    reporter = reporter or Reporter(len(wanted))
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "sealstore bench "
        + " ".join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:]),
        "quick": bool(opts.quick),
        "environment": environment(),
        "sections": {},
    }
    if on_start:
        on_start(report)
    with reporter:
        for name in wanted:
            reporter.start(name)
            opts.progress = reporter.case
            t0 = time.perf_counter()
            result = _one_section(name, opts)
            result["seconds"] = round(time.perf_counter() - t0, 2)
            report["sections"][name] = result
            reporter.finish(name, result)
            if on_section:
                on_section(report, name)
            if result.get("reason") == "interrupted":
                break
    return report


def render_header(report: dict[str, Any], console: Console) -> None:
    """The run's command, CPU, kernels and library versions."""
    env = report["environment"]
    nat = env["native"]
    console.print(f"[bold]sealstore bench[/bold]  {report['started']}  `{report['command']}`")
    console.print(
        f"CPU: {nat['cpu']} ({nat['machine']}), features: {', '.join(nat['features']) or 'none'}"
    )
    console.print(
        "kernels: "
        + ", ".join(f"{v} -> {k}" for v, k in nat["selected"].items())
        + (f"  (forced {nat['forced']})" if nat["forced"] else "")
    )
    console.print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v))


def render_section(name: str, sec: dict[str, Any], console: Console) -> None:
    """One section's tables and notes (or why it did not run)."""
    from rich.table import Table

    if sec["status"] != "ok":
        console.print(f"\n[bold]{name}[/bold]: {sec['status']}: {sec['reason']}")
        return
    console.print(f"\n[bold]{name}[/bold] ({sec['seconds']:.0f} s)")
    for g in grids.SECTIONS[name](sec):
        t = Table(title=g.title, title_justify="left")
        for i, head in enumerate(g.header):
            t.add_column(head, justify="left" if i == 0 else "right")
        for row in g.rows:
            t.add_row(*row)
        console.print(t)
        for note in g.notes:
            console.print(f"  {note}")
    for note in sec.get("notes", []):
        console.print(f"  {note}")


def render_summary(report: dict[str, Any], console: Console) -> None:
    """One line: each section's status."""
    parts = []
    for name, sec in report["sections"].items():
        parts.append(
            f"{name} {sec['status']}" + ("" if sec["status"] == "ok" else f" ({sec['reason']})")
        )
    console.print("\nsections: " + "; ".join(parts))


def _write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    opts = build_parser().parse_args(argv)
    try:
        wanted = _preflight(opts)
    except SystemExit as e:
        print(e.code, file=sys.stderr)
        return 2
    console = Console(width=max(120, Console().width))
    reporter = Reporter(len(wanted), console=console)

    def on_section(report, name):
        render_section(name, report["sections"][name], console)
        if opts.json:
            _write_json(report, opts.json)

    report = run(
        opts, reporter, on_start=lambda r: render_header(r, console), on_section=on_section
    )
    render_summary(report, console)
    ok = all(sec["status"] == "ok" for sec in report["sections"].values())
    if opts.plot:
        from .plot import plot

        try:
            plot(report, opts.plot)
        except ValueError as e:  # nothing that can be plotted ran
            print(f"sealstore bench: --plot: {e}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
