"""The fenced code blocks of README.md, SECURITY.md and docs/**/*.md, with the markers that say
how each one is run (tests/test_docs_blocks.py runs them).

A marker is an HTML comment on the line(s) directly above the opening fence:

* ``<!-- fixture: NAME[, NAME...] -->``: run with these fixtures (tests/test_docs_blocks.py
  lists them; nothing else is filled in);
* ``<!-- continues -->``: run in the namespace, directory and fixtures of the block before it
  on the same page (a walk-through over several blocks);
* ``<!-- not-run: REASON -->``: not run (pseudo-code, a byte layout, another program's file);
  the reason is required;
* ``<!-- ci:TAG -->``: one of README's set-up commands, which ``.ci/run`` runs itself;
* ``<!-- file: NAME -->``: the block is also written to ``NAME`` in the run's directory before
  it runs (a config file a later command reads, a module it imports).

What runs: ``python`` (executed), ``console`` (each ``$ `` line run by bash, exit status 0),
``sh`` (each line run by bash), ``toml`` and ``json`` (parsed; a TOML block must be a valid
sealstore configuration), ``sql`` (executed on the ``engine`` an earlier block made: it
``continues`` that block).  Any other block without a marker is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE = {"python", "console", "sh", "toml", "json", "sql"}
_MARKER = re.compile(r"^<!--\s*([a-z][a-z:-]*[a-z])\s*(?::\s*(.*?))?\s*-->$")
_FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$")


class DocError(ValueError):
    """A block or marker the doc test cannot interpret (the message says where)."""


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    fixtures: list[str] = field(default_factory=list)
    not_run: str | None = None
    continues: bool = False
    ci: str | None = None
    file: str | None = None

    @property
    def where(self) -> str:
        return f"{_rel(self.path)}:{self.line}"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pages() -> list[Path]:
    """Every documentation page the tests cover."""
    found = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.exists()]


def _apply(block: Block, name: str, value: str | None) -> None:
    if name == "fixture" and value:
        block.fixtures += [v.strip() for v in value.split(",") if v.strip()]
    elif name == "not-run" and value:
        block.not_run = value
    elif name == "continues" and value is None:
        block.continues = True
    elif name == "file" and value and "/" not in value and not value.startswith("."):
        block.file = value
    elif name.startswith("ci:") and value is None:
        block.ci = name[3:]
    else:
        raise DocError(f"{block.where}: marker {name!r} with value {value!r} is not one we run")


def _markers(lines: list[str], fence_index: int) -> list[tuple[str, str | None]]:
    found = []
    i = fence_index - 1
    while i >= 0 and _MARKER.match(lines[i].strip()):
        m = _MARKER.match(lines[i].strip())
        found.append((m.group(1), m.group(2)))
        i -= 1
    return found[::-1]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path``; a marker not directly above a fence is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    used: set[int] = set()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise DocError(f"{_rel(path)}:{i + 1}: unclosed code block")
        body = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[i + 1 : end]]
        block = Block(path, i + 1, lang, "\n".join(body) + "\n")
        for name, value in _markers(lines, i):
            _apply(block, name, value)
        used.update(range(i - len(_markers(lines, i)), i))
        out.append(block)
        i = end + 1
    for n, line in enumerate(lines):
        if n not in used and _MARKER.match(line.strip()):
            raise DocError(f"{_rel(path)}:{n + 1}: marker not directly above a block")
    return out


def groups(path: Path) -> list[list[Block]]:
    """Blocks to run together: each run block and the ``continues`` blocks after it."""
    out: list[list[Block]] = []
    for block in blocks(path):
        if block.continues:
            if not out or out[-1][0].not_run is not None:
                raise DocError(f"{block.where}: 'continues' needs a run block before it")
            out[-1].append(block)
        else:
            out.append([block])
    return out


def commands(block: Block) -> list[str]:
    """The shell commands of a ``console`` (``$ `` lines) or ``sh`` block, continuation lines
    joined.  A console block holds commands only: output it shows would go unchecked."""
    joined: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if pending:
            pending += "\n" + line
        elif block.lang == "console":
            if not line or line.startswith("#"):
                continue
            if not line.startswith("$ "):
                raise DocError(f"{block.where}: console blocks hold '$ ' commands only: {line!r}")
            pending = line[2:]
        elif line and not line.startswith("#"):
            pending = line
        if pending and not pending.endswith("\\"):
            joined.append(pending)
            pending = ""
    if pending:
        raise DocError(f"{block.where}: a command ends with a backslash")
    return joined


def problems(paths: list[Path], fixtures: set[str] | frozenset = frozenset()) -> list[str]:
    """What is wrong with the blocks of ``paths``: an unmarked block in a language that does
    not run, an unknown or dangling marker, a fixture not in ``fixtures``, a console block
    showing output."""
    found: list[str] = []
    for page in paths:
        try:
            page_blocks = blocks(page)
            groups(page)
            for block in page_blocks:
                marked = block.not_run is not None or block.ci is not None
                if not marked and block.lang not in RUNNABLE:
                    found.append(
                        f"{block.where}: a {block.lang or 'plain'} block neither runs nor is "
                        "marked '<!-- not-run: reason -->'"
                    )
                if not marked and block.lang in ("console", "sh"):
                    commands(block)
                unknown = sorted(set(block.fixtures) - set(fixtures))
                if unknown:
                    found.append(f"{block.where}: unknown fixtures {unknown}")
        except DocError as exc:
            found.append(str(exc))
    return found
