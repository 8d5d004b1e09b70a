"""mypy over the source tree under the package's import names.

The directories are laid out by layer (``plugin/`` is ``sealstore``, ``adapters/`` is
``sealstore.adapters``, ...: pyproject's ``package-dir``), which mypy cannot map by itself.  This
builds that package as a tree of symlinks in a temporary directory, runs mypy on it with
pyproject's ``[tool.mypy]`` settings (strict on the core and the adapters, mypy's defaults on the
migrations and the bench), and prints the errors with their paths in this tree.  The
extension modules are read from their stubs (``plugin/_native.pyi``, ``plugin/_speedups.pyi``),
so nothing needs to be built or installed first; the third-party libraries are the ones of the
running interpreter.

    python tools/typecheck.py [MYPY ARGS...]        exit status: mypy's
    python tools/typecheck.py --verifytypes [MIN]   pyright --verifytypes on the same tree: the
                                                    share of the public symbols whose type is
                                                    known; exit status 1 below MIN percent
                                                    (default VERIFYTYPES_MIN)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout  # noqa: E402  (tools/layout.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: directory -> where it goes in the package (the core's directory is the package itself):
#: tools/layout.py, from pyproject's package-dir
LAYERS = layout.SUBPACKAGES
CORE = layout.CORE
#: the floor CI holds pyright's completeness score to (issue 19 asks for 95); the score counts
#: every public symbol of every public module, the migrations and the bench included.  At 99.8
#: the only symbols left unknown are ``adapters/s3/body.py``'s ``OpenedBody`` and the function
#: returning it: a subclass of botocore's StreamingBody, and botocore ships no types
VERIFYTYPES_MIN = 99.0


def shadow_tree(dest: str) -> str:
    """``dest/sealstore``: the core's entries, and the other layers' directories beside them."""
    pkg = os.path.join(dest, "sealstore")
    os.mkdir(pkg)
    for name in os.listdir(os.path.join(ROOT, CORE)):
        if name != "__pycache__" and name not in LAYERS.values():
            os.symlink(os.path.join(ROOT, CORE, name), os.path.join(pkg, name))
    for top, name in LAYERS.items():
        os.symlink(os.path.join(ROOT, top), os.path.join(pkg, name))
    return pkg


def verifytypes(tree: str, minimum: float) -> int:
    """pyright's completeness score of the package in ``tree``; 1 when below ``minimum``."""
    cmd = ["pyright", "--pythonpath", sys.executable, "--outputjson"]
    cmd += ["--verifytypes", "sealstore", "--ignoreexternal"]
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)["typeCompleteness"]
    except (ValueError, KeyError):
        sys.stdout.write(proc.stdout + proc.stderr)
        return 2
    for sym in report["symbols"]:
        if not sym["isTypeKnown"] and sym["isExported"]:
            print(sym["name"], "(ambiguous)" if sym["isTypeAmbiguous"] else "")
    counts = report["exportedSymbolCounts"]
    score = 100 * report["completenessScore"]
    print(
        f"public symbols: {counts['withKnownType']} known, {counts['withAmbiguousType']} "
        f"ambiguous, {counts['withUnknownType']} unknown: {score:.1f}% (minimum {minimum}%)"
    )
    return 0 if score >= minimum else 1


def main(argv: list[str]) -> int:
    # a fixed place (mypy's cache stays valid between runs), remade every time
    cache = os.path.join(ROOT, ".mypy_cache")
    tree = os.path.join(cache, "tree")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    shadow_tree(tree)
    if argv[:1] == ["--verifytypes"]:
        return verifytypes(tree, float(argv[1]) if argv[1:] else VERIFYTYPES_MIN)
    cmd = [sys.executable, "-m", "mypy", "--config-file", os.path.join(ROOT, "pyproject.toml")]
    cmd += ["--cache-dir", cache, *argv, "-p", "sealstore"]
    env = dict(os.environ, MYPYPATH=tree)
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    # sealstore/adapters/... -> adapters/...; sealstore/... -> plugin/...
    for top, name in LAYERS.items():
        out = out.replace(f"sealstore{os.sep}{name}{os.sep}", f"{top}{os.sep}")
    out = out.replace(f"sealstore{os.sep}", f"{CORE}{os.sep}")
    sys.stdout.write(out)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
