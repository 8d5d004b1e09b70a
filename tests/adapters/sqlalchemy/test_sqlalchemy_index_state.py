"""Blind indexes the rows have not caught up with (issue 26, items 6 and 8): a lookup through an
index added to existing rows raises IndexIncomplete until the index is filled (unless the caller
accepts partial results), every write path keeps a new index complete, and a UNIQUE index keeps
refusing duplicates across an index-key rotation, also while a re-index runs.  SQLite,
PostgreSQL and MariaDB."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    Table,
    bindparam,
    func,
    insert,
    lambda_stmt,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.adapters.sqlalchemy import index_state
from sealstore.errors import DuplicateIndexValue, IndexIncomplete
from sealstore.migrations.rotation.reindex import reindex
from sealstore.migrations.schema import create_tables, drop_tables

from sqlalchemy_cases import db, keyrings, raw  # noqa: F401


class _Base(DeclarativeBase):
    pass


class Member(_Base):
    """The application's model once the index is declared."""

    __tablename__ = "ss_members"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[str | None] = mapped_column(EncryptedString(120))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email"), index=True)


# the same table as the application had it before: no index column
_old_meta = MetaData()
old_members = Table(
    "ss_members",
    _old_meta,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("email", EncryptedString(120)),
)


class _UniqueBase(DeclarativeBase):
    pass


class Login(_UniqueBase):
    __tablename__ = "ss_logins"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str | None] = mapped_column(EncryptedString(80))
    name_index: Mapped[bytes | None] = mapped_column(BlindIndex("name"), unique=True)


def _email(i: int) -> str | None:
    return None if i % 7 == 0 else f"user{i}@example.org"


@pytest.fixture
def jobs(db):
    create_tables(db)
    index_state.forget()
    yield db
    index_state.forget()
    drop_tables(db)


def _add_index_column(engine) -> None:
    """What a hand-written ``op.add_column`` does: the index column, NULL in every row."""
    kind = {"sqlite": "BLOB", "postgresql": "BYTEA"}.get(engine.dialect.name, "VARBINARY(20)")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE ss_members ADD COLUMN email_index {kind}")


def _old_rows(engine, ids) -> None:
    with engine.begin() as conn:
        conn.execute(insert(old_members), [{"id": i, "email": _email(i)} for i in ids])


def _nulls(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM ss_members WHERE email IS NOT NULL AND email_index IS NULL")
        ).scalar_one()


def _ids(engine, *criteria, **options) -> list[int]:
    with Session(engine) as session:
        stmt = select(Member.id).where(*criteria)
        return sorted(session.scalars(stmt, execution_options=options))


# ---- an index added to existing rows -----------------------------------------------------------


def test_lookups_through_an_index_added_to_existing_rows_raise_until_it_is_filled(jobs):
    engine = jobs
    _old_meta.create_all(engine)
    _old_rows(engine, range(1, 31))
    _add_index_column(engine)
    with Session(engine) as session:  # the application, now with the BlindIndex in its model
        session.add(Member(id=100, email="new@example.org"))
        session.commit()
    assert _nulls(engine) == 26

    lookups = [
        lambda: _ids(engine, Member.email == "user1@example.org"),
        lambda: _ids(engine, Member.email != "user1@example.org"),
        lambda: _ids(engine, Member.email.in_(["user1@example.org", "new@example.org"])),
        lambda: _ids(engine, Member.email.not_in(["user1@example.org"])),
        lambda: _ids(engine, Member.email == "new@example.org"),  # a row that has its index
    ]
    for lookup in lookups:
        with pytest.raises(IndexIncomplete) as info:
            lookup()
        message = str(info.value)
        assert "ss_members.email_index is incomplete" in message
        assert "sealstore reindex --models <your models> --table ss_members" in message
        assert "op.add_blind_index" in message
        assert "sealstore_partial_index=True" in message
        assert "example.org" not in message  # never the value looked up
    with engine.connect() as conn:  # Core, a named bindparam, a lambda statement
        stmt = select(Member.id).where(Member.email == bindparam("e"))
        with pytest.raises(IndexIncomplete):
            conn.execute(stmt, {"e": "user1@example.org"})
        e = "user1@example.org"
        with pytest.raises(IndexIncomplete):
            conn.execute(lambda_stmt(lambda: select(Member.id).where(Member.email == e)))
        with pytest.raises(IndexIncomplete):  # a lookup inside a subquery
            inner = select(Member.id).where(Member.email == "user2@example.org").scalar_subquery()
            conn.execute(select(func.count()).where(inner.is_not(None)))

    # the caller who accepts partial results says so: the statement, the connection, the session
    partial = {"sealstore_partial_index": True}
    assert _ids(engine, Member.email == "user1@example.org", **partial) == []  # missed
    assert _ids(engine, Member.email == "new@example.org", **partial) == [100]
    with engine.connect() as conn:
        stmt = select(Member.id).where(Member.email == "new@example.org")
        assert conn.execute(stmt.execution_options(**partial)).scalars().all() == [100]
        assert conn.execution_options(**partial).execute(stmt).scalars().all() == [100]

    (result,) = reindex(engine, Member, batch_size=7)
    assert result.remaining == 0 and _nulls(engine) == 0
    for i in range(1, 31):  # the re-index run forgot what this process knew: complete now
        expected = [] if _email(i) is None else [i]
        if _email(i) is not None:
            assert _ids(engine, Member.email == _email(i)) == expected
    assert _ids(engine, Member.email == "new@example.org") == [100]


def test_an_index_emptied_behind_the_process_back_is_seen_at_the_next_check(jobs, monkeypatch):
    engine = jobs
    _base_rows(engine)
    assert _ids(engine, Member.email == "user1@example.org") == [1]  # complete, remembered
    with engine.begin() as conn:  # a writer outside sealstore leaves an index value out
        conn.execute(text("UPDATE ss_members SET email_index = NULL WHERE id = 2"))
    assert _ids(engine, Member.email == "user1@example.org") == [1]  # the answer is kept ...
    clock = index_state.time.monotonic
    monkeypatch.setattr(
        index_state.time, "monotonic", lambda: clock() + index_state.COMPLETE_TTL + 1
    )
    with pytest.raises(IndexIncomplete):  # ... until it expires
        _ids(engine, Member.email == "user1@example.org")
    monkeypatch.undo()
    reindex(engine, Member)
    assert _ids(engine, Member.email == "user2@example.org") == [2]


def _base_rows(engine, n: int = 20) -> None:
    _Base.metadata.create_all(engine)
    with Session(engine) as session:
        session.add_all([Member(id=i, email=_email(i)) for i in range(1, n + 1)])
        session.commit()


def test_every_write_path_fills_the_index(jobs):
    engine = jobs
    _base_rows(engine, 6)  # ORM flush
    table = Member.__table__
    with engine.begin() as conn:
        conn.execute(insert(table).values(id=10, email="core@example.org"))
        conn.execute(insert(table), {"id": 11, "email": "params@example.org"})
        conn.execute(
            insert(table), [{"id": 12 + i, "email": f"many{i}@example.org"} for i in range(3)]
        )
        conn.execute(
            insert(table).values(email=bindparam("e")), {"id": 20, "e": "bound@example.org"}
        )
    with Session(engine) as session:
        session.bulk_insert_mappings(Member, [{"id": 30, "email": "bulk@example.org"}])
        session.execute(insert(Member), [{"id": 31, "email": "ormbulk@example.org"}])
        session.commit()
    with engine.begin() as conn:  # updates: literal, executemany, ORM
        conn.execute(update(table).where(table.c.id == 1).values(email="upd@example.org"))
        conn.execute(
            update(table).where(table.c.id == bindparam("k")).values(email=bindparam("e")),
            [{"k": 2, "e": "upd2@example.org"}, {"k": 3, "e": "upd3@example.org"}],
        )
    with Session(engine) as session:
        session.get(Member, 4).email = "orm@example.org"
        session.execute(update(Member), [{"id": 5, "email": "ormupd@example.org"}])
        session.commit()
    assert _nulls(engine) == 0
    expected = {
        "core@example.org": 10, "params@example.org": 11, "many2@example.org": 14,
        "bound@example.org": 20, "bulk@example.org": 30, "ormbulk@example.org": 31,
        "upd@example.org": 1, "upd3@example.org": 3, "orm@example.org": 4,
        "ormupd@example.org": 5,
    }  # fmt: skip
    for email, pk in expected.items():
        assert _ids(engine, Member.email == email) == [pk], email


def test_rows_written_while_the_index_is_filled_are_filled_or_reported(jobs):
    """Old writers (no index in their models) and new writers insert while the re-index runs:
    afterwards each lookup finds its row or raises IndexIncomplete, never misses silently; a
    second run fills what the first could not."""
    engine = jobs
    _old_meta.create_all(engine)
    _old_rows(engine, range(1, 41))
    _add_index_column(engine)
    written = []

    def on_event(name, **info):
        if name != "committed" or len(written) >= 9:  # three batches' worth
            return
        n = len(written)
        with engine.begin() as conn:  # an old writer, ahead of and behind the run
            conn.execute(insert(old_members), [{"id": 1000 + n, "email": f"old{n}@example.org"},
                                               {"id": 2000 + n, "email": f"late{n}@example.org"}])  # fmt: skip
        with Session(engine) as session:  # a new writer
            session.add(Member(id=3000 + n, email=f"new{n}@example.org"))
            session.commit()
        written.extend([1000 + n, 2000 + n, 3000 + n])

    reindex(engine, Member, batch_size=8, on_event=on_event)
    assert written
    emails = {pk: e for pk, e in _all(engine).items() if e is not None}
    for pk, email in emails.items():
        try:
            assert _ids(engine, Member.email == email) == [pk]
        except IndexIncomplete:
            assert _nulls(engine) > 0
    reindex(engine, Member)
    assert _nulls(engine) == 0
    for pk, email in emails.items():
        assert _ids(engine, Member.email == email) == [pk]


def _all(engine) -> dict[int, str | None]:
    with engine.connect() as conn:
        return dict(conn.execute(select(old_members.c.id, old_members.c.email)).all())


# ---- a UNIQUE index across an index-key rotation -----------------------------------------------


def _logins(engine, n: int) -> None:
    _UniqueBase.metadata.create_all(engine)
    with Session(engine) as session:
        session.add_all([Login(id=i, name=f"name{i}") for i in range(1, n + 1)])
        session.commit()


def test_a_unique_index_refuses_duplicates_on_every_write_path_across_a_rotation(jobs, keyrings):
    engine = jobs
    _logins(engine, 3)
    table = Login.__table__
    keyrings.idx.rotate()  # rows 1..3 are under the older key now
    refused = [
        lambda c: c.execute(insert(table).values(id=10, name="name1")),
        lambda c: c.execute(insert(table), {"id": 10, "name": "name2"}),
        lambda c: c.execute(insert(table), [{"id": 10, "name": "fresh"}, {"id": 11, "name": "name3"}]),
        lambda c: c.execute(insert(table).values(name=bindparam("n")), {"id": 10, "n": "name1"}),
        lambda c: c.execute(insert(table).values([{"id": 10, "name": "x"}, {"id": 11, "name": "name2"}])),
        lambda c: c.execute(update(table).where(table.c.id == 2).values(name="name1")),
        lambda c: c.execute(
            update(table).where(table.c.id == bindparam("k")).values(name=bindparam("n")),
            [{"k": 3, "n": "name3"}, {"k": 2, "n": "name1"}],
        ),
    ]  # fmt: skip
    for write in refused:
        with pytest.raises(DuplicateIndexValue) as info:
            with engine.begin() as conn:
                write(conn)
        assert "name" not in str(info.value).replace("name_index", "")  # never the value
    for orm_write in (
        lambda s: s.add(Login(id=10, name="name2")),
        lambda s: s.bulk_insert_mappings(Login, [{"id": 10, "name": "name3"}]),
        lambda s: setattr(s.get(Login, 2), "name", "name3"),
        lambda s: s.execute(update(Login), [{"id": 2, "name": "name1"}]),
    ):
        with Session(engine) as session:
            with pytest.raises(DuplicateIndexValue):
                orm_write(session)
                session.commit()
    # nothing was written; a row keeps its own value, and new values are accepted
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(table)).scalar_one() == 3
    with engine.begin() as conn:
        conn.execute(update(table).where(table.c.id == 1).values(name="name1"))
        conn.execute(
            update(table).where(table.c.id == bindparam("k")).values(name=bindparam("n")),
            [{"k": 2, "n": "name2"}],
        )
    with Session(engine) as session:
        session.get(Login, 3).name = "name3"
        session.add(Login(id=4, name="name4"))
        session.commit()
    with Session(engine) as session:
        session.add(Login(id=5, name="name4"))  # both under the primary: the database refuses
        with pytest.raises(IntegrityError):
            session.commit()


def test_a_unique_index_refuses_duplicates_while_a_reindex_runs(jobs, keyrings):
    engine = jobs
    _logins(engine, 40)
    keyrings.idx.rotate()
    outcomes: dict[int, str] = {}

    def on_event(name, **info):
        if name != "committed" or outcomes:
            return
        for target in (2, 39):  # one re-indexed already, one not yet
            try:
                with Session(engine) as session:
                    session.add(Login(id=100 + target, name=f"name{target}"))
                    session.commit()
                outcomes[target] = "written"
            except DuplicateIndexValue:
                outcomes[target] = "refused by sealstore"
            except IntegrityError:
                outcomes[target] = "refused by the database"

    (result,) = reindex(engine, Login, batch_size=10, on_event=on_event)
    assert result.remaining == 0
    assert outcomes == {2: "refused by the database", 39: "refused by sealstore"}
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(Login.__table__)).scalar_one()
    assert n == 40


def test_no_lookup_query_once_an_index_is_known_complete(jobs):
    """The completeness check runs once per engine and index, not per lookup."""
    from sqlalchemy import event

    engine = jobs
    _base_rows(engine, 5)
    seen = []

    def count(conn, cursor, statement, *args):
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(20):
            _ids(engine, Member.email == "user1@example.org")
    finally:
        event.remove(engine, "before_cursor_execute", count)
    checks = [s for s in seen if "IS NULL" in s and "LIMIT" in s.upper()]
    assert len(checks) == 1 and len(seen) == 21


@pytest.mark.parametrize("driver", ["aiosqlite", "psycopg_async", "asyncpg"])
def test_the_asyncio_engine_checks_and_guards_too(driver, tmp_path, keyrings, request):
    """An AsyncEngine runs the same hooks: the completeness check on its own connection, the
    partial-results option, the UNIQUE guard."""
    import asyncio

    from sqlalchemy import create_engine
    from sqlalchemy.ext.asyncio import create_async_engine

    if driver == "aiosqlite":
        pytest.importorskip("aiosqlite")
        sync_url = f"sqlite:///{tmp_path / 'a.db'}"
        url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    else:
        pytest.importorskip(driver.replace("psycopg_async", "psycopg"))
        sync_url = request.getfixturevalue("pg_url")
        url = sync_url.replace("+psycopg", f"+{driver}")
    engine = create_engine(sync_url)
    _old_meta.create_all(engine)
    _UniqueBase.metadata.create_all(engine)
    try:
        _old_rows(engine, range(1, 6))
        _add_index_column(engine)
        with Session(engine) as session:
            session.add(Login(id=1, name="ada"))
            session.commit()
        keyrings.idx.rotate()
        index_state.forget()

        async def main():
            aengine = create_async_engine(url)
            try:
                stmt = select(Member.id).where(Member.email == "user1@example.org")
                async with aengine.connect() as conn:
                    with pytest.raises(IndexIncomplete):
                        await conn.execute(stmt)
                    partial = stmt.execution_options(sealstore_partial_index=True)
                    assert (await conn.execute(partial)).all() == []
                async with aengine.begin() as conn:
                    with pytest.raises(DuplicateIndexValue):
                        await conn.execute(insert(Login.__table__).values(id=2, name="ada"))
            finally:
                await aengine.dispose()

        asyncio.run(main())

        async def after():
            aengine = create_async_engine(url)
            try:
                async with aengine.connect() as conn:
                    stmt = select(Member.id).where(Member.email == "user1@example.org")
                    assert (await conn.execute(stmt)).scalars().all() == [1]
            finally:
                await aengine.dispose()

        create_tables(engine)
        try:
            reindex(engine, Member)
            asyncio.run(after())
        finally:
            drop_tables(engine)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE ss_members")
            conn.exec_driver_sql("DROP TABLE ss_logins")
        engine.dispose()
        index_state.forget()
