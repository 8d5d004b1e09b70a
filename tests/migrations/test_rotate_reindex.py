"""Re-indexing blind indexes (sealstore.migrations.rotation.reindex) after an index-key rotation."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation.reindex import reindex
from sealstore.migrations.schema import create_tables, drop_tables
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Member(Base):
    __tablename__ = "members"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[str | None] = mapped_column(EncryptedString(80))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email", size=8), index=True)


@pytest.fixture
def keyrings():
    kr = use_keyring(Keyring.generate())
    ikr = use_keyring(Keyring.generate(), "index")
    yield kr, ikr
    forget_keyring()
    forget_keyring("index")


@pytest.fixture
def db(sql_engine, keyrings):
    create_tables(sql_engine)
    Base.metadata.create_all(sql_engine)
    with Session(sql_engine) as s:
        s.add_all(
            [Member(id=i, email=None if i % 9 == 0 else f"m{i}@example.org") for i in range(1, 61)]
        )
        s.commit()
    yield sql_engine
    Base.metadata.drop_all(sql_engine)
    drop_tables(sql_engine)


def index_key_ids(engine) -> set:
    with engine.connect() as conn:
        raw = conn.execute(sa.text("SELECT email_index FROM members")).scalars().all()
    return {None if v is None else int.from_bytes(bytes(v)[:4], "big") for v in raw}


def find(engine, email):
    with Session(engine) as s:
        return [m.id for m in s.scalars(sa.select(Member).where(Member.email == email))]


def test_reindex_moves_every_index_to_the_new_key(db, keyrings):
    _, ikr = keyrings
    old = ikr.primary.key_id
    new = ikr.rotate().key_id
    assert find(db, "m5@example.org") == [5]  # lookups try both keys meanwhile
    (dry,) = reindex(db, Member, dry_run=True)
    assert dry.total_estimate == 54 and index_key_ids(db) == {None, old}
    (result,) = reindex(db, Member, batch_size=16)
    assert (result.status, result.resealed, result.failed, result.remaining) == (
        "done",
        54,
        0,
        0,
    )
    assert index_key_ids(db) == {None, new}
    ikr.retire(old)  # lookups no longer need the old index key
    assert find(db, "m5@example.org") == [5] and find(db, "M5@example.org") == []


def test_reindex_never_overwrites_a_concurrent_update(db, keyrings):
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite serializes writers (the batch holds the database lock)")
    _, ikr = keyrings
    ikr.rotate()
    writer = sa.create_engine(db.url)
    changed = []

    def hook(name, **info):
        if name == "sealed" and not changed:
            with Session(writer) as s:  # the ORM updates the value and its index together
                s.get(Member, 1).email = "changed@example.org"
                s.commit()
            changed.append(1)

    try:
        (result,) = reindex(db, Member, batch_size=20, on_event=hook)
    finally:
        writer.dispose()
    assert result.conflicted == 1 and result.remaining == 0
    assert find(db, "changed@example.org") == [1] and find(db, "m1@example.org") == []
    assert index_key_ids(db) == {None, ikr.primary.key_id}


def test_reindex_counts_a_value_that_does_not_decode_as_a_failure(db, keyrings):
    """A value that opens but is not UTF-8 (sealed by hand under the column's context) is one
    failed row, named by its key id and UndecodableValue, and the others are re-indexed."""
    from sealstore.format import column_context

    kr, ikr = keyrings
    bad = kr.seal(b"\xff\xfe not utf-8", column_context("members", "email"))
    with db.begin() as conn:
        conn.execute(sa.text("UPDATE members SET email = :v WHERE id = 7"), {"v": bad})
    ikr.rotate()
    (result,) = reindex(db, Member, batch_size=16)
    assert (result.resealed, result.failed) == (53, 1)
    assert result.failures == [((7,), kr.primary.key_id, "UndecodableValue")]
