"""sealstore.adapters.sqlalchemy.results: binary result format on a real PostgreSQL (psycopg 3).

Each test runs the same statement several times and records the result format psycopg used
and the values returned: the first run is text, later runs binary only when every returned
column loads to the same Python values, and the values never change.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, event, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import BlindIndex, Encrypted, EncryptedJSON, EncryptedString
from sealstore.adapters.sqlalchemy.results import BINARY_RESULTS_OPTION

from sqlalchemy_cases import keyrings  # noqa: F401


@pytest.fixture
def pg(pg_url):
    engine = create_engine(pg_url)
    formats: list[str] = []

    @event.listens_for(engine, "after_cursor_execute")
    def record(conn, cursor, statement, parameters, context, executemany):
        if not executemany and cursor.description:
            formats.append(cursor.format.name)

    engine.formats = formats
    meta = MetaData()
    engine.meta = meta
    yield engine
    meta.drop_all(engine)
    engine.dispose()


def _runs(engine, stmt, n=3, **options):
    out = []
    with engine.connect() as conn:
        if options:
            conn = conn.execution_options(**options)
        for _ in range(n):
            out.append([tuple(r) for r in conn.execute(stmt).all()])
    return out


SAFE_ROW = dict(
    id=1, name="plain text", code="ab", flag=True, amount=decimal.Decimal("12.34"),
    ratio=0.1, born=dt.date(1990, 5, 17), at=dt.datetime(2026, 11, 30, 12, 0, 1, 5),
    at_tz=dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc), t=dt.time(23, 59, 58),
    key=uuid.UUID(int=7), raw=b"\x00\x01", big=2**40, small=-3,
    email="a@example.org", secret_int=-42, secret_date=dt.date(2000, 1, 2),
)  # fmt: skip


def _safe_table(meta):
    return Table(
        "results_safe", meta,
        Column("id", Integer, primary_key=True),
        Column("name", sa.String(50)), Column("code", sa.CHAR(2)), Column("flag", sa.Boolean),
        Column("amount", sa.Numeric(10, 2)), Column("ratio", sa.Double),
        Column("born", sa.Date), Column("at", sa.DateTime), Column("at_tz", sa.DateTime(timezone=True)),
        Column("t", sa.Time), Column("key", sa.Uuid), Column("raw", sa.LargeBinary),
        Column("big", sa.BigInteger), Column("small", sa.SmallInteger),
        Column("email", EncryptedString(100)), Column("email_index", BlindIndex("email")),
        Column("secret_int", Encrypted(sa.Integer)), Column("secret_date", Encrypted(sa.Date)),
    )  # fmt: skip


def test_encrypted_selects_switch_to_binary_with_the_same_values(pg, keyrings):
    table = _safe_table(pg.meta)
    pg.meta.create_all(pg)
    with pg.begin() as conn:
        conn.execute(insert(table), [SAFE_ROW, {**SAFE_ROW, "id": 2, "name": None, "email": None}])
    stmt = select(table).order_by(table.c.id)
    runs = _runs(pg, stmt)
    assert pg.formats[-3:] == ["TEXT", "BINARY", "BINARY"]
    assert runs[0] == runs[1] == runs[2]
    first = dict(zip(stmt.selected_columns.keys(), runs[1][0]))
    assert {k: first[k] for k in SAFE_ROW} == SAFE_ROW
    assert isinstance(first["email_index"], bytes)
    # the blind index lookup (rewritten WHERE) still finds the row in binary format
    lookup = select(table.c.id).where(table.c.email == "a@example.org")
    assert _runs(pg, lookup, 2) == [[(1,)], [(1,)]]


def test_types_that_differ_in_binary_keep_the_text_format(pg, keyrings):
    table = Table(
        "results_unsafe", pg.meta,
        Column("id", Integer, primary_key=True), Column("r", sa.REAL), Column("doc", sa.JSON),
        Column("ip", sa.dialects.postgresql.INET), Column("email", EncryptedString(100)),
    )  # fmt: skip
    pg.meta.create_all(pg)
    with pg.begin() as conn:
        conn.execute(
            insert(table), [{"id": 1, "r": 0.1, "doc": {"a": 1}, "ip": "10.0.0.1", "email": "x@y"}]
        )
    for col in (table.c.r, table.c.doc, table.c.ip):
        runs = _runs(pg, select(table.c.email, col))
        assert pg.formats[-3:] == ["TEXT", "TEXT", "TEXT"], col
        assert runs[0] == runs[1] == runs[2]
    pg.formats.clear()
    with pg.connect() as conn:  # citext: an extension type psycopg has no binary loader for
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS citext")
        conn.exec_driver_sql("ALTER TABLE results_unsafe ADD COLUMN nick citext DEFAULT 'Nick'")
        conn.commit()
    nick = Table(
        "results_unsafe",
        MetaData(),
        Column("nick", sa.String),
        Column("email", EncryptedString(100)),
    )
    runs = _runs(pg, select(nick.c.email, nick.c.nick))
    assert pg.formats[-3:] == ["TEXT", "TEXT", "TEXT"]
    assert runs[-1] == [("x@y", "Nick")]


def test_statements_without_encrypted_columns_are_left_alone(pg, keyrings):
    table = _safe_table(pg.meta)
    pg.meta.create_all(pg)
    with pg.begin() as conn:
        conn.execute(insert(table), [SAFE_ROW])
    _runs(pg, select(table.c.id, table.c.name))
    assert pg.formats[-3:] == ["TEXT", "TEXT", "TEXT"]


def test_the_execution_option_turns_it_off(pg, keyrings):
    table = _safe_table(pg.meta)
    pg.meta.create_all(pg)
    with pg.begin() as conn:
        conn.execute(insert(table), [SAFE_ROW])
    runs = _runs(pg, select(table.c.id, table.c.email), **{BINARY_RESULTS_OPTION: False})
    assert pg.formats[-3:] == ["TEXT", "TEXT", "TEXT"]
    assert runs[0] == [(1, "a@example.org")]


def test_orm_loads_and_returning_use_it_too(pg, keyrings):
    class Base(DeclarativeBase):
        metadata = pg.meta

    class Person(Base):
        __tablename__ = "results_people"
        id: Mapped[int] = mapped_column(primary_key=True)
        ssn: Mapped[str] = mapped_column(EncryptedString(11))
        profile: Mapped[dict] = mapped_column(EncryptedJSON())

    pg.meta.create_all(pg)
    with Session(pg) as session:
        session.add_all([Person(id=i, ssn=f"123-45-{i:04d}", profile={"i": i}) for i in range(3)])
        session.commit()
    for _ in range(3):
        with Session(pg) as session:
            people = session.scalars(select(Person).order_by(Person.id)).all()
            assert [(p.ssn, p.profile) for p in people] == [
                (f"123-45-{i:04d}", {"i": i}) for i in range(3)
            ]
    assert pg.formats[-3:] == ["TEXT", "BINARY", "BINARY"]
    stmt = (
        sa.update(Person.__table__)
        .where(Person.id == 1)
        .values(ssn="999-99-9999")
        .returning(Person.ssn)
    )
    got = []
    for _ in range(2):
        with pg.begin() as conn:
            got.append(conn.execute(stmt).scalar_one())
    assert got == ["999-99-9999"] * 2
    assert pg.formats[-2:] == ["TEXT", "BINARY"]


def test_the_asyncio_driver_switches_its_psycopg_cursor(pg_url, keyrings):
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    async def main():
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        formats = []

        @event.listens_for(engine.sync_engine, "after_cursor_execute")
        def record(conn, cursor, statement, parameters, context, executemany):
            if not executemany and cursor.description:
                formats.append(cursor._cursor.format.name)

        meta = MetaData()
        table = Table("results_async", meta, Column("id", Integer, primary_key=True),
                      Column("email", EncryptedString(100)))  # fmt: skip
        try:
            async with engine.begin() as conn:
                await conn.run_sync(meta.create_all)
                await conn.execute(
                    insert(table), [{"id": 1, "email": "a@b"}, {"id": 2, "email": None}]
                )
            got = []
            for _ in range(3):
                async with engine.connect() as conn:
                    got.append((await conn.execute(select(table).order_by(table.c.id))).all())
            assert [list(map(tuple, rows)) for rows in got] == [[(1, "a@b"), (2, None)]] * 3
            assert formats[-3:] == ["TEXT", "BINARY", "BINARY"]
        finally:
            async with engine.begin() as conn:
                await conn.run_sync(meta.drop_all)
            await engine.dispose()

    asyncio.run(main())


def test_client_side_cursors_keep_the_text_format(pg_url, keyrings):
    import psycopg

    engine = create_engine(pg_url, connect_args={"cursor_factory": psycopg.ClientCursor})
    formats = []

    @event.listens_for(engine, "after_cursor_execute")
    def record(conn, cursor, statement, parameters, context, executemany):
        if not executemany and cursor.description:
            formats.append(cursor.format.name)

    meta = MetaData()
    table = Table("results_client", meta, Column("id", Integer, primary_key=True),
                  Column("email", EncryptedString(100)))  # fmt: skip
    meta.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(insert(table), [{"id": 1, "email": "a@b"}])
        assert _runs(engine, select(table)) == [[(1, "a@b")]] * 3
        assert formats[-3:] == ["TEXT", "TEXT", "TEXT"]
    finally:
        meta.drop_all(engine)
        engine.dispose()
