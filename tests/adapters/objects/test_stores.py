"""The store registry (``sealstore.adapters.objects.stores``) is the one list of object stores:
every record names a module with a factory that builds a store of its scheme, and no library
file keeps a second list (a collection literal naming two stores' schemes), and nothing above
the adapters reaches into a store by name."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest
from sealstore.adapters.objects import stores as S

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
import layout  # noqa: E402  (tools/layout.py: pyproject's package-dir)


@pytest.mark.parametrize("scheme", sorted(S.STORE_KINDS))
def test_every_record_names_a_factory(scheme):
    kind = S.STORE_KINDS[scheme]
    assert kind.scheme == scheme
    module = importlib.import_module(kind.module)
    params = inspect.signature(module.store_from_url).parameters
    assert {"endpoint_url", "region"} <= set(params)


def test_urls_parse_and_print_back():
    for url in ("s3://b/p/q", "s3://b", "s3://b/"):
        parsed = S.parse_object_url(url)
        assert S.parse_object_url(str(parsed)) == parsed
    for bad in ("ftp://b/p", "s3://", "s3:/b/p", "b/p", ""):
        with pytest.raises(ValueError):
            S.parse_object_url(bad)


def _library_files():
    for folder in layout.LIBRARY:
        yield from (ROOT / folder).rglob("*.py")


def test_no_second_list_of_stores():
    schemes = set(S.STORE_KINDS)
    found = []
    for path in _library_files():
        if path == Path(S.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]
            else:
                continue
            named = {i.value for i in items if isinstance(i, ast.Constant)} & schemes
            if len(named) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_migrations_name_no_store():
    """Key retirement and the schema go through the engine and the registry: no S3 URL parser,
    no S3 reference counter, no S3 client in the migrations (revisions aside)."""
    found = []
    for path in (ROOT / "migrations").rglob("*.py"):
        if "versions" in path.parts:
            continue
        text = path.read_text()
        for name in ("parse_s3_url", "s3_references", "adapters.s3", "boto3"):
            if name in text:
                found.append(f"{path.relative_to(ROOT)}: {name}")
    assert found == []
