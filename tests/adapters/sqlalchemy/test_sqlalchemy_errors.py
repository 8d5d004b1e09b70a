"""Errors on the SQLAlchemy paths carry no plaintext and no part of a stored value, in their
message or anywhere in their exception chain (SQLite, PostgreSQL, MariaDB)."""

from __future__ import annotations

import pytest
from sqlalchemy import Integer, create_engine, insert, select, text
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from sealstore.errors import (
    InvalidTag,
    MalformedCiphertext,
    SealstoreError,
    UndecodableValue,
    UnknownKeyId,
    ValueTooLong,
)
from sealstore.format import column_context
from sealstore.keyring import Keyring

from sqlalchemy_cases import Secret, User, db, keyrings, raw, write_raw  # noqa: F401

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
            conn.execute(
                insert(users), [{"id": 1, "ssn": "SECRET-0001-TOO-LONG", "email": "who@x.org"}]
            )
        assert isinstance(info.value.orig, ValueTooLong)
        text = _texts(info.value)
        assert "SECRET-0001" not in text and "who@x.org" not in text
    finally:
        User.__table__.drop(engine, checkfirst=True)
        engine.dispose()


# ---- read errors name the table, the column and, where the result holds it, the row ----------

MARKER = "SECRET-0001"


def _assert_clean(exc, stored: bytes) -> None:
    """No plaintext marker and no 6-byte window of the stored value, in any form, anywhere in
    the exception chain's str(), repr() or args."""
    text = _texts(exc)
    for part in (MARKER, "SECRET", "123-45", "0001"):
        assert part not in text, part
    for i in range(max(len(stored) - 5, 1)):
        window = stored[i : i + 6]
        for form in (window.hex(), repr(window)[2:-1], window.decode("latin-1")):
            assert form not in text, (i, form)


def _stored_cases(db, keyrings):
    """(name, expected error class, stored bytes) for each kind of read failure of ss_users.ssn."""
    ctx = users.c.ssn.type.context()
    with Session(db) as session:
        session.add(User(id=1, ssn=MARKER, email="who@example.org"))
        session.commit()
    good = raw(db, "ss_users", "ssn", 1)
    tampered = bytearray(good)
    tampered[-5] ^= 0x40
    other_key = Keyring.generate()
    return [
        ("tampered", InvalidTag, bytes(tampered)),
        ("never sealed", MalformedCiphertext, b"123-45-6789 " + MARKER.encode()),
        ("never sealed, header-like", MalformedCiphertext, b"\x01\x01" + b"123-45-6789" * 4),
        ("another column", InvalidTag, raw(db, "ss_users", "email", 1)),
        (
            "another table",
            InvalidTag,
            keyrings.enc.seal(MARKER.encode(), column_context("t", "ssn")),
        ),
        ("undecodable", UndecodableValue, keyrings.enc.seal(MARKER.encode() + b"\xff\xfe", ctx)),
        ("unknown key", UnknownKeyId, other_key.seal(MARKER.encode(), ctx)),
        ("truncated", MalformedCiphertext, good[:30]),
    ]


def _read_paths(db):
    """(name, call, names the primary key): every way of reading the row back."""
    table_select = select(users)
    return [
        ("session.get", lambda: _orm(db, lambda s: s.get(User, 1)), True),
        ("session.scalars", lambda: _orm(db, lambda s: s.scalars(select(User)).all()), True),
        ("session.execute.first", lambda: _orm(db, lambda s: s.execute(select(User)).first()), True),
        ("core select all", lambda: _run(db, table_select, "all"), True),
        ("core fetchone", lambda: _run(db, table_select, "fetchone"), True),
        ("core fetchmany", lambda: _run(db, table_select, "fetchmany"), True),
        ("core column only", lambda: _run(db, select(users.c.ssn), "all"), False),
        ("core, opened by SQLAlchemy", lambda: _run(
            db, select(users.c.id, users.c.ssn), "all", sealstore_open_on_fetch=False), False),
        ("text() with typed columns", lambda: _run(db, text(
            "SELECT id, ssn FROM ss_users").columns(id=Integer, ssn=users.c.ssn.type), "all"), False),
        ("type.open", lambda: users.c.ssn.type.open(raw(db, "ss_users", "ssn", 1)), False),
    ]  # fmt: skip


def _orm(db, read):
    with Session(db) as session:  # closed on the error too: MariaDB would keep its locks
        return read(session)


def _run(db, stmt, how, **options):
    with db.connect() as conn:
        result = conn.execution_options(**options).execute(stmt)
        return getattr(result, how)()


def test_read_errors_name_the_column_and_row_and_carry_nothing_of_the_value(db, keyrings):
    cases = _stored_cases(db, keyrings)
    for case, error, stored in cases:
        write_raw(db, "ss_users", "ssn", 1, stored)
        for path, read, names_row in _read_paths(db):
            with pytest.raises(SealstoreError) as info:
                read()
            exc = info.value
            assert type(exc) is error, (case, path, exc)
            message = str(exc)
            assert message.startswith("ss_users.ssn"), (case, path, message)
            assert ("(primary key 1)" in message) is names_row, (case, path, message)
            assert (exc.table, exc.column) == ("ss_users", "ssn")
            assert exc.__cause__ is None and exc.__context__ is None, (case, path)
            _assert_clean(exc, stored)


def test_the_failing_row_is_named_among_many(db, keyrings):
    with db.begin() as conn:
        conn.execute(insert(users), [{"id": i, "ssn": f"SECRET-{i:04d}"} for i in range(1, 601)])
    write_raw(
        db, "ss_users", "ssn", 437, raw(db, "ss_users", "ssn", 12)
    )  # another row's value is fine
    write_raw(db, "ss_users", "ssn", 522, b"not sealed SECRET-0522")
    with pytest.raises(MalformedCiphertext, match=r"^ss_users\.ssn \(primary key 522\)") as info:
        with Session(db) as session:
            session.scalars(select(User).order_by(User.id)).all()
    assert "SECRET" not in _texts(info.value)
    with db.connect() as conn:  # the rows before it opened
        assert (
            conn.execute(select(users.c.ssn).where(users.c.id == 437)).scalar_one() == "SECRET-0012"
        )


def test_row_bound_read_errors_name_the_row(db, keyrings):
    with Session(db) as session:
        secret = Secret(owner="ada", token=MARKER)
        session.add(secret)
        session.commit()
        key = secret.id
    stored = raw(db, "ss_secrets", "token", key)
    tampered = bytearray(stored)
    tampered[-1] ^= 1
    write_raw(db, "ss_secrets", "token", key, bytes(tampered))
    with pytest.raises(InvalidTag) as info, Session(db) as session:
        session.get(Secret, key)
    assert str(info.value).startswith(f"ss_secrets.token (primary key {key!r})")
    assert info.value.__context__ is None and info.value.__cause__ is None
    _assert_clean(info.value, bytes(tampered))


def test_statement_errors_show_parameters_unless_hidden(db_url, keyrings):
    """Without hide_parameters SQLAlchemy's message lists the plaintext (what the docs warn of);
    with it, neither the message nor the chain does, for Core executemany and ORM flushes."""
    for hide in (False, True):
        engine = create_engine(db_url, hide_parameters=hide)
        try:
            User.__table__.create(engine, checkfirst=True)
            with pytest.raises(StatementError) as core, engine.begin() as conn:
                conn.execute(
                    insert(users), [{"id": 1, "email": "who@x.org", "ssn": "SECRET-0001-TOO-LONG"}]
                )
            with pytest.raises(StatementError) as orm, Session(engine) as session:
                session.add(User(id=2, email="who@x.org", ssn="SECRET-0001-TOO-LONG"))
                session.flush()
            for info in (core, orm):
                assert isinstance(info.value.orig, ValueTooLong)
                assert ("who@x.org" in _texts(info.value)) is not hide
                if hide:
                    assert "SECRET" not in _texts(info.value)
        finally:
            User.__table__.drop(engine, checkfirst=True)
            engine.dispose()


def test_read_errors_are_named_on_the_python_path_too(db, keyrings):
    """AES-256-GCM values are opened in Python, not by the native opener: same errors."""
    from sealstore.keyring import use_keyring

    use_keyring(Keyring.generate("AES-256-GCM"))
    with Session(db) as session:
        session.add(User(id=1, ssn=MARKER))
        session.commit()
    tampered = bytearray(raw(db, "ss_users", "ssn", 1))
    tampered[-3] ^= 0x10
    write_raw(db, "ss_users", "ssn", 1, bytes(tampered))
    for path, read, names_row in _read_paths(db):
        with pytest.raises(InvalidTag) as info:
            read()
        assert str(info.value).startswith(
            "ss_users.ssn (primary key 1)" if names_row else "ss_users.ssn:"
        )
        assert info.value.__context__ is None
        _assert_clean(info.value, bytes(tampered))


def test_a_self_join_names_the_row_the_failing_value_belongs_to(db, keyrings):
    from sqlalchemy.orm import aliased

    with db.begin() as conn:
        conn.execute(insert(users), [{"id": 1, "ssn": "SECRET-0001", "visits": 2},
                                     {"id": 2, "ssn": "SECRET-0002", "visits": 1}])  # fmt: skip
    write_raw(db, "ss_users", "ssn", 2, b"never sealed SECRET-0002")
    other = aliased(User)
    stmt = select(User.id, User.notes, other.id, other.ssn).join(other, other.id == User.id + 1)
    with pytest.raises(MalformedCiphertext) as info, Session(db) as session:
        session.execute(stmt).all()
    assert str(info.value).startswith("ss_users.ssn (primary key 2)"), str(info.value)
    with pytest.raises(MalformedCiphertext) as info, db.connect() as conn:
        conn.execute(select(users.c.id, users.c.ssn).where(users.c.id == 2)).all()
    assert str(info.value).startswith("ss_users.ssn (primary key 2)")
