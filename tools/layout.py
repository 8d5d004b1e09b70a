"""The source tree's layout: which top-level directory is which package.

The directories are laid out by layer and installed under other names (``plugin/`` is
``sealstore``, ``adapters/`` is ``sealstore.adapters``, ``native/`` is ``sealstore._csrc``, ...).
That mapping is written once, in pyproject.toml's ``[tool.setuptools] package-dir``; setup.py,
the tools and the tests read it from here (tests/test_layout.py fails on a second, hand-written
copy).  README.md's "Layout" table shows it.

    python tools/layout.py        print the table: directory, package

Importable without sealstore installed and on Python 3.10 (tomli: a dependency there, and
vendored by the setuptools that runs setup.py).
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
#: the package of the C kernel sources (data shipped in the wheel, not library code)
SOURCES_PACKAGE = "sealstore._csrc"


def package_dir(root: Path = ROOT) -> dict[str, str]:
    """import name -> top-level directory, as pyproject.toml writes it."""
    conf = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(conf["tool"]["setuptools"]["package-dir"])


#: top-level directory -> import name, every mapped directory (the kernel sources' too)
ROOTS: dict[str, str] = {directory: name for name, directory in package_dir().items()}
#: top-level directory -> import name, the Python code of the library and the bench
#: (every root but the kernel sources')
PACKAGES: dict[str, str] = {d: n for d, n in ROOTS.items() if n != SOURCES_PACKAGE}
#: top-level directory -> import name, the library's code (the bench is a program)
LIBRARY: dict[str, str] = {d: n for d, n in PACKAGES.items() if n != "sealstore.bench"}
#: the directory of the core (the package ``sealstore`` itself)
CORE: str = next(d for d, n in ROOTS.items() if n == "sealstore")
#: the directory of the C kernel sources
NATIVE: str = next(d for d, n in ROOTS.items() if n == SOURCES_PACKAGE)
#: directory -> subpackage name inside ``sealstore`` (``"adapters": "adapters"``), the code
#: layers beside the core
SUBPACKAGES: dict[str, str] = {
    d: n.removeprefix("sealstore.") for d, n in PACKAGES.items() if d != CORE
}


def directory(package: str) -> str:
    """The top-level directory a package (``sealstore.adapters``) is written in."""
    for d, n in ROOTS.items():
        if n == package:
            return d
    raise KeyError(package)


def table() -> str:
    """The mapping as a Markdown table (README.md's "Layout" section lists the same rows)."""
    rows = ["| directory | installed as |", "|---|---|"]
    rows += [f"| `{d}/` | `{n}` |" for d, n in ROOTS.items()]
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
