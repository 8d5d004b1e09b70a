"""Encrypted columns on a real database (every test runs on SQLite and on PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
from sqlalchemy import insert, select, text, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from sealstore.errors import InvalidTag, UnknownKeyId, UnknownKeyring, ValueTooLong
from sealstore.format import HEADER_SIZE, KEY_ID_OFFSET, KEY_ID_SIZE, VERSION, Suite, parse_header
from sealstore.keyring import forget_keyring

from sqlalchemy_cases import User, Vault, db, events, keyrings, raw, write_raw  # noqa: F401

UTC = dt.timezone.utc

FULL = dict(
    ssn="123-45-6789",
    notes="private notes: the quick brown fox",
    profile={"name": "Ada Lovelace", "langs": ["en", "fr"], "age": 36, "admin": True},
    avatar=b"\x89PNG\r\n\x1a\n-secret-avatar-bytes",
    born=dt.date(1815, 12, 10),
    seen_at=dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC),
    balance=decimal.Decimal("1234.50"),
    visits=2**40 + 7,
    active=True,
    ref=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    email="ada@example.org",
    name="plain name",
)
SECRET_COLUMNS = ("ssn", "notes", "profile", "avatar", "born", "seen_at", "balance", "visits",
                  "active", "ref", "email")  # fmt: skip


def _add(engine, **values) -> int:
    with Session(engine) as session:
        user = User(**values)
        session.add(user)
        session.commit()
        return user.id


def _load(engine, user_id: int) -> User:
    with Session(engine, expire_on_commit=False) as session:
        return session.get(User, user_id)


def test_raw_values_hold_no_plaintext_and_start_with_the_header(db, keyrings):
    user_id = _add(db, **FULL)
    primary = keyrings.enc.primary.key_id
    needles = [b"123-45-6789", b"quick brown", b"Lovelace", b"secret-avatar", b"1815",
               b"1234.50", b"ada@example.org", str(2**40 + 7).encode(), FULL["ref"].bytes]  # fmt: skip
    for column in SECRET_COLUMNS:
        stored = raw(db, "ss_users", column, user_id)
        assert stored[0] == VERSION
        assert stored[1] in set(Suite)
        assert int.from_bytes(stored[KEY_ID_OFFSET : KEY_ID_OFFSET + KEY_ID_SIZE], "big") == primary
        assert parse_header(stored).key_id == primary
        for needle in needles:
            assert needle not in stored, (column, needle)
    # the plaintext column is untouched, as a control for the raw reader
    assert raw(db, "ss_users", "name", user_id) == "plain name"


def test_key_id_is_readable_in_sql(db, keyrings):
    user_id = _add(db, ssn="111-11-1111")
    with db.connect() as conn:
        key_id = conn.execute(
            text("SELECT substr(ssn, :start, :size) FROM ss_users WHERE id = :id"),
            {"start": KEY_ID_OFFSET + 1, "size": KEY_ID_SIZE, "id": user_id},
        ).scalar_one()
    assert bytes(key_id) == keyrings.enc.primary.key_id.to_bytes(4, "big")


def test_orm_round_trip_of_every_type(db):
    user_id = _add(db, **FULL)
    user = _load(db, user_id)
    for column in SECRET_COLUMNS:
        assert getattr(user, column) == FULL[column], column
    assert user.seen_at.utcoffset() == dt.timedelta(0)
    assert isinstance(user.balance, decimal.Decimal) and isinstance(user.ref, uuid.UUID)


def test_nulls_stay_sql_null(db):
    user_id = _add(db, name="only plaintext")
    user = _load(db, user_id)
    for column in SECRET_COLUMNS:
        assert getattr(user, column) is None
        assert raw(db, "ss_users", column, user_id) is None
    with db.connect() as conn:
        nulls = (
            conn.execute(
                select(User.id).where(User.ssn.is_(None), User.email == None)  # noqa: E711
            )
            .scalars()
            .all()
        )
    assert nulls == [user_id]


def test_empty_values_are_sealed_not_null(db):
    user_id = _add(db, ssn="", notes="", avatar=b"", profile={}, email="")
    user = _load(db, user_id)
    assert (user.ssn, user.notes, user.avatar, user.profile, user.email) == ("", "", b"", {}, "")
    stored = raw(db, "ss_users", "ssn", user_id)
    assert len(stored) == parse_header(stored).overhead  # header + nonce + tag, no payload


def test_unicode_and_declared_length(db):
    ssn = "ü𝄞ßé中文ñø😀Ωx"  # 11 characters, 26 UTF-8 bytes
    user_id = _add(db, ssn=ssn, notes="naïve café 😀" * 100)
    assert _load(db, user_id).ssn == ssn
    assert _load(db, user_id).notes == "naïve café 😀" * 100
    with pytest.raises(StatementError) as info:
        _add(db, ssn="x" * 12)
    assert isinstance(info.value.orig, ValueTooLong)


def test_large_values(db):
    profile = {"items": [{"i": i, "text": "ü" * 40, "n": i * 0.5} for i in range(12000)]}
    assert len(json.dumps(profile)) > 1 << 20
    blob = bytes(range(256)) * 4096  # 1 MiB
    user_id = _add(db, profile=profile, avatar=blob)
    user = _load(db, user_id)
    assert user.profile == profile
    assert user.avatar == blob


def test_swapping_ciphertexts_between_rows_fails_only_with_row_binding(db):
    # column binding (the default) ties a value to its table and column, not to its row:
    # moving it to another row of the same column still opens (row binding: test_sqlalchemy_rows)
    a = _add(db, ssn="111-11-1111")
    b = _add(db, ssn="222-22-2222")
    write_raw(db, "ss_users", "ssn", b, raw(db, "ss_users", "ssn", a))
    assert _load(db, b).ssn == "111-11-1111"


def test_swapping_ciphertexts_between_columns_fails(db):
    user_id = _add(db, ssn="111-11-1111", email="a@example.org")
    write_raw(db, "ss_users", "notes", user_id, raw(db, "ss_users", "ssn", user_id))
    with pytest.raises(InvalidTag):
        _load(db, user_id)


def test_copying_a_ciphertext_to_another_table_fails(db):
    user_id = _add(db, ssn="111-11-1111")
    with db.begin() as conn:
        conn.execute(insert(events), {"id": 1, "payload": "x"})
    write_raw(db, "ss_events", "payload", 1, raw(db, "ss_users", "ssn", user_id))
    with db.connect() as conn, pytest.raises(InvalidTag):
        conn.execute(select(events.c.payload)).all()


def test_tampered_value_fails(db):
    user_id = _add(db, ssn="111-11-1111")
    stored = bytearray(raw(db, "ss_users", "ssn", user_id))
    stored[-1] ^= 1
    write_raw(db, "ss_users", "ssn", user_id, bytes(stored))
    with pytest.raises(InvalidTag):
        _load(db, user_id)


def test_rotation_old_rows_read_new_writes_use_the_new_key(db, keyrings):
    old_key = keyrings.enc.primary.key_id
    old_row = _add(db, ssn="111-11-1111", profile={"v": 1})
    new_key = keyrings.enc.rotate().key_id
    assert new_key != old_key
    new_row = _add(db, ssn="222-22-2222", profile={"v": 2})
    assert parse_header(raw(db, "ss_users", "ssn", old_row)).key_id == old_key
    assert parse_header(raw(db, "ss_users", "ssn", new_row)).key_id == new_key
    assert _load(db, old_row).ssn == "111-11-1111"
    assert _load(db, new_row).ssn == "222-22-2222"
    with Session(db) as session:  # rewriting an old row seals it under the primary
        session.get(User, old_row).ssn = "333-33-3333"
        session.commit()
    assert parse_header(raw(db, "ss_users", "ssn", old_row)).key_id == new_key
    assert parse_header(raw(db, "ss_users", "profile", old_row)).key_id == old_key
    assert _load(db, old_row).profile == {"v": 1}


def test_core_executemany_insert_and_select(db, keyrings):
    rows = [{"id": i, "payload": f"event {i}", "body": "b" * i} for i in range(1, 201)]
    with db.begin() as conn:
        conn.execute(insert(events), rows)
    with db.connect() as conn:
        got = conn.execute(
            select(events.c.id, events.c.payload, events.c.body).order_by(events.c.id)
        ).all()
        raw_payloads = conn.execute(text("SELECT payload FROM ss_events")).scalars().all()
    assert [tuple(r) for r in got] == [(r["id"], r["payload"], r["body"]) for r in rows]
    assert all(
        bytes(p)[2:6] == keyrings.enc.primary.key_id.to_bytes(4, "big") for p in raw_payloads
    )
    assert not any(b"event" in bytes(p) for p in raw_payloads)


def test_core_update_reseals(db):
    with db.begin() as conn:
        conn.execute(insert(events), {"id": 1, "payload": "before", "body": "x"})
    first = raw(db, "ss_events", "payload", 1)
    with db.begin() as conn:
        conn.execute(update(events).where(events.c.id == 1).values(payload="after"))
    assert raw(db, "ss_events", "payload", 1) != first
    with db.connect() as conn:
        assert conn.execute(select(events.c.payload)).scalar_one() == "after"


def test_bulk_insert_mappings_and_orm_bulk_insert(db):
    with Session(db) as session:
        session.bulk_insert_mappings(
            User, [{"id": i, "ssn": f"{i:03d}-00-0000", "profile": {"i": i}} for i in range(1, 51)]
        )
        session.execute(
            insert(User),
            [{"id": i, "ssn": f"{i:03d}-00-0000", "profile": {"i": i}} for i in range(51, 101)],
        )
        session.commit()
    with Session(db) as session:
        users = session.scalars(select(User).order_by(User.id)).all()
    assert [(u.id, u.ssn, u.profile) for u in users] == [
        (i, f"{i:03d}-00-0000", {"i": i}) for i in range(1, 101)
    ]
    assert b"-00-0000" not in raw(db, "ss_users", "ssn", 7)


def test_each_column_uses_its_named_keyring(db, keyrings):
    with Session(db) as session:
        session.add(Vault(id=1, code="launch-code"))
        session.commit()
    stored = raw(db, "ss_vault", "code", 1)
    assert parse_header(stored).key_id == keyrings.vault.primary.key_id
    assert keyrings.vault.open(stored, Vault.__table__.c.code.type.context()) == b"launch-code"
    with pytest.raises(UnknownKeyId):
        keyrings.enc.open(stored, Vault.__table__.c.code.type.context())


def test_keyring_is_resolved_at_run_time(db, keyrings):
    forget_keyring("vault")
    with Session(db) as session:
        session.add(Vault(id=2, code="x"))
        with pytest.raises(StatementError) as info:
            session.commit()
    assert isinstance(info.value.orig, UnknownKeyring)
    assert "vault" in str(info.value.orig)
