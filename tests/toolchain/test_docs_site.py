"""The documentation site builds with warnings as errors (mkdocs.yml, ``mkdocs build
--strict``), its API reference is generated from the docstrings, and every page is in the nav."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API_PAGES = {
    "sealstore": "sealstore",
    "sealstore.keyring": "keyring",
    "sealstore.config": "config",
    "sealstore.keysources": "keysources",
    "sealstore.wrapping": "wrapping",
    "sealstore.stream": "stream",
    "sealstore.errors": "errors",
    "sealstore.adapters.sqlalchemy": "sqlalchemy",
    "sealstore.adapters.s3": "s3",
    "sealstore.migrations": "migrations",
}


def _nav_pages() -> set[str]:
    import yaml

    def walk(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return set(walk(config["nav"]))


def test_every_page_is_in_the_nav():
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    nav = _nav_pages()
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


@pytest.mark.toolchain
def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the API reference holds what the docstrings say, not an empty page
    s3 = (site / "api" / "s3" / "index.html").read_text(encoding="utf-8")
    assert "encrypt_client" in s3 and "Make <code>client</code> seal every object" in s3
    keyring = (site / "api" / "keyring" / "index.html").read_text(encoding="utf-8")
    assert "Keyring" in keyring and "rotate" in keyring
    assert (site / "getting-started" / "index.html").exists()
    for module, page in API_PAGES.items():  # every public name has its entry
        text = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        anchors = set(re.findall(r'id="([\w.]+)"', text))
        names = importlib.import_module(module).__all__
        missing = [n for n in names if not any(a.rsplit(".", 1)[-1] == n for a in anchors)]
        assert not missing, f"api/{page}.md does not document {module}.{missing}"
    for page in (site / "api").rglob("*.html"):  # reST roles turned into plain code
        text = page.read_text(encoding="utf-8")
        assert ":class:" not in text and ":func:" not in text, page
