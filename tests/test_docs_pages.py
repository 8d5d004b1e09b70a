"""What the pages claim matches the code: docs/production-keys.md names every field of the
configuration model and every environment variable the package reads; docs/BENCH.md names
every ``op`` of the bench JSON."""

from __future__ import annotations

import ast
import json
import re
import sys
import typing
from pathlib import Path

from pydantic import BaseModel
from sealstore.config import ENV_PREFIX, SealstoreConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(layout.LIBRARY)  # the library's directories


def _models(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation names (through Annotated, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def config_fields(model: type[BaseModel] = SealstoreConfig, prefix: str = "") -> set[str]:
    """Every field path of the configuration, ``key_source.wrapping.kms_key_id`` and so on
    (the ``type`` discriminators included), through every variant of every union."""
    out = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        subs = _models(info.annotation)
        if subs:
            for sub in subs:
                out |= config_fields(sub, path + ".")
        else:
            out.add(path)
    return out


def env_names_read() -> set[str]:
    """``SEALSTORE_*`` names the package's code holds as whole string constants (what it looks
    up in the environment), public Python names (``__all__`` entries) left out."""
    found, exported = set(), set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if re.fullmatch(r"SEALSTORE_[A-Z0-9_]+", node.value):
                        found.add(node.value)
                if (  # ENV_PREFIX + "CONFIG"
                    isinstance(node, ast.BinOp)
                    and isinstance(node.left, ast.Name)
                    and node.left.id == "ENV_PREFIX"
                    and isinstance(node.right, ast.Constant)
                    and isinstance(node.right.value, str)
                    and node.right.value.isupper()
                ):
                    found.add(ENV_PREFIX + node.right.value)
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
                ):
                    exported |= {
                        e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)
                    }
    return found - exported


def test_the_walk_finds_the_nested_fields():
    fields = config_fields()
    assert {"suite", "key_source.url", "key_source.wrapping.kms_key_id"} <= fields
    assert "key_source.wrapping.path" in fields and "key_source.path" in fields
    assert {"SEALSTORE_CONFIG", "SEALSTORE_KERNEL", "SEALSTORE_DATABASE_URL"} <= env_names_read()


def test_production_keys_names_every_option_and_variable():
    page = (ROOT / "docs" / "production-keys.md").read_text(encoding="utf-8")
    missing = []
    for field in sorted(config_fields()):
        env = ENV_PREFIX + field.upper().replace(".", "__")
        for name in (field, env):
            if f"`{name}`" not in page:
                missing.append(name)
    missing += [name for name in sorted(env_names_read()) if f"`{name}`" not in page]
    assert not missing, f"docs/production-keys.md does not name: {missing}"


def _ops(node, path: str, out: dict) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("op"), str):
            out.setdefault(path, set()).add(node["op"])
        for key, value in node.items():
            _ops(value, f"{path}.{key}", out)
    elif isinstance(node, list):
        for item in node:
            _ops(item, path, out)


def test_bench_page_names_every_op_of_the_json():
    page = (ROOT / "docs" / "BENCH.md").read_text(encoding="utf-8")
    ops: dict = {}
    for path in sorted((ROOT / "docs" / "bench").glob("*.json")):
        _ops(json.loads(path.read_text(encoding="utf-8")), "", ops)
    assert ops, "no bench JSON under docs/bench"
    missing = sorted({op for found in ops.values() for op in found if f"`{op}`" not in page})
    assert not missing, f"docs/BENCH.md does not name these ops of the JSON: {missing}"
