"""mkdocs hook (mkdocs.yml ``hooks:``): the package as it is installed, for mkdocstrings.

The source tree maps ``plugin/`` to ``sealstore`` and ``adapters/``, ``migrations/`` to its
subpackages (pyproject's ``package-dir``), which griffe, reading the sources statically, cannot
follow from an editable install.  Before the build this lays out ``sealstore`` in a fresh
temporary directory as the wheel does, with symbolic links to the source files and
directories, and points mkdocstrings' ``paths`` at it (one directory per build, so builds
running at the same time do not share it).  Nothing is imported, so nothing runs.

The docstrings cross-reference in reST (``:class:`~sealstore.keyring.Keyring```), which the
Markdown renderer shows as a role name before the code; :func:`on_page_content` keeps the
code and drops the role and the ``~``.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layout  # noqa: E402  (tools/layout.py)

ROOT = Path(__file__).resolve().parent.parent
#: the subpackages the reference documents (the bench is a program): directory -> name, from
#: tools/layout.py (pyproject's package-dir)
SUBPACKAGES = {d: n for d, n in layout.SUBPACKAGES.items() if n in ("adapters", "migrations")}
_stages: list[Path] = []


def stage() -> Path:
    """A new directory holding ``sealstore`` laid out as installed; returns the directory."""
    top = Path(tempfile.mkdtemp(prefix="sealstore-docs-"))
    package = top / "sealstore"
    package.mkdir()
    for entry in (ROOT / layout.CORE).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for source, name in SUBPACKAGES.items():
        (package / name).symlink_to(ROOT / source)
    _stages.append(top)
    return top


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config):
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(stage())]
    return config


def on_shutdown():
    while _stages:
        shutil.rmtree(_stages.pop(), ignore_errors=True)


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(<code>)~?")


def on_page_content(html, page, config, files):
    return _ROLE.sub(r"\1", html)
