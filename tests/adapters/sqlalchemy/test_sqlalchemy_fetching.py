"""sealstore.adapters.sqlalchemy.fetching: encrypted columns opened as rows are fetched.

Every fetch style SQLAlchemy offers, on SQLite, the PostgreSQL and the MariaDB servers the
suite starts, must return exactly what SQLAlchemy's own processing returns (the same engine
with ``sealstore_open_on_fetch=False``), on first runs and on cached reruns, with more rows than
one fetch chunk.  Errors keep their types and leave the connection usable.
"""

from __future__ import annotations

import asyncio
import threading
import tracemalloc

import pytest
from sealstore.adapters.sqlalchemy import EncryptedString, EncryptedText
from sealstore.adapters.sqlalchemy.fetching import (
    CHUNK_ROWS,
    OPEN_ON_FETCH_OPTION,
    _OpeningFetch,
)
from sealstore.errors import InvalidTag
from sealstore.keyring import Keyring, use_keyring
from sqlalchemy import (
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    select,
    text,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    joinedload,
    mapped_column,
    relationship,
    selectinload,
)
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy_cases import Base, Secret, User, core_metadata, db, keyrings, write_raw  # noqa: F401

N = CHUNK_ROWS * 3 + 17  # several chunks and a partial one


def _users(n=N):
    return [
        User(id=i, ssn=f"{i:03d}-00-{i % 9999:04d}", notes="é" * (i % 7) + "x" * (i % 300),
             profile={"i": i} if i % 5 else None, avatar=bytes([i % 256]) * (i % 3),
             visits=i * 7, email=f"u{i}@example.org", name=f"name {i}")
        for i in range(1, n + 1)
    ]  # fmt: skip


def _fill(engine, n=N):
    with Session(engine) as s:
        s.add_all(_users(n))
        s.commit()


def _plain(row):
    return tuple(row)


COLUMNS = (
    User.id,
    User.ssn,
    User.notes,
    User.profile,
    User.avatar,
    User.visits,
    User.email_index,
    User.name,
)


def _core_styles(conn):
    """What every Core fetch style returns for the same statement."""
    stmt = select(*COLUMNS).order_by(User.id)
    out = {"all": [_plain(r) for r in conn.execute(stmt).all()]}
    res = conn.execute(stmt)
    out["fetchone+fetchmany+fetchall"] = (
        [_plain(res.fetchone())] + [_plain(r) for r in res.fetchmany(10)] + [_plain(r) for r in res.fetchall()]
    )  # fmt: skip
    out["iter"] = [_plain(r) for r in conn.execute(stmt)]
    out["first"] = [_plain(conn.execute(stmt).first())]
    out["scalars"] = list(conn.execute(select(User.notes).order_by(User.id)).scalars())
    out["yield_per"] = [_plain(r) for r in conn.execute(stmt.execution_options(yield_per=7))]
    out["partitions"] = [[_plain(r) for r in p] for p in conn.execute(stmt).partitions(100)]
    out["stream_results"] = [
        _plain(r)
        for r in conn.execution_options(stream_results=True, max_row_buffer=50).execute(stmt)
    ]
    out["unique"] = [_plain(r) for r in conn.execute(select(User.ssn).order_by(User.id)).unique()]
    out["mappings"] = [dict(m) for m in conn.execute(stmt).mappings()]
    out["frozen"] = [_plain(r) for r in conn.execute(stmt).freeze()()]
    return out


def _orm_styles(session):
    stmt = select(User).order_by(User.id)
    key = lambda u: (u.id, u.ssn, u.notes, u.profile, u.avatar, u.visits, u.email, u.name)
    out = {"orm all": [key(u) for u in session.scalars(stmt).all()]}
    session.expunge_all()
    out["orm yield_per"] = [key(u) for u in session.scalars(stmt.execution_options(yield_per=50))]
    session.expunge_all()
    out["orm get"] = [key(session.get(User, 5))]
    session.expunge_all()
    out["orm lookup"] = [
        key(u) for u in session.scalars(select(User).where(User.email == "u9@example.org"))
    ]
    return out


def test_every_fetch_style_matches_sqlalchemys_own_processing(db):
    _fill(db)
    off = create_engine(db.url, execution_options={OPEN_ON_FETCH_OPTION: False})  # its own cache
    with off.connect() as conn:
        expected = _core_styles(conn)
    with Session(off) as s:
        expected |= _orm_styles(s)
    assert len(expected["all"]) == N and expected["all"][0][1] == "001-00-0001"
    for _ in range(2):  # the first run builds the result metadata, the second reuses it
        with db.connect() as conn:
            got = _core_styles(conn)
        with Session(db) as s:
            got |= _orm_styles(s)
        for style in expected:
            assert got[style] == expected[style], style
    off.dispose()


def test_encrypted_columns_are_opened_by_the_fetch(db):
    _fill(db, 3)
    with db.connect() as conn:
        for _ in range(2):
            res = conn.execute(select(User.id, User.ssn, User.name, User.notes).order_by(User.id))
            assert isinstance(res.cursor_strategy, _OpeningFetch)
            # SQLAlchemy's per-value processors are gone for the encrypted columns only
            assert res._metadata._processors[1] is None and res._metadata._processors[3] is None
            assert res.all()[0] == (1, "001-00-0001", "name 1", "éx")
        off = conn.execution_options(**{OPEN_ON_FETCH_OPTION: False})
        stmt = select(User.id, User.ssn).where(User.id > 0).order_by(User.id)  # a new statement
        for c in (off, conn):  # decided at its first execution, for good
            res = c.execute(stmt)
            assert not isinstance(res.cursor_strategy, _OpeningFetch)
            assert res.all()[0] == (1, "001-00-0001")


def test_textual_selects_and_returning(db):
    """text().columns() is opened at fetch too (its columns are matched by position); a
    statement without encrypted columns and DML RETURNING keep SQLAlchemy's processing."""
    _fill(db, 3)
    with db.connect() as conn:
        stmt = text("SELECT id, ssn FROM ss_users ORDER BY id").columns(User.id, User.ssn)
        for _ in range(2):
            assert conn.execute(stmt).all()[0] == (1, "001-00-0001")
        res = conn.execute(
            text("SELECT ssn, id FROM ss_users ORDER BY id").columns(User.ssn, User.id)
        )
        assert res.all()[0] == ("001-00-0001", 1)
        no_encrypted = conn.execute(select(User.id, User.name).order_by(User.id))
        assert not isinstance(no_encrypted.cursor_strategy, _OpeningFetch)
        assert no_encrypted.all()[0] == (1, "name 1")
    if db.dialect.insert_returning:
        with db.begin() as conn:
            res = conn.execute(insert(User).returning(User.ssn), {"id": 99, "ssn": "x-99"})
            assert not isinstance(res.cursor_strategy, _OpeningFetch)
            assert res.one() == ("x-99",)


def test_row_bound_columns_and_gcm_keyrings(db, keyrings):
    with Session(db) as s:
        s.add_all([Secret(owner=f"o{i}", token=f"t{i}", blob=b"b" * i) for i in range(N)])
        s.commit()
    with Session(db) as s:
        got = sorted((x.owner, x.token, x.blob) for x in s.scalars(select(Secret)))
    assert len(got) == N and ("o1", "t1", b"b") in got
    use_keyring(Keyring.generate("AES-256-GCM"))  # the default keyring, now GCM: Python path
    _fill(db, 40)
    with db.connect() as conn:
        assert conn.execute(select(User.ssn).where(User.id == 40)).scalar_one() == "040-00-0040"


def test_a_wrong_tag_raises_and_the_connection_stays_usable(db):
    _fill(db)
    with db.connect() as conn:
        good = conn.execute(select(User.ssn).where(User.id == 1)).scalar_one()
    with db.connect() as conn:
        sealed_email = conn.execute(text("SELECT email FROM ss_users WHERE id = 2")).scalar_one()
    write_raw(
        db, "ss_users", "ssn", N - 5, bytes(sealed_email)
    )  # another column's, in the last chunk
    with db.connect() as conn:
        with pytest.raises(InvalidTag):
            conn.execute(select(User.id, User.ssn).order_by(User.id)).all()
        assert conn.execute(select(User.ssn).where(User.id == 1)).scalar_one() == good
    with Session(db) as s, pytest.raises(InvalidTag):
        s.scalars(select(User)).all()
    with db.begin() as conn:  # no statement left holding the table (SQLite would refuse this)
        conn.execute(User.__table__.update().where(User.id == N - 5).values(ssn="fixed"))
    with Session(db) as s:
        assert len(s.scalars(select(User)).all()) == N


def test_threads_running_a_new_statement_at_once(db):
    _fill(db)
    stmt = select(User.id, User.notes).where(User.id > 1).order_by(User.id)  # first run below
    with db.connect() as conn:
        expected = (
            conn.execution_options(**{OPEN_ON_FETCH_OPTION: False})
            .execute(select(User.id, User.notes).where(User.id > 1).order_by(User.id.desc()))
            .all()[::-1]
        )
    results, errors = [], []

    def work():
        try:
            with db.connect() as conn:
                results.append(conn.execute(stmt).all())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 4 and all(r == expected for r in results)


def test_ciphertexts_are_released_chunk_by_chunk(tmp_path, keyrings):
    """The point of the module: a large result never holds all its ciphertexts and plaintexts
    at once (measured as traced allocations, not time)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    table = Table(
        "big", MetaData(), Column("id", Integer, primary_key=True), Column("v", EncryptedText())
    )
    table.metadata.create_all(engine)
    n, value = 4000, "v" * 4096
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": i, "v": value} for i in range(n)])

    def peak(eng):
        with eng.connect() as conn:
            conn.execute(select(table)).all()  # compile and cache outside the measurement
            tracemalloc.start()
            rows = conn.execute(select(table)).all()
            size = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert len(rows) == n and rows[-1].v == value
        return size

    # the decision is kept per compiled statement: the opted-out engine has its own cache
    engine_off = create_engine(engine.url, execution_options={OPEN_ON_FETCH_OPTION: False})
    on, off = peak(engine), peak(engine_off)
    plaintexts = n * len(value)
    assert off > 1.8 * plaintexts  # every ciphertext and every plaintext at once
    assert on < 1.3 * plaintexts  # the plaintexts and one chunk of ciphertexts
    engine.dispose()
    engine_off.dispose()


def test_an_unrelated_engine_is_untouched(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'p.db'}")
    table = Table("p", MetaData(), Column("id", Integer, primary_key=True), Column("s", String(5)))
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": 1, "s": "a"}])
        res = conn.execute(select(table))
        assert not isinstance(res.cursor_strategy, _OpeningFetch) and res.all() == [(1, "a")]
    engine.dispose()


def test_the_asyncio_engine(pg_url, keyrings):
    table = Table(
        "fetch_async",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("v", EncryptedText()),
    )
    rows = [{"id": i, "v": f"value {i}"} for i in range(N)]

    async def main():
        engine = create_async_engine(pg_url.replace("+psycopg", "+psycopg_async"))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(table.metadata.create_all)
                await conn.execute(insert(table), rows)
            async with engine.connect() as conn:
                for _ in range(2):
                    res = await conn.execute(select(table).order_by(table.c.id))
                    assert [dict(r._mapping) for r in res.all()] == rows
                streamed = await conn.stream(select(table).order_by(table.c.id))
                assert [dict(r._mapping) async for r in streamed] == rows
        finally:
            async with engine.begin() as conn:
                await conn.run_sync(table.metadata.drop_all)
            await engine.dispose()

    asyncio.run(main())


def test_relationship_loads_and_echo(tmp_path, keyrings):
    """Joined and select-in eager loads (aliased columns of two tables in one row) and an
    engine that logs its rows open the same values as SQLAlchemy's own processing."""

    class Base(DeclarativeBase):
        pass

    class Owner(Base):
        __tablename__ = "owners"
        id: Mapped[int] = mapped_column(primary_key=True)
        name: Mapped[str] = mapped_column(EncryptedString(40))
        pets: Mapped[list["Pet"]] = relationship(back_populates="owner", order_by="Pet.id")

    class Pet(Base):
        __tablename__ = "pets"
        id: Mapped[int] = mapped_column(primary_key=True)
        owner_id: Mapped[int] = mapped_column(ForeignKey("owners.id"))
        name: Mapped[str] = mapped_column(EncryptedText())
        owner: Mapped[Owner] = relationship(back_populates="pets")

    def load(engine, option):
        with Session(engine) as s:
            owners = (
                s.scalars(select(Owner).options(option(Owner.pets)).order_by(Owner.id))
                .unique()
                .all()
            )
            return [(o.name, [(p.name, p.owner.name) for p in o.pets]) for o in owners]

    engine = create_engine(f"sqlite:///{tmp_path / 'rel.db'}")
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        s.add_all([Owner(id=i, name=f"owner {i}", pets=[Pet(name=f"pet {i}.{j}") for j in range(i % 4)])
                   for i in range(CHUNK_ROWS + 3)])  # fmt: skip
        s.commit()
    off = create_engine(engine.url, execution_options={OPEN_ON_FETCH_OPTION: False})
    echo = create_engine(engine.url, echo=True)
    for option in (joinedload, selectinload):
        expected = load(off, option)
        assert expected[3] == (
            "owner 3",
            [("pet 3.0", "owner 3"), ("pet 3.1", "owner 3"), ("pet 3.2", "owner 3")],
        )
        assert load(engine, option) == expected and load(engine, option) == expected
        assert load(echo, option) == expected
    for e in (engine, off, echo):
        e.dispose()


def test_a_plan_never_filled_is_an_error_not_ciphertext():
    """Internal guard: a result whose metadata was built without the collecting hook cannot
    be handed out unopened."""
    from sqlalchemy.engine.cursor import _DEFAULT_FETCH

    from sealstore.adapters.sqlalchemy.fetching import _Plan

    with pytest.raises(RuntimeError, match="without the fetch hook"):
        _OpeningFetch(_DEFAULT_FETCH, _Plan())._opened([(b"sealed",)])


def _same_on_one_connection(url: str, is_async: bool) -> None:
    """Every fetch style and the ORM on one connection of ``url`` (``_core_styles`` leaves it
    with ``stream_results`` on), against the same driver with opening at fetch turned off."""

    def both(conn_on, conn_off):
        got, expected = _core_styles(conn_on), _core_styles(conn_off)
        with Session(bind=conn_on) as s_on, Session(bind=conn_off) as s_off:
            got |= _orm_styles(s_on)
            expected |= _orm_styles(s_off)
        assert len(expected["all"]) == N
        for style in expected:
            assert got[style] == expected[style], style
        res = conn_on.execute(select(User.ssn).where(User.id < 3))
        assert isinstance(res.cursor_strategy, _OpeningFetch) and len(res.all()) == 2

    off_options = {OPEN_ON_FETCH_OPTION: False}
    if not is_async:
        on, off = create_engine(url), create_engine(url, execution_options=off_options)
        with on.connect() as c_on, off.connect() as c_off:
            both(c_on, c_off)
        on.dispose(), off.dispose()
        return

    async def main():
        on, off = create_async_engine(url), create_async_engine(url, execution_options=off_options)
        async with on.connect() as c_on, off.connect() as c_off:
            await c_on.run_sync(lambda sync_on: both(sync_on, c_off.sync_connection))
        await on.dispose()
        await off.dispose()

    asyncio.run(main())


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2", "asyncpg"])
def test_postgresql_drivers_on_one_connection(pg_url, keyrings, driver):
    """Each PostgreSQL driver returns what it returns without opening at fetch, also once
    ``stream_results`` has turned the statements already cached to server-side cursors
    (psycopg2's have no description before their first fetch; the buffered strategy closes
    them while returning its last rows)."""
    pytest.importorskip(driver)
    setup = create_engine(pg_url)
    Base.metadata.create_all(setup)
    core_metadata.create_all(setup)
    try:
        _fill(setup)
        _same_on_one_connection(pg_url.replace("+psycopg", f"+{driver}"), driver == "asyncpg")
    finally:
        Base.metadata.drop_all(setup)
        core_metadata.drop_all(setup)
        setup.dispose()


def test_aiosqlite(tmp_path, keyrings):
    """The asyncio SQLite driver, every fetch style and the ORM, against its own processing."""
    pytest.importorskip("aiosqlite")
    path = tmp_path / "aio.db"
    setup = create_engine(f"sqlite:///{path}")
    Base.metadata.create_all(setup)
    _fill(setup)
    setup.dispose()
    _same_on_one_connection(f"sqlite+aiosqlite:///{path}", True)
