"""The layering holds in the source: tools/imports.py's import graph (lazy imports counted)
has no layer violation and no import cycle, and the console script reaches the adapters'
and migrations' commands through entry points, not imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import imports  # noqa: E402  (tools/imports.py)


@pytest.fixture(scope="module")
def graph():
    return imports.graph()


def test_the_graph_sees_every_module_and_lazy_imports(graph):
    assert "sealstore.keyring" in graph and "sealstore.adapters.s3.handlers" in graph
    # config builds its key sources lazily, inside a method: still an edge
    assert "sealstore.keysources.file" in graph["sealstore.config"]


def test_no_layer_violation(graph):
    assert imports.violations(graph) == []


def test_the_checker_reports_violations_and_cycles():
    fake = {
        "sealstore.format": {"sealstore.adapters.s3.body"},
        "sealstore.adapters.s3.body": {"sealstore.adapters.sqlalchemy.types", "sealstore._native"},
        "sealstore.adapters.sqlalchemy.types": {"sealstore.format"},
        "sealstore.migrations.rotation.spec": {"sealstore.bench.run"},
    }
    assert len(imports.violations(fake)) == 4
    shared = {"sealstore.adapters.s3.body": {"sealstore.adapters.objects.ranges"},
              "sealstore.adapters.objects.ranges": {"sealstore.adapters.s3.body"}}  # fmt: skip
    assert imports.violations(shared) == [
        "sealstore.adapters.objects.ranges imports another adapter's sealstore.adapters.s3.body"
    ]
    assert imports.cycles(fake) == [["sealstore.adapters.s3.body", "sealstore.adapters.sqlalchemy.types",
                                     "sealstore.format"]]  # fmt: skip


def test_no_import_cycle(graph):
    assert imports.cycles(graph) == []


def test_the_core_cli_names_no_upper_layer():
    text = (ROOT / "plugin" / "cli.py").read_text()
    for upper in ("adapters", "migrations", "bench"):
        assert f".{upper}" not in text.replace("sealstore.bench.command", "")


def test_the_tool_exits_non_zero_on_a_finding_and_zero_on_none():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "imports.py")],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    assert "layer violation(s)" in proc.stdout
