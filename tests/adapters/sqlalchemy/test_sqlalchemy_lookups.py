"""Blind-index lookups with values known only at execution (bindparam(), lambda_stmt());
comparisons with other SQL expressions and computations over ciphertexts in a SELECT list
(refused when compiled, never in SQLAlchemy's own column membership tests); server defaults
(refused at definition).  SQLite, PostgreSQL, MariaDB."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    Column,
    FetchedValue,
    Integer,
    MetaData,
    Table,
    bindparam,
    case,
    func,
    insert,
    lambda_stmt,
    literal,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, aliased, mapped_column

from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.errors import BlindIndexError, UnsupportedComparison, UnsupportedOperation

from sqlalchemy_cases import User, db, keyrings  # noqa: F401

users = User.__table__


def _seed(engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(users),
            [{"id": i, "email": f"u{i}@x.org", "name": f"u{i}@x.org"} for i in (1, 2, 3)],
        )


def test_bindparam_lookups(db):
    _seed(db)
    eq = select(User.id).where(User.email == bindparam("e")).order_by(User.id)
    ne = select(User.id).where(User.email != bindparam("e")).order_by(User.id)
    among = select(User.id).where(User.email.in_(bindparam("es"))).order_by(User.id)
    outside = select(User.id).where(User.email.not_in(bindparam("es"))).order_by(User.id)
    with Session(db) as session:
        for _ in range(2):  # the second round runs SQLAlchemy's cached compiled forms
            assert session.scalars(eq, {"e": "u1@x.org"}).all() == [1]
            assert session.scalars(eq, {"e": "u2@x.org"}).all() == [2]
            assert session.scalars(eq, {"e": "nobody@x.org"}).all() == []
            assert session.scalars(ne, {"e": "u2@x.org"}).all() == [1, 3]
            assert session.scalars(among, {"es": ["u1@x.org", "u3@x.org", "z"]}).all() == [1, 3]
            assert session.scalars(outside, {"es": ["u1@x.org"]}).all() == [2, 3]
        assert session.scalars(
            select(User.id).filter_by(email=bindparam("e")), {"e": "u3@x.org"}
        ).all() == [3]
    with db.connect() as conn:  # Core, and a default value on the parameter
        assert conn.execute(
            select(users.c.id).where(users.c.email == bindparam("e")), {"e": "u2@x.org"}
        ).scalars().all() == [2]
        assert conn.execute(
            select(users.c.id).where(users.c.email == bindparam("e", "u3@x.org"))
        ).scalars().all() == [3]
        assert conn.execute(
            select(users.c.id).where(users.c.email == literal("u1@x.org"))
        ).scalars().all() == [1]


def test_lambda_stmt_lookups(db):
    _seed(db)

    def find(session, value):
        return session.scalars(
            lambda_stmt(lambda: select(User.id).where(User.email == value))
        ).all()

    def among(session, values):
        return sorted(
            session.scalars(lambda_stmt(lambda: select(User.id).where(User.email.in_(values))))
        )

    with Session(db) as session:
        assert [find(session, f"u{i}@x.org") for i in (1, 2, 3)] == [[1], [2], [3]]
        assert find(session, "nobody@x.org") == []
        assert among(session, ["u1@x.org", "u2@x.org"]) == [1, 2]
        assert among(session, ["u3@x.org"]) == [3]


def test_lookups_see_every_index_key_during_rotation(db, keyrings):
    _seed(db)
    keyrings.idx.rotate()
    with db.begin() as conn:
        conn.execute(insert(users).values(id=4, email="u4@x.org"))
    eq = select(User.id).where(User.email == bindparam("e"))
    with Session(db) as session:
        for ident in (1, 4):  # indexed under the old (active) key and under the new primary
            value = f"u{ident}@x.org"
            assert session.scalars(eq, {"e": value}).all() == [ident]
            assert session.scalars(
                lambda_stmt(lambda: select(User.id).where(User.email == value))
            ).all() == [ident]


def test_a_null_lookup_value_is_refused(db):
    _seed(db)
    with Session(db) as session:
        with pytest.raises(BlindIndexError):
            session.scalars(select(User.id).where(User.email == bindparam("e")), {"e": None}).all()
        with pytest.raises(BlindIndexError):
            session.scalars(
                select(User.id).where(User.email.in_(bindparam("es"))), {"es": ["u1@x.org", None]}
            ).all()
        with pytest.raises(BlindIndexError):  # a string is not a list of values
            session.scalars(
                select(User.id).where(User.email.in_(bindparam("es"))), {"es": "u1@x.org"}
            ).all()


def test_comparisons_with_sql_expressions_raise_when_compiled(db):
    _seed(db)
    with Session(db) as session:
        for criterion in (
            User.email == User.name,
            User.ssn != User.name,
            User.email == func.lower("U1@x.org"),
        ):
            with pytest.raises(UnsupportedComparison):
                session.execute(select(User.id).where(criterion))
    # SQLAlchemy's own column membership tests answer by identity, as for any column
    assert users.c.email in [users.c.name, users.c.email]
    assert users.c.email not in [users.c.name, users.c.ssn]
    assert [users.c.name, users.c.ssn, users.c.email].index(users.c.email) == 2


def test_selecting_computations_over_ciphertexts_raises_when_compiled(db):
    _seed(db)
    with Session(db) as session:
        for expr in (
            func.max(User.email),
            func.min(users.c.ssn),
            func.coalesce(User.ssn, User.notes),
            case((User.id == 1, User.ssn), else_=User.notes),
            func.max(User.ssn).over(),
        ):
            with pytest.raises(UnsupportedComparison):
                session.execute(select(expr))
        # one stored value, however it is reached, still opens
        sub = select(User.email).where(User.id == 2).subquery()
        assert session.scalars(select(sub.c.email)).all() == ["u2@x.org"]
        assert session.scalars(
            select(select(User.email).where(User.id == 3).scalar_subquery())
        ).all() == ["u3@x.org"]
        assert session.scalars(select(User.email.label("e")).where(User.id == 1)).all() == [
            "u1@x.org"
        ]
        assert session.scalars(select(aliased(User).email).order_by(None).limit(1)).all()


def test_server_defaults_are_refused_when_the_column_is_defined():
    for kwargs in (
        {"server_default": "plain"},
        {"server_default": text("'plain'")},
        {"server_onupdate": FetchedValue()},
        {"server_default": FetchedValue()},
    ):
        with pytest.raises(UnsupportedOperation, match="server_default"):
            Table(
                "ss_refused",
                MetaData(),
                Column("id", Integer, primary_key=True),
                Column("secret", EncryptedString(10), **kwargs),
            )
    with pytest.raises(UnsupportedOperation):

        class Refused(DeclarativeBase):
            pass

        class Model(Refused):
            __tablename__ = "ss_refused_model"
            id: Mapped[int] = mapped_column(primary_key=True)
            secret: Mapped[str] = mapped_column(EncryptedString(10), server_default="plain")

    column = Table(
        "ss_allowed",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("secret", EncryptedString(10), default="sealed"),
    ).c.secret
    assert column.default.arg == "sealed"  # a Python default is sealed like any value
