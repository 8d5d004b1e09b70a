"""Row binding (``bind_row=True``): values bound to their row's primary key as well."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from sealstore.adapters.sqlalchemy import PreSealed, SealedRowValue, seal_for_row
from sealstore.errors import ColumnBindingError, InvalidTag
from sealstore.format import column_context, parse_header

from sqlalchemy_cases import Counter, Secret, User, db, keyrings, raw, write_raw  # noqa: F401

TOKEN = Secret.__table__.c.token


def _add(engine, **values) -> uuid.UUID:
    with Session(engine) as session:
        secret = Secret(**values)
        session.add(secret)
        session.commit()
        return secret.id


def _load(engine, key) -> Secret:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(Secret, key)


def test_orm_round_trip_and_in_memory_values(db):
    with Session(db) as session:
        secret = Secret(owner="ada", token="tok-ada", blob=b"\x00\x01")
        session.add(secret)
        session.flush()
        assert secret.id is not None  # filled from the Python default before sealing
        assert secret.token == "tok-ada"  # plaintext again after the flush, not a PreSealed
        session.commit()
        key = secret.id
        assert secret.token == "tok-ada"  # reloaded (expired on commit) and opened
    loaded = _load(db, key)
    assert (loaded.token, loaded.blob, loaded.owner) == ("tok-ada", b"\x00\x01", "ada")


def test_value_is_sealed_with_the_row_context(db, keyrings):
    key = _add(db, owner="ada", token="tok-ada")
    stored = raw(db, "ss_secrets", "token", key)
    assert b"tok-ada" not in stored
    assert parse_header(stored).key_id == keyrings.enc.primary.key_id
    row_ctx = column_context("ss_secrets", "token", (key,))
    assert keyrings.enc.open(stored, row_ctx) == b"tok-ada"
    with pytest.raises(InvalidTag):
        keyrings.enc.open(stored, column_context("ss_secrets", "token"))


def test_swapping_ciphertexts_between_rows_fails(db):
    a = _add(db, owner="a", token="tok-a")
    b = _add(db, owner="b", token="tok-b")
    write_raw(db, "ss_secrets", "token", b, raw(db, "ss_secrets", "token", a))
    assert _load(db, a).token == "tok-a"
    with pytest.raises(InvalidTag):
        _load(db, b)


def test_update_and_expired_attribute_reload(db):
    key = _add(db, owner="a", token="one")
    with Session(db) as session:
        secret = session.get(Secret, key)
        secret.token = "two"
        session.commit()  # expires: the next access reloads and opens
        assert secret.token == "two"
        secret.owner = "b"  # an update that does not touch the row-bound column
        session.commit()
        assert secret.token == "two"
    assert _load(db, key).token == "two"


def test_changing_the_primary_key_reseals(db):
    key = _add(db, owner="a", token="tok", blob=b"blob")
    new_key = uuid.uuid4()
    with Session(db) as session:
        secret = session.get(Secret, key)
        secret.id = new_key
        session.commit()
    moved = _load(db, new_key)
    assert (moved.token, moved.blob) == ("tok", b"blob")


def test_database_generated_keys_are_refused(db):
    with Session(db) as session:
        session.add(Counter(value="x"))
        with pytest.raises(ColumnBindingError, match="before INSERT"):
            session.flush()


def test_core_needs_seal_for_row(db):
    key = uuid.uuid4()
    with db.begin() as conn, pytest.raises(StatementError) as info:
        conn.execute(insert(Secret.__table__), {"id": key, "owner": "a", "token": "plain"})
    assert isinstance(info.value.orig, ColumnBindingError)
    sealed = seal_for_row(TOKEN, "tok-core", key)
    assert isinstance(sealed, PreSealed) and "tok-core" not in repr(sealed)
    with db.begin() as conn:
        conn.execute(insert(Secret.__table__), {"id": key, "owner": "a", "token": sealed})
        value = conn.execute(select(TOKEN).where(Secret.__table__.c.id == key)).scalar_one()
    assert isinstance(value, SealedRowValue)
    assert value.open(key) == "tok-core"
    with pytest.raises(InvalidTag):
        value.open(uuid.uuid4())
    assert _load(db, key).token == "tok-core"  # the ORM opens what Core wrote


def test_a_value_sealed_for_another_column_is_refused(db):
    key = uuid.uuid4()
    wrong = seal_for_row(Secret.__table__.c.blob, b"x", key)
    with db.begin() as conn, pytest.raises(StatementError) as info:
        conn.execute(insert(Secret.__table__), {"id": key, "owner": "a", "token": wrong})
    assert isinstance(info.value.orig, ColumnBindingError)


def test_bulk_insert_mappings_with_presealed_values(db):
    keys = [uuid.uuid4() for _ in range(20)]
    with Session(db) as session:
        session.bulk_insert_mappings(
            Secret,
            [
                {"id": k, "owner": f"o{i}", "token": seal_for_row(Secret.token, f"t{i}", k)}
                for i, k in enumerate(keys)
            ],
        )
        session.commit()
    with Session(db) as session:
        got = {s.id: s.token for s in session.scalars(select(Secret))}
        assert got == {k: f"t{i}" for i, k in enumerate(keys)}
        # the blind index on a row-bound column is computed from the plaintext
        assert session.scalars(select(Secret.id).where(Secret.token == "t7")).all() == [keys[7]]


def test_blind_index_on_a_row_bound_column(db):
    a = _add(db, owner="a", token="shared")
    b = _add(db, owner="b", token="shared")
    c = _add(db, owner="c", token="other")
    with Session(db) as session:
        hits = set(session.scalars(select(Secret.id).where(Secret.token == "shared")))
        assert {a, b} <= hits and c not in hits
        session.get(Secret, c).token = "shared"
        session.commit()
        assert c in set(session.scalars(select(Secret.id).where(Secret.token == "shared")))
    assert len(raw(db, "ss_secrets", "token_index", a)) == 4 + 8


def test_core_update_of_a_row_bound_column(db):
    key = _add(db, owner="a", token="old")
    with db.begin() as conn:
        conn.execute(
            update(Secret.__table__)
            .where(Secret.__table__.c.id == key)
            .values(token=seal_for_row(TOKEN, "new", key))
        )
    assert _load(db, key).token == "new"
    with Session(db) as session:
        assert session.scalars(select(Secret.id).where(Secret.token == "new")).all() == [key]


def test_seal_for_row_needs_a_row_bound_column():
    with pytest.raises(ColumnBindingError):
        seal_for_row(User.__table__.c.ssn, "x", 1)
