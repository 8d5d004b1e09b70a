"""What building ``sealstore._speedups`` against the limited API (abi3) costs per call.

    python -m sealstore.bench.limited_api [--rounds 20] [--budget 0.1] [--json PATH]
    python -m sealstore.bench.limited_api --baseline REV [...]

Builds the extension twice from the source tree (``native/build_speedups.py``: against the
full API of this interpreter and against the limited API), then runs rounds of child
processes, one per build, in alternating order (base, new; new, base; ...).  Each child loads
its build as ``sealstore._speedups`` before sealstore is imported, so the public API runs on
it, and measures the 64-byte calls: the aead bench's cases (``AEGIS-128X4`` ``encrypt``,
``encrypt_into``, ``decrypt``, ``decrypt_into``, and the cffi path, which does not go through
``_speedups`` and shows the noise), ``Keyring.seal``/``open`` of a 64-byte value,
``seal_many``/``open_many`` of 100 of them, and a column's ``named_sealer``/``named_opener``
(ASCII text).  Each figure is the median of batches (``timing.measure``); the table gives, per
call, the median over the rounds for each build, their ratio, and the median of the rounds'
own ratios.  Issue 19's rule: the abi3 build would be kept if every ratio were within 5%
(docs/BENCH.md, "The limited API", has the figures and the decision).

``--baseline REV`` compares instead the full-API build of git revision REV's
``native/python`` (base) with this tree's (new): what a change of the sources costs the
package's own build.

It needs the source tree (a checkout or an editable install): the installed package does not
carry ``native/python``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sealstore import AEGIS128X4, Keyring
from sealstore import aead as public_aead
from sealstore.format import column_context
from sealstore.keyring import named_opener, named_sealer, use_keyring

from . import aead as aead_bench
from .cbuild import HarnessUnavailable
from .timing import measure

ROOT = Path(__file__).resolve().parents[1]
SIZE = 64
LIMIT = 1.05  # issue 19: within 5%
CONTROL = "encrypt (cffi path)"  # no _speedups in it: the two builds differ by noise only

# Run in a child: load the build at argv[1] as sealstore._speedups, then measure.
CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("sealstore._speedups", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules["sealstore._speedups"] = mod
spec.loader.exec_module(mod)
from sealstore.bench.limited_api import child
child(sys.argv[1], float(sys.argv[2]))
"""

BUILD = """
import sys
sys.path.insert(0, sys.argv[1])
import build_speedups
from setuptools import Distribution
ext = build_speedups.extension(sys.argv[2] == "limited", root=sys.argv[3])
dist = Distribution({"name": "speedups-" + sys.argv[2], "ext_modules": [ext]})
cmd = dist.get_command_obj("build_ext")
cmd.build_lib, cmd.build_temp = sys.argv[4] + "/lib", sys.argv[4] + "/tmp"
cmd.ensure_finalized()
cmd.run()
print(cmd.get_ext_fullpath(ext.name))
"""


def build(kind: str, root: Path, out: Path) -> Path:
    """Build ``_speedups`` (``full`` or ``limited``) from the tree at ``root`` under ``out``;
    the path of the module."""
    native = root / "native"
    if not (native / "build_speedups.py").is_file() or not (native / "python").is_dir():
        raise HarnessUnavailable(
            "the limited-API comparison builds from the source tree (native/python): run it "
            "from a checkout or an editable install"
        )
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(native), kind, str(root), str(out)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if proc.returncode != 0:
        raise HarnessUnavailable(f"building the {kind} _speedups failed:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def baseline_tree(rev: str, tmp: Path) -> Path:
    """A copy of this tree's ``native/`` with ``native/python`` as it is at git revision
    ``rev``; the root of the copy."""
    root = tmp / "baseline"
    shutil.copytree(ROOT / "native", root / "native", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(root / "native" / "python")
    (root / "native" / "python").mkdir()
    git = ["git", "-C", str(ROOT)]
    names = subprocess.run(
        [*git, "ls-tree", "--name-only", f"{rev}:native/python"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        text = subprocess.run(
            [*git, "show", f"{rev}:native/python/{name}"], capture_output=True, check=True
        ).stdout
        (root / "native" / "python" / name).write_bytes(text)
    return root


def cases(add: Callable[[str, Callable[[], object], float], None], budget: float) -> None:
    """The 64-byte calls through the public API, each given to ``add(op, fn, budget)``."""
    cipher = AEGIS128X4(AEGIS128X4.generate_key(), 16)
    data, ad = os.urandom(SIZE), os.urandom(16)
    aead_bench._kernel_cases(
        lambda _v, _k, op, _s, fn, b: add(op, fn, b), "", cipher, data, ad, budget
    )
    ring = Keyring.generate()
    ctx = column_context("bench", "value")
    sealed = ring.seal(data, ctx)
    many = [data] * 100
    sealed_many = ring.seal_many(many, ctx)
    add("Keyring.seal", lambda: ring.seal(data, ctx), budget)
    add("Keyring.open", lambda: ring.open(sealed, ctx), budget)
    add("Keyring.seal_many (100)", lambda: ring.seal_many(many, ctx), budget)
    add("Keyring.open_many (100)", lambda: ring.open_many(sealed_many, ctx), budget)
    name = "bench-limited-api"
    use_keyring(ring, name)
    text = "x" * SIZE
    sealer = named_sealer(name, ctx, ring.seal, raw=str)
    opener = named_opener(name, ctx, ring.open, text=True)
    sealed_text = sealer(text)
    assert opener(sealed_text) == text
    add("named_sealer (str)", lambda: sealer(text), budget)
    add("named_opener (text)", lambda: opener(sealed_text), budget)


def child(path: str, budget: float) -> None:
    """In a child process: check that the public API runs on the build at ``path``, measure,
    print {op: ns per call} as JSON."""
    loaded = sys.modules["sealstore._speedups"]
    assert loaded.__file__ == path and vars(public_aead)["_speedups"] is loaded, "not this build"
    ns: dict[str, float] = {}

    def add(op, fn, b):
        ns[op] = measure(fn, budget=b, repeats=5).median * 1e9

    cases(add, budget)
    print(json.dumps(ns))


def run(
    rounds: int,
    budget: float,
    baseline: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build both, measure ``rounds`` rounds; the JSON-ready result."""
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        if baseline is None:
            builds = {"full": ("full", ROOT), "limited": ("limited", ROOT)}
        else:
            builds = {baseline: ("full", baseline_tree(baseline, tmp)), "tree": ("full", ROOT)}
        paths = {b: build(kind, root, tmp / b) for b, (kind, root) in builds.items()}
        names = list(builds)
        per_round: dict[str, list[dict[str, float]]] = {b: [] for b in names}
        for r in range(rounds):
            for b in names if r % 2 == 0 else names[::-1]:
                proc = subprocess.run(
                    [sys.executable, "-c", CHILD, str(paths[b]), str(budget)],
                    capture_output=True,
                    text=True,
                    cwd=tmp,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"the {b} child failed:\n{proc.stderr[-3000:]}")
                per_round[b].append(json.loads(proc.stdout.splitlines()[-1]))
            if progress:
                progress(f"round {r + 1}/{rounds}")
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "rounds": rounds,
        "budget": budget,
        "builds": {b: {"kind": kind, "file": paths[b].name} for b, (kind, _) in builds.items()},
        "rows": summarize(per_round, *names),
        "per_round": per_round,
    }


def summarize(
    per_round: dict[str, list[dict[str, float]]], base: str, new: str
) -> list[dict[str, Any]]:
    """Per op: the median over rounds for each build, their ratio (new / base), and the median
    of the rounds' own ratios (each round's two children ran back to back)."""
    rows = []
    for op in per_round[base][0]:
        b = [r[op] for r in per_round[base]]
        n = [r[op] for r in per_round[new]]
        rows.append(
            {
                "op": op,
                "base_ns": statistics.median(b),
                "new_ns": statistics.median(n),
                "ratio": statistics.median(n) / statistics.median(b),
                "paired_ratio": statistics.median(y / x for x, y in zip(b, n)),
            }
        )
    return rows


def verdict(rows: list[dict[str, Any]]) -> bool:
    """True when every op but the control is within LIMIT (both ways of taking the ratio)."""
    return all(
        r["ratio"] <= LIMIT and r["paired_ratio"] <= LIMIT for r in rows if r["op"] != CONTROL
    )


def render(result: dict[str, Any]) -> str:
    (base, bb), (new, nb) = result["builds"].items()
    lines = [
        f"Python {result['python']} ({result['machine']}), {result['rounds']} rounds; "
        f"base {base} ({bb['file']}), new {new} ({nb['file']})",
        f"{'64-byte call':<26}{'base ns':>10}{'new ns':>10}{'ratio':>8}{'paired':>8}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['op']:<26}{r['base_ns']:>10.1f}{r['new_ns']:>10.1f}"
            f"{r['ratio']:>8.3f}{r['paired_ratio']:>8.3f}"
        )
    ok = verdict(result["rows"])
    lines.append(
        f"every call within {LIMIT - 1:.0%}: {'yes' if ok else 'no'} ({CONTROL}: the control)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--budget", type=float, default=0.1, help="seconds per case per child")
    p.add_argument("--baseline", metavar="REV", help="compare REV's full build with this tree's")
    p.add_argument("--json", help="write the result (with every round's figures) here")
    opts = p.parse_args(argv)
    result = run(
        opts.rounds, opts.budget, opts.baseline, progress=lambda s: print(s, file=sys.stderr)
    )
    print(render(result))
    if opts.json:
        Path(opts.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
