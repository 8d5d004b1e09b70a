"""The package layout is written once: pyproject.toml's ``[tool.setuptools] package-dir``,
read through tools/layout.py by setup.py, the tools and the tests.  A second, hand-written
copy of the mapping (a dict pairing ``"plugin"`` with ``"sealstore"``, a ``package_dir=``, a
``package-dir`` outside pyproject's setuptools table) fails here; README.md's "Layout" table
shows every mapped directory with its package."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import layout  # noqa: E402  (tools/layout.py)

#: directories never scanned: environments, build output, caches
_SKIP = {".git", ".venv", "venv", ".nox", ".tox", "build", "dist", "site", "__pycache__",
         ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "node_modules"}  # fmt: skip
_TEXT_SUFFIXES = (".toml", ".cfg", ".in", ".ini", ".sh", ".yml", ".yaml", ".json")


def _files(root: Path = ROOT):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP and not d.endswith(".egg-info")]
        for name in files:
            yield Path(dirpath) / name


def _pairs(roots: dict[str, str]) -> set[frozenset[str]]:
    """Each directory with its package, in either spelling (``plugin`` or ``plugin/``)."""
    return {frozenset((d + slash, n)) for d, n in roots.items() for slash in ("", "/")}


def python_problems(source: str, roots: dict[str, str] = layout.ROOTS) -> list[str]:
    """Hand-written mappings in Python source: a dict literal pairing a mapped directory with
    its package (either way round), or a ``package_dir`` keyword or assignment."""
    pairs = _pairs(roots)
    # a directory named otherwise than its package's last part (plugin/, native/): one such
    # pair is a copy; ``"sealstore.migrations": "migrations"`` alone may be another table's
    # entry (a module's docs page), two mapped pairs are a copy
    telling = _pairs({d: n for d, n in roots.items() if d != n.rpartition(".")[2]})
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            hits = [
                (k.value, v.value)
                for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant)
                and isinstance(v, ast.Constant)
                and frozenset((k.value, v.value)) in pairs
            ]
            if len(hits) >= 2 or any(frozenset(h) in telling for h in hits):
                out += [f"line {node.lineno}: {k!r}: {v!r}" for k, v in hits]
        elif isinstance(node, ast.keyword) and node.arg == "package_dir":
            out.append(f"line {node.value.lineno}: package_dir=")
        elif isinstance(node, ast.Name) and node.id in ("package_dir", "PACKAGE_DIR") \
                and isinstance(node.ctx, ast.Store):  # fmt: skip
            out.append(f"line {node.lineno}: {node.id} =")
    return out


def text_problems(text: str, roots: dict[str, str] = layout.ROOTS) -> list[str]:
    """Hand-written mappings in a configuration file: ``plugin = sealstore``, ``"sealstore":
    "plugin"`` and the like, or a ``package-dir``/``package_dir`` key."""
    out = []
    for d, n in roots.items():
        d_, n_ = re.escape(d) + "/?", re.escape(n)
        for a, b in ((d_, n_), (n_, d_)):
            pattern = rf"""(?<![\w.])["']?{a}["']?\s*[:=]\s*["']?{b}["']?(?![\w.])"""
            for m in re.finditer(pattern, text):
                out.append(f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    for m in re.finditer(r"package[-_]dir", text):
        out.append(f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    return out


def test_the_mapping_is_pyprojects():
    assert layout.ROOTS == {d: n for n, d in layout.package_dir().items()}
    assert layout.ROOTS[layout.CORE] == "sealstore"
    for directory, name in layout.ROOTS.items():
        assert (ROOT / directory / "__init__.py").is_file(), directory
        assert name == "sealstore" or name.startswith("sealstore."), name
    assert set(layout.LIBRARY) < set(layout.PACKAGES) < set(layout.ROOTS)
    assert layout.NATIVE not in layout.PACKAGES
    assert layout.directory("sealstore.adapters") == "adapters"  # the one spelled-out pair here


def test_no_second_copy_of_the_mapping():
    found = []
    for path in _files():
        rel = path.relative_to(ROOT)
        if path.suffix == ".py" and rel != Path("tests/test_layout.py"):
            problems = python_problems(path.read_text(encoding="utf-8"))
        elif path.suffix in _TEXT_SUFFIXES or path.name == "MANIFEST.in":
            text = path.read_text(encoding="utf-8", errors="replace")
            if rel == Path("pyproject.toml"):  # the one home: its setuptools table only
                table = re.search(r"(?ms)^\[tool\.setuptools\]\n.*?(?=^\[)", text)
                assert table and "package-dir" in table.group(0)
                text = text.replace(table.group(0), "")
            problems = text_problems(text)
        else:
            continue
        found += [f"{rel}: {p}" for p in problems]
    assert found == [], "the package mapping is written again; read tools/layout.py instead"


@pytest.mark.parametrize(
    "source",
    [
        'ROOTS = {"plugin": "sealstore", "native": "sealstore._csrc"}',
        'NAMES = {"sealstore.adapters": "adapters/", "sealstore.bench": "bench"}',
        'TOP = {"plugin/": "sealstore"}',
        'setup(package_dir={"": "src"})',
        "package_dir = dict(zip(a, b))",
    ],
)
def test_the_guard_finds_a_python_copy(source):
    assert python_problems(source) != []


@pytest.mark.parametrize(
    "text",
    [
        '[tool.setuptools]\npackage-dir = { "sealstore" = "plugin" }\n',
        "[options.package_dir]\nsealstore = plugin\n",
        '{"migrations": "sealstore.migrations"}',
        "bench: sealstore.bench\n",
    ],
)
def test_the_guard_finds_a_configuration_copy(text):
    assert text_problems(text) != []


def test_the_guard_leaves_other_pairs_alone():
    assert python_problems('X = {"plugin": "core", "sealstore.adapters.s3": "s3"}') == []
    assert (
        python_problems('PAGES = {"sealstore": "sealstore", "sealstore.migrations": "migrations"}')
        == []
    )
    assert text_problems('"sealstore.adapters.*" = { strict = true }\nplugin/ holds') == []


def test_readme_layout_table_shows_every_mapped_directory():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"(?ms)^## Layout\n(.*?)(?=^## )", text)
    assert section, "README.md has no Layout section before the next one"
    rows = {}
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    for directory, name in layout.ROOTS.items():
        assert rows.get(f"{directory}/", "").startswith(f"`{name}`"), directory
    # shown at the door: right after the install section
    heads = re.findall(r"(?m)^## (.+)$", text)
    assert heads[heads.index("Layout") - 1] == "Install only what you use"


def test_ci_chooses_tests_by_marker_not_by_file_list():
    """.ci/run keeps no hand-written list of test files: its pytest runs choose by marker and
    name (``-m``, ``-k``; pyproject.toml's markers, tests/migrations/conftest.py for a whole
    directory), never by ``--ignore``, ``--deselect`` or a test file's path."""
    ci = ROOT / ".ci" / "run"
    if not ci.is_file():
        pytest.skip("not a git checkout (an sdist has no .ci/run)")
    code = "\n".join(
        line
        for line in ci.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    assert re.findall(r"--ignore\S*|--deselect\S*", code) == []
    assert re.findall(r"tests/\S*\.py\b", code) == []
