"""The PostgreSQL fixture itself: it finds the server, and in CI a missing server fails."""

from __future__ import annotations

import pytest
from sqlalchemy import text

import fixtures_pg


def test_missing_postgres_skips_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        fixtures_pg._unavailable("no binaries")


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_missing_postgres_fails_in_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        fixtures_pg._unavailable("no binaries")


def test_engine_reaches_each_backend(sql_engine, db_url):
    expected = db_url.split(":", 1)[0].split("+", 1)[0]  # sqlite, postgresql, mysql
    assert sql_engine.dialect.name == expected
    with sql_engine.connect() as conn:
        assert conn.execute(text("SELECT 41 + 1")).scalar() == 42


def test_engine_drops_the_tables_a_test_created(db_url):
    from sqlalchemy import create_engine, inspect

    gen = fixtures_pg.sql_engine.__wrapped__(db_url)
    engine = next(gen)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE leftover (id INTEGER PRIMARY KEY)"))
    with pytest.raises(StopIteration):
        next(gen)
    check = create_engine(db_url)
    try:
        assert "leftover" not in inspect(check).get_table_names()
    finally:
        check.dispose()
