"""tools/lowest_constraints.py: CI's lowest-versions run pins the floors of the core and of the
library extras, and its test requirements expand the extras the test extra names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import lowest_constraints as lc  # noqa: E402  (tools/lowest_constraints.py)

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

PYPROJECT = ROOT / "pyproject.toml"


def _name(req: str) -> str:
    return lc._REQ.match(req)["name"].lower()


def test_floors_pin_the_core_and_every_library_extra():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = {_name(d) for d in project["dependencies"]}
    for extra in lc.LIBRARY:
        declared |= {_name(d) for d in project["optional-dependencies"][extra]}
    lines = lc.floors(PYPROJECT)
    assert sorted(_name(line) for line in lines) == sorted(declared)  # each once
    assert {"sqlalchemy", "alembic", "boto3", "cryptography"} <= declared
    assert all("==" in line.split(";")[0] for line in lines)
    assert [line for line in lines if line.startswith("tomli==")][0].endswith(
        "; python_version < '3.11'"
    )


def test_test_requirements_expand_the_extras_they_name():
    reqs = lc.test_requirements(PYPROJECT)
    names = [_name(r) for r in reqs]
    assert "sealstore" not in names and not set(names) & lc.SEPARATE
    assert len(reqs) == len(set(reqs))
    # the test extra names sealstore[all,bench]: the adapters' and the bench's own lists
    assert {"sqlalchemy", "alembic", "boto3", "matplotlib", "moto", "pytest"} <= set(names)


def test_a_dependency_without_a_floor_is_refused(tmp_path):
    text = PYPROJECT.read_text().replace('"pydantic>=2.5.0"', '"pydantic"')
    assert '"pydantic"' in text
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(SystemExit, match="declares no floor"):
        lc.floors(tmp_path / "pyproject.toml")
