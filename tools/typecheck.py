"""mypy over the source tree under the package's import names.

The directories are laid out by layer (``plugin/`` is ``sealstore``, ``adapters/`` is
``sealstore.adapters``, ...: pyproject's ``package-dir``), which mypy cannot map by itself.  This
builds that package as a tree of symlinks in a temporary directory, runs mypy on it with
pyproject's ``[tool.mypy]`` settings (strict on the core and the adapters, mypy's defaults on the
migrations and the bench), and prints the errors with their paths in this tree.  The
extension modules are read from their stubs (``plugin/_native.pyi``, ``plugin/_speedups.pyi``),
so nothing needs to be built or installed first; the third-party libraries are the ones of the
running interpreter.

    python tools/typecheck.py [MYPY ARGS...]    exit status: mypy's
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: directory -> where it goes in the package (the core's directory is the package itself)
LAYERS = {"adapters": "adapters", "migrations": "migrations", "bench": "bench"}
CORE = "plugin"


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


def main(argv: list[str]) -> int:
    # a fixed place (mypy's cache stays valid between runs), remade every time
    cache = os.path.join(ROOT, ".mypy_cache")
    tree = os.path.join(cache, "tree")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    shadow_tree(tree)
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
