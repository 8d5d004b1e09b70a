"""A column's width allows a fixed overhead (``MAX_OVERHEAD``, 55 bytes) unless it declares more.

AEGIS-256 with 32-byte tags adds 71 bytes, more than a column sized by default can hold: every
path that writes a sealed value into a bounded column (the native bind processor, its Python
fallback, row-bound columns, ORM flushes, executemany, the rotation tools and Alembic's
encrypt_column) refuses it with ValueTooLong before anything is written, and a column declared
with ``overhead=71`` takes it.  Existing widths never change."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    select,
)
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import (
    MAX_OVERHEAD,
    Encrypted,
    EncryptedBinary,
    EncryptedJSON,
    EncryptedString,
    EncryptedText,
)
from sealstore.errors import ValueTooLong
from sealstore.format import overhead
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.suites import SUITES

WIDE = overhead("AEGIS-256X4", 32)


@pytest.fixture
def ring256():
    ring = use_keyring(Keyring.generate("AEGIS-256X4", tag_size=32))
    yield ring
    forget_keyring()


@pytest.fixture
def engine():
    eng = create_engine("sqlite://")
    yield eng
    eng.dispose()


def _table(type_, name="t"):
    md = MetaData()
    t = Table(name, md, Column("id", Integer, primary_key=True), Column("v", type_))
    return md, t


def _refused(exc_info) -> BaseException:
    exc = exc_info.value
    return exc.orig if isinstance(exc, StatementError) else exc


def test_the_default_allowance_is_pinned_and_only_aegis256_long_tags_pass_it():
    assert MAX_OVERHEAD == 55 == overhead("AEGIS-256", 16) == overhead("AEGIS-128X4", 32)
    over = {(s.label, t) for s in SUITES for t in s.tag_sizes if s.overhead(t) > MAX_OVERHEAD}
    assert over == {("AEGIS-256", 32), ("AEGIS-256X2", 32), ("AEGIS-256X4", 32)}
    assert WIDE == 71
    assert EncryptedString(10).storage_length == 40 + 55  # unchanged by the new suites
    assert EncryptedString(10, overhead=WIDE).storage_length == 40 + 71
    assert "overhead=71" in repr(EncryptedString(10, overhead=WIDE))  # what Alembic renders
    assert "overhead" not in repr(EncryptedString(10))
    for bad in (-1, 1.5, True, "71"):
        with pytest.raises(ValueError, match="overhead must be a non-negative int"):
            EncryptedString(10, overhead=bad)


@pytest.mark.parametrize(
    "type_, value",
    [
        (EncryptedString(20), "x" * 5),  # the native path (raw ASCII str)
        (EncryptedString(20), "é" * 3),  # the codec path
        (EncryptedBinary(16), b"\x01" * 4),  # raw bytes
        (Encrypted(String(30)), "short"),
    ],
    ids=["ascii", "utf8", "bytes", "wrapped"],
)
def test_a_bounded_column_refuses_values_it_cannot_hold(engine, ring256, type_, value):
    md, t = _table(type_)
    md.create_all(engine)
    with engine.begin() as conn:
        with pytest.raises((ValueTooLong, StatementError)) as info:
            conn.execute(insert(t).values(id=1, v=value))
    err = _refused(info)
    assert isinstance(err, ValueTooLong)
    msg = str(err)
    assert "t.v is sized for 55 bytes" in msg and "AEGIS-256" in msg and "overhead=71" in msg
    assert str(value) not in msg
    with engine.connect() as conn:
        assert conn.execute(select(t)).all() == []  # nothing was written


def test_seal_for_row_refuses(engine, ring256):
    from sealstore.adapters.sqlalchemy import seal_for_row

    _, t = _table(EncryptedString(20, bind_row=True))
    with pytest.raises(ValueTooLong, match="overhead=71"):
        seal_for_row(t.c.v, "row-bound", 1)


def test_executemany_refuses_before_any_row(engine, ring256):
    md, t = _table(EncryptedString(20))
    md.create_all(engine)
    with engine.begin() as conn:
        with pytest.raises((ValueTooLong, StatementError)) as info:
            conn.execute(insert(t), [{"id": i, "v": f"v{i}"} for i in range(5)])
    assert isinstance(_refused(info), ValueTooLong)
    with engine.connect() as conn:
        assert conn.execute(select(t)).all() == []


def test_orm_flush_refuses(engine, ring256):
    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "orm_rows"
        id: Mapped[int] = mapped_column(primary_key=True)
        secret: Mapped[str | None] = mapped_column(EncryptedString(30, bind_row=True))

    Base.metadata.create_all(engine)
    with Session(engine) as s:
        s.add(Row(id=1, secret="hidden"))
        with pytest.raises((ValueTooLong, StatementError)) as info:
            s.commit()
        assert isinstance(_refused(info), ValueTooLong)
    with engine.connect() as conn:
        assert conn.execute(select(Row.__table__)).all() == []


@pytest.mark.parametrize(
    "type_, value",
    [
        (EncryptedString(20, overhead=WIDE), "\U0001f600" * 20),  # the longest: fills it
        (EncryptedBinary(16, overhead=WIDE), b"\xff" * 16),
        (Encrypted(String(30), overhead=WIDE), "x" * 30),
        (EncryptedText(), "unbounded " * 50),
        (EncryptedJSON(), {"unbounded": True}),
    ],
    ids=["string", "binary", "wrapped", "text", "json"],
)
def test_a_column_sized_for_it_or_unbounded_takes_aegis256_long_tags(
    sql_engine, ring256, type_, value
):
    """On SQLite, PostgreSQL and MariaDB (VARBINARY(n + 71): an over-long value would fail or,
    with sql_mode='', be truncated)."""
    md, t = _table(type_, name="wide")
    md.create_all(sql_engine)
    with sql_engine.begin() as conn:
        conn.execute(insert(t).values(id=1, v=value))
    plain = Table(
        "wide", MetaData(), Column("id", Integer, primary_key=True), Column("v", LargeBinary)
    )
    with sql_engine.connect() as conn:
        assert conn.execute(select(t.c.v)).scalar_one() == value
        raw = bytes(conn.execute(select(plain.c.v)).scalar_one())
    assert raw[1] in (0x04, 0x06) and raw[6] == 0x01  # AEGIS-256(X4), a 32-byte tag
    if type_.storage_length is not None and isinstance(value, str) and len(value) == 20:
        assert len(raw) == type_.storage_length == 80 + 71  # the longest value fills it


def test_aegis256_with_short_tags_fits_default_columns(engine):
    use_keyring(Keyring.generate("AEGIS-256", tag_size=16))
    try:
        md, t = _table(EncryptedString(20))
        md.create_all(engine)
        with engine.begin() as conn:
            conn.execute(insert(t).values(id=1, v="ok"))
            assert conn.execute(select(t.c.v)).scalar_one() == "ok"
    finally:
        forget_keyring()


def test_type_seal_refuses_too(ring256):
    _, t = _table(EncryptedString(20))
    with pytest.raises(ValueTooLong):
        t.c.v.type.seal("x")
