"""Errors on the SQLAlchemy paths carry no plaintext and no part of a stored value, in their
message or anywhere in their exception chain (SQLite, PostgreSQL, MariaDB)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from sealstore.errors import MalformedCiphertext, SealstoreError, ValueTooLong

from sqlalchemy_cases import User, db, keyrings, write_raw  # noqa: F401

users = User.__table__


def _chain(exc) -> list[BaseException]:
    out = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _texts(exc) -> str:
    return " ".join(f"{e!r} {e!s} {e.args!r}" for e in _chain(exc))


@pytest.mark.parametrize("stored", [b"123-45-6789", b"\x01\x01" + b"123-45-6789" * 8, b"\x01"])
def test_a_never_sealed_value_names_nothing_of_itself(db, stored):
    with db.begin() as conn:
        conn.execute(insert(users).values(id=1))
    write_raw(db, "ss_users", "ssn", 1, stored)
    with Session(db) as session, pytest.raises(SealstoreError) as info:
        session.get(User, 1).ssn
    assert isinstance(info.value, MalformedCiphertext)
    text = _texts(info.value)
    for part in (b"123-45", b"123-45-", "123-45", repr(b"123-45")[2:-1]):
        assert str(part) not in text


def test_hide_parameters_keeps_plaintext_out_of_statement_errors(db_url, keyrings):
    engine = create_engine(db_url, hide_parameters=True)
    try:
        User.__table__.create(engine, checkfirst=True)
        with pytest.raises(StatementError) as info, engine.begin() as conn:
            conn.execute(insert(users), [{"id": 1, "ssn": "SECRET-0001-TOO-LONG", "email": "who@x.org"}])
        assert isinstance(info.value.orig, ValueTooLong)
        text = _texts(info.value)
        assert "SECRET-0001" not in text and "who@x.org" not in text
    finally:
        User.__table__.drop(engine, checkfirst=True)
        engine.dispose()
