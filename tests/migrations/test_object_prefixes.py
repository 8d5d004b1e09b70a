"""``sealstore_object_prefixes`` (revision sealstore_0004): S3 prefixes registered before it are
carried over by the revision and by ``create_tables``, and back by its downgrade; prefixes are
registered by URL of any known store, and key retirement counts their objects through the object
engine, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from alembic import command
from alembic_project import REWRITER_ENV_PY, alembic_project
from sealstore.adapters.objects import MemoryStore, ObjectSealing
from sealstore.adapters.objects import stores as S
from sealstore.keyring import Keyring
from sealstore.migrations import create_tables, drop_tables, schema
from sealstore.migrations.rotation.retire import (
    describe,
    find_references,
    register_object_prefix,
    registered_object_prefixes,
    remedy,
    unregister_object_prefix,
)

OLD_ROWS = ["s3://b1/data", "s3://b2", "s3://b3/deep/er/"]


@pytest.fixture
def alembic_env(tmp_path, sql_engine):
    with alembic_project(tmp_path, sql_engine, REWRITER_ENV_PY) as (cfg, versions):
        yield cfg, sql_engine


def _old_rows(engine) -> None:
    old = sa.table("sealstore_s3_prefixes", sa.column("url"), sa.column("registered_at"))
    with engine.begin() as conn:
        conn.execute(
            sa.insert(old),
            [{"url": u, "registered_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)}
             for u in OLD_ROWS],
        )  # fmt: skip


def test_the_revision_carries_s3_prefixes_over_and_back(alembic_env):
    cfg, engine = alembic_env
    command.upgrade(cfg, "sealstore_0003")
    _old_rows(engine)
    command.upgrade(cfg, "sealstore@head")
    assert "sealstore_s3_prefixes" not in sa.inspect(engine).get_table_names()
    assert registered_object_prefixes(engine) == ["s3://b1/data", "s3://b2", "s3://b3/deep/er/"]
    command.downgrade(cfg, "sealstore_0003")
    with engine.connect() as conn:
        urls = sorted(conn.exec_driver_sql("SELECT url FROM sealstore_s3_prefixes").scalars())
    assert urls == ["s3://b1/data", "s3://b2", "s3://b3/deep/er/"]
    command.downgrade(cfg, "sealstore@base")


def test_a_downgrade_refuses_to_drop_other_stores_prefixes(alembic_env, monkeypatch):
    cfg, engine = alembic_env
    command.upgrade(cfg, "sealstore@head")
    with engine.begin() as conn:
        conn.execute(
            sa.insert(schema.sealstore_object_prefixes).values(
                scheme="gs", bucket="g", prefix="p", registered_at=dt.datetime.now(dt.timezone.utc)
            )
        )
    with pytest.raises(ValueError, match="gs://"):
        command.downgrade(cfg, "sealstore_0003")
    assert "sealstore_object_prefixes" in sa.inspect(engine).get_table_names()
    with engine.begin() as conn:
        conn.execute(sa.delete(schema.sealstore_object_prefixes))
    command.downgrade(cfg, "sealstore@base")


def test_create_tables_carries_an_old_table_over(sql_engine):
    drop_tables(sql_engine)
    with sql_engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE sealstore_s3_prefixes (url VARCHAR(700) PRIMARY KEY, "
            "registered_at TIMESTAMP NOT NULL)"
        )
    _old_rows(sql_engine)
    create_tables(sql_engine)
    try:
        assert "sealstore_s3_prefixes" not in sa.inspect(sql_engine).get_table_names()
        assert registered_object_prefixes(sql_engine) == OLD_ROWS
    finally:
        drop_tables(sql_engine)


def test_urls_of_unknown_stores_are_refused(sql_engine):
    create_tables(sql_engine)
    try:
        for bad in ("ftp://b/p", "s3://", "b/p", "s3:/b"):
            with pytest.raises(ValueError):
                register_object_prefix(sql_engine, bad)
        register_object_prefix(sql_engine, "s3://b/p")
        register_object_prefix(sql_engine, "s3://b/p")  # idempotent
        assert registered_object_prefixes(sql_engine) == ["s3://b/p"]
        unregister_object_prefix(sql_engine, "s3://b/p")
        assert registered_object_prefixes(sql_engine) == []
    finally:
        drop_tables(sql_engine)


def test_references_are_counted_through_the_engine_in_any_store(sql_engine):
    """A store given by scheme (here the in-memory one standing in for s3://) is what
    find_references looks in: versions sealed under the key, the metadata lost included."""
    kr = Keyring.generate("AEGIS-128L", 16)
    old = kr.primary.key_id
    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(kr)
    sealing.seal(store, "b", "data/a", b"one")
    sealing.seal(store, "b", "data/b", b"two")
    sealing.seal(store, "b", "other/c", b"elsewhere")
    stored = store.get("b", "data/b").read()
    store.put("b", "data/b", stored, length=len(stored))  # metadata lost: the header names it
    store.put("b", "data/plain", b"not sealed", length=10)
    create_tables(sql_engine)
    try:
        register_object_prefix(sql_engine, "s3://b/data")
        refs = find_references(sql_engine, [], old, stores={"s3": store})
        # data/b has two versions, both under the key
        assert [(r.name, r.count, r.kind) for r in refs] == [("s3://b/data", 3, "s3")]
        assert describe(refs) == "s3://b/data: 3 objects"
        assert "s3 rotate" in remedy(refs)
        kr.rotate()
        assert find_references(sql_engine, [], kr.primary.key_id, stores={"s3": store}) == []
    finally:
        drop_tables(sql_engine)


def test_the_store_registry_is_the_one_list():
    assert set(S.STORE_KINDS) == {k.scheme for k in S.STORE_KINDS.values()}
    assert S.parse_object_url("s3://b/p/q") == S.ObjectURL("s3", "b", "p/q")
    assert str(S.parse_object_url("s3://b")) == "s3://b"
    store = S.open_store("s3://b/p", endpoint_url="http://127.0.0.1:9", region="us-east-1")
    assert store.scheme == "s3"
