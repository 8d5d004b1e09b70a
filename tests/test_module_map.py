"""docs/CONTRIBUTING.md's module map names every module of the library: each ``.py`` file of
the core, the adapters and the migrations (by its name, in backquotes, within its layer's part
of the map) and each subpackage it sits in.  A new module without a line in the map fails here
(the revisions of ``migrations/versions/`` are data, not modules to map)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)

#: the layer's part of the map starts at its bold heading
HEADINGS = {"sealstore": "**Core", "sealstore.adapters": "**Adapters",
            "sealstore.migrations": "**Migrations"}  # fmt: skip
#: files that are not modules to map: the package's own entry points and Alembic's revisions
SKIPPED_DIRS = {"versions", "__pycache__"}


def _parts() -> dict[str, str]:
    text = (ROOT / "docs" / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = re.search(r"(?ms)^## Module map\n(.*?)(?=^## )", text)
    assert section, "docs/CONTRIBUTING.md has no Module map section"
    body = section.group(1)
    starts = sorted((body.index(h), name) for name, h in HEADINGS.items())
    out = {}
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(body)
        out[name] = body[start:end]
    return out


def named(part: str) -> set[str]:
    """Every name in backquotes, lists and paths split: ``keyring/`` (``keys``, ``values``)
    and ``adapters/s3/`` give keyring, keys, values, adapters, s3."""
    found = set()
    for quoted in re.findall(r"`([^`]+)`", part):
        for piece in re.split(r"[\s,/()]+", quoted):
            if piece:
                found.add(piece.removesuffix(".py"))
    return found


def _modules(directory: str) -> list[Path]:
    return [
        p.relative_to(ROOT / directory)
        for p in sorted((ROOT / directory).rglob("*.py"))
        if not SKIPPED_DIRS & set(p.relative_to(ROOT / directory).parts)
        and not p.stem.startswith("__")
    ]


@pytest.mark.parametrize("directory", sorted(layout.LIBRARY))
def test_the_module_map_names_every_module(directory):
    package = layout.LIBRARY[directory]
    names = named(_parts()[package])
    missing = [
        f"{directory}/{rel}"
        for rel in _modules(directory)
        if rel.stem not in names or not set(rel.parts[:-1]) <= names
    ]
    assert missing == [], "add them to docs/CONTRIBUTING.md's module map"


def test_the_check_sees_a_missing_module():
    part = "| `errors` | ... |\n`keyring/` (`keys`, `values`)"
    assert {"errors", "keyring", "keys", "values"} <= named(part)
    assert "ring" not in named(part) and "keyring" in named("`adapters/keyring/`")
    assert set(HEADINGS) == set(layout.LIBRARY.values())
