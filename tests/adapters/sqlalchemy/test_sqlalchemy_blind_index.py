"""Blind indexes: equality lookups, index maintenance on every write path, index-key rotation."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy import Column, Integer, MetaData, Table, bindparam, func, insert, select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session, aliased

from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.errors import (
    BlindIndexError,
    KeyNotUsable,
    UnsealedExpression,
    UnsupportedComparison,
)
from sealstore.format import column_context
from sealstore.keyring import use_keyring

from sqlalchemy_cases import User, db, events, keyrings, raw  # noqa: F401


def _add(engine, **values) -> int:
    with Session(engine) as session:
        user = User(**values)
        session.add(user)
        session.commit()
        return user.id


def _ids(engine, *criteria) -> list[int]:
    with Session(engine) as session:
        return sorted(session.scalars(select(User.id).where(*criteria)))


def test_equality_lookup_finds_the_row_and_only_it(db):
    a = _add(db, email="ada@example.org")
    b = _add(db, email="bob@example.org")
    _add(db, email=None)
    assert _ids(db, User.email == "ada@example.org") == [a]
    assert _ids(db, "bob@example.org" == User.email) == [b]
    assert _ids(db, User.email == "Ada@example.org") == []  # wrong case
    assert _ids(db, User.email == "ada@example.org ") == []
    assert _ids(db, User.email == "carol@example.org") == []
    assert _ids(db, User.email.in_(["ada@example.org", "bob@example.org", "x"])) == [a, b]
    assert _ids(db, User.email != "ada@example.org") == [b]  # NULL matches neither, as in SQL
    assert _ids(db, User.email.not_in(["ada@example.org"])) == [b]
    with Session(db) as session:
        (user,) = session.scalars(select(User).filter_by(email="bob@example.org")).all()
        assert user.email == "bob@example.org"


def test_lookup_through_an_alias(db):
    a = _add(db, email="ada@example.org")
    u = aliased(User)
    with Session(db) as session:
        assert session.scalars(select(u.id).where(u.email == "ada@example.org")).all() == [a]


def test_index_column_holds_no_plaintext_and_is_the_documented_hmac(db, keyrings):
    user_id = _add(db, email="ada@example.org")
    stored = raw(db, "ss_users", "email_index", user_id)
    assert b"ada" not in stored and len(stored) == 4 + 16
    key = keyrings.idx.primary
    assert stored[:4] == key.key_id.to_bytes(4, "big")
    info = b"sealstore/v1/blind-index" + column_context("ss_users", "email_index")
    hkey = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        key.reveal_material()
    )
    assert stored[4:] == hmac.new(hkey, b"ada@example.org", hashlib.sha256).digest()[:16]
    # a keyed hash: neither the plain hash nor the column key's material gives the same bytes
    assert stored[4:] != hashlib.sha256(b"ada@example.org").digest()[:16]


def test_same_value_in_two_rows_has_the_same_index_but_different_ciphertexts(db):
    a = _add(db, email="same@example.org")
    b = _add(db, email="same@example.org")
    assert raw(db, "ss_users", "email_index", a) == raw(db, "ss_users", "email_index", b)
    assert raw(db, "ss_users", "email", a) != raw(db, "ss_users", "email", b)
    assert _ids(db, User.email == "same@example.org") == [a, b]


def test_orm_update_keeps_the_index_current(db):
    user_id = _add(db, email="old@example.org")
    with Session(db) as session:
        user = session.get(User, user_id)
        user.email = "new@example.org"
        session.commit()
        assert user.email_index == raw(db, "ss_users", "email_index", user_id)
    assert _ids(db, User.email == "new@example.org") == [user_id]
    assert _ids(db, User.email == "old@example.org") == []
    with Session(db) as session:  # an update of another column leaves the index alone
        before = raw(db, "ss_users", "email_index", user_id)
        session.get(User, user_id).name = "renamed"
        session.commit()
    assert raw(db, "ss_users", "email_index", user_id) == before
    with Session(db) as session:
        session.get(User, user_id).email = None
        session.commit()
    assert raw(db, "ss_users", "email_index", user_id) is None


def test_core_updates_keep_the_index_current(db):
    users = User.__table__
    with db.begin() as conn:
        conn.execute(insert(users), [{"id": 1, "email": "a@x.org"}, {"id": 2, "email": "b@x.org"}])
        conn.execute(update(users).where(users.c.id == 1).values(email="c@x.org"))
        conn.execute(
            update(users).where(users.c.id == bindparam("uid")),
            [{"uid": 2, "email": "d@x.org"}],
        )
    assert _ids(db, User.email == "c@x.org") == [1]
    assert _ids(db, User.email == "d@x.org") == [2]
    assert _ids(db, User.email.in_(["a@x.org", "b@x.org"])) == []


def test_orm_bulk_paths_keep_the_index_current(db):
    with Session(db) as session:
        session.bulk_insert_mappings(
            User, [{"id": i, "email": f"u{i}@x.org"} for i in range(1, 21)]
        )
        session.execute(insert(User), [{"id": i, "email": f"u{i}@x.org"} for i in range(21, 41)])
        session.commit()
    assert _ids(db, User.email == "u7@x.org") == [7]
    assert _ids(db, User.email == "u33@x.org") == [33]
    with Session(db) as session:
        session.execute(update(User), [{"id": 7, "email": "seven@x.org"}])
        session.bulk_update_mappings(User, [{"id": 33, "email": "thirty-three@x.org"}])
        session.execute(update(User).where(User.id == 8).values(email="eight@x.org"))
        session.commit()
    assert _ids(db, User.email == "seven@x.org") == [7]
    assert _ids(db, User.email == "thirty-three@x.org") == [33]
    assert _ids(db, User.email == "eight@x.org") == [8]
    assert _ids(db, User.email.in_(["u7@x.org", "u8@x.org", "u33@x.org"])) == []


def test_core_table_with_the_index_declared_before_its_source(db):
    with db.begin() as conn:
        conn.execute(insert(events), [{"id": i, "payload": f"event {i}"} for i in range(1, 31)])
    with db.connect() as conn:
        ids = (
            conn.execute(select(events.c.id).where(events.c.payload == "event 17")).scalars().all()
        )
    assert ids == [17]


def test_update_from_a_sql_expression_is_refused(db):
    _add(db, email="a@x.org", name="someone")
    with Session(db) as session, pytest.raises(UnsealedExpression):
        session.execute(update(User).where(User.id == 1).values(email=func.lower(User.name)))


def test_index_key_rotation_keeps_lookups_working(db, keyrings):
    old = _add(db, email="old@x.org")
    old_kid = keyrings.idx.primary.key_id
    new_kid = keyrings.idx.rotate().key_id
    new = _add(db, email="new@x.org")
    index_type = User.__table__.c.email_index.type
    assert index_type.key_id_of(raw(db, "ss_users", "email_index", old)) == old_kid
    assert index_type.key_id_of(raw(db, "ss_users", "email_index", new)) == new_kid
    assert index_type.needs_reindex(raw(db, "ss_users", "email_index", old))
    assert not index_type.needs_reindex(raw(db, "ss_users", "email_index", new))
    assert _ids(db, User.email == "old@x.org") == [old]  # both index keys are queried
    assert _ids(db, User.email == "new@x.org") == [new]
    keyrings.idx.retire(old_kid)  # too early: rows still indexed under it are not found
    assert _ids(db, User.email == "old@x.org") == []
    with Session(db) as session:  # re-indexing = writing the value again
        session.get(User, old).email = "old@x.org"
        session.get(User, old).email_index = index_type.compute("old@x.org")
        session.commit()
    assert _ids(db, User.email == "old@x.org") == [old]


def test_index_keyring_must_be_separate(db, keyrings):
    use_keyring(keyrings.enc, name="index")  # the same object under both names
    with Session(db) as session:
        session.add(User(email="a@x.org"))
        with pytest.raises(StatementError) as info:
            session.commit()
    assert isinstance(info.value.orig, BlindIndexError)
    with pytest.raises(BlindIndexError):
        select(User).where(User.email == "a@x.org")


def test_index_on_the_encryption_keyring_name_is_refused():
    t = Table(
        "bad",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("email", EncryptedString(50)),
        Column("email_index", BlindIndex("email", keyring="default")),
    )
    with pytest.raises(BlindIndexError, match="separate"):
        t.c.email_index.type.compute("a@x.org")


def test_truncation_size_sets_the_stored_width(db, keyrings):
    t = Table(
        "ss_short_index",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("email", EncryptedString(50)),
        Column("email_index", BlindIndex("email", size=2)),
    )
    t.create(db)
    with db.begin() as conn:
        conn.execute(insert(t), [{"id": i, "email": f"user{i}@x.org"} for i in range(1, 601)])
        stored = conn.execute(select(t.c.email_index)).scalars().all()
        hits = conn.execute(select(t.c.id).where(t.c.email == "user5@x.org")).scalars().all()
    assert {len(s) for s in stored} == {4 + 2}
    # 600 values in 65536 buckets: the row is found, possibly with a few collisions, which is
    # why short indexes need the decrypted value re-checked (docs/COLUMNS.md)
    assert 5 in hits and len(hits) < 10
    assert len(set(stored)) > 500  # 2 bytes still spread the 600 values over many buckets


def test_unsupported_comparisons_raise(keyrings):
    email = User.email
    for build in (
        lambda: email < "a",
        lambda: email >= "a",
        lambda: email.like("a%"),
        lambda: email.ilike("a%"),
        lambda: email.contains("a"),
        lambda: email.startswith("a"),
        lambda: email.between("a", "b"),
        lambda: email + "suffix",
        lambda: email.in_(select(User.name)),
        lambda: User.ssn == "123-45-6789",  # no blind index on ssn
        lambda: User.profile == {"a": 1},
        lambda: User.visits > 3,
    ):
        with pytest.raises(UnsupportedComparison):
            build()
    # comparisons with another SQL expression raise when compiled (SQLAlchemy compares columns
    # internally, see test_sqlalchemy_lookups.py)
    for refused in (email == User.name, email != User.ssn, User.ssn == func.lower("x")):
        with pytest.raises(UnsupportedComparison):
            str(select(User.id).where(refused))
    # NULL checks are meaningful on ciphertext and stay allowed
    assert "IS NULL" in str(select(User.id).where(User.ssn.is_(None)))
    assert "IS NOT NULL" in str(select(User.id).where(User.ssn != None))  # noqa: E711


def test_a_closed_index_keyring_computes_no_index_value(db, keyrings):
    with Session(db) as session:
        session.add(User(email="before@x.org"))
        session.commit()
    keyrings.idx.close()  # wipes the derived HMAC keys; a cached one must not keep working
    with Session(db) as session:
        session.add(User(email="after@x.org"))
        with pytest.raises(StatementError) as info:
            session.commit()
    assert isinstance(info.value.orig, KeyNotUsable)
    with pytest.raises(KeyNotUsable):
        select(User).where(User.email == "before@x.org")
