"""``sealstore bench``: the at-rest throughput benchmark, every section side by side.

    sealstore bench [--quick] [--only aead,keyring,columns,objects] [--kernels all]
                    [--db URL] [--s3-endpoint URL] [--json PATH] [--plot PATH]

Runs on embedded defaults with nothing to set up (SQLite in a temporary directory, an
in-process moto S3 server on 127.0.0.1).  Every figure is a median of repeated runs with its
spread, every comparison a ratio measured in this run.  A section that cannot run says why
in the report instead of showing zeros.  JSON fields: docs/BENCH.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from datetime import datetime, timezone

SCHEMA = "sealstore.bench/1"
SECTIONS = {
    "aead": "sealstore.bench.aead",
    "keyring": "sealstore.bench.keyring_bench",
    "columns": "sealstore.bench.columns_bench",
    "objects": "sealstore.bench.objects_bench",
}


class Unavailable(Exception):
    """A section cannot run here (a missing server, extra or tool); the message says why."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sealstore bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes and short budgets (< 30 s)")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated sections to run (default: all of {', '.join(SECTIONS)})")
    p.add_argument("--kernels", choices=("selected", "all"), default="selected",
                   help="AEAD section: the selected kernel per variant, or every runnable one")
    p.add_argument("--db", metavar="URL", help="columns section: a SQLAlchemy URL (default: SQLite)")
    p.add_argument("--s3-endpoint", metavar="URL",
                   help="objects section: an S3-compatible endpoint (default: in-process moto)")
    p.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of the results (needs matplotlib)")
    return p


def environment() -> dict:
    """CPU, features, selected kernels and library versions for the report header."""
    from sealstore import __version__, native

    versions = {"sealstore": __version__, "python": platform.python_version()}
    for mod in ("cryptography", "sqlalchemy", "boto3", "cffi"):
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


def run(opts, console=None) -> dict:
    from rich.console import Console
    from rich.progress import Progress

    console = console or Console(stderr=True)
    wanted = [s.strip() for s in opts.only.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"sealstore bench: unknown section(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(SECTIONS)}")
    report = {
        "schema": SCHEMA,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "sealstore bench " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:]),
        "quick": bool(opts.quick),
        "environment": environment(),
        "sections": {},
    }
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("benchmark", total=len(wanted))
        for name in wanted:
            progress.update(task, description=f"{name}")
            t0 = time.perf_counter()
            try:
                module = importlib.import_module(SECTIONS[name])
                if not hasattr(module, "section"):
                    raise Unavailable(f"{SECTIONS[name]} has no section() entry point yet")
                result = module.section(opts)
                result["status"] = "ok"
            except ModuleNotFoundError as e:
                result = {"status": "unavailable", "reason": f"missing module: {e.name}"}
            except Unavailable as e:
                result = {"status": "unavailable", "reason": str(e)}
            result["seconds"] = round(time.perf_counter() - t0, 2)
            report["sections"][name] = result
            progress.advance(task)
    return report


def render(report: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=max(120, Console().width))
    env = report["environment"]
    nat = env["native"]
    console.print(f"[bold]sealstore bench[/bold]  {report['started']}  `{report['command']}`")
    console.print(f"CPU: {nat['cpu']} ({nat['machine']}), features: {', '.join(nat['features']) or 'none'}")
    console.print("kernels: " + ", ".join(f"{v} -> {k}" for v, k in nat["selected"].items())
                  + (f"  (forced {nat['forced']})" if nat["forced"] else ""))
    console.print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v))
    for name, sec in report["sections"].items():
        if sec["status"] != "ok":
            console.print(f"\n[bold]{name}[/bold]: not run: {sec['reason']}")
            continue
        for table in sec.get("tables", []):
            t = Table(title=f"{name}: {table['title']}", title_justify="left")
            for head, _key, _fmt in table["columns"]:
                t.add_column(head)
            for row in table["rows"]:
                t.add_row(*[_fmt_cell(row.get(key), fmt) for _head, key, fmt in table["columns"]])
            console.print(t)
        for note in sec.get("notes", []):
            console.print(f"  {note}")


def _fmt_cell(value, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "pct":
        return f"{100 * value:.0f}%"
    if fmt == "ratio":
        return f"x{value:.2f}"
    if fmt:
        return format(value, fmt)
    return str(value)


def main(argv=None) -> int:
    opts = build_parser().parse_args(argv)
    report = run(opts)
    render(report)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    if opts.plot:
        from .plot import plot

        try:
            plot(report, opts.plot)
        except ImportError:
            print("--plot needs matplotlib: pip install 'sealstore[bench]'", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
