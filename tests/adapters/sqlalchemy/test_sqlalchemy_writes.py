"""Write paths: SQL expressions never reach an encrypted column, and every way of writing an
indexed column keeps its blind index in step (SQLite, PostgreSQL, MariaDB)."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    String,
    bindparam,
    func,
    insert,
    lambda_stmt,
    literal,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.errors import (
    DatabaseOperationFailed,
    DuplicateIndexValue,
    BlindIndexError,
    MalformedCiphertext,
    UnsealedExpression,
)

from sqlalchemy_cases import Secret, User, db, keyrings, raw  # noqa: F401

users = User.__table__
SECRET = "top secret"


def _dialect_insert(engine):
    return {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(
        engine.dialect.name, mysql.insert
    )


def _upsert(engine, stmt, set_):
    if engine.dialect.name in ("postgresql", "sqlite"):
        return stmt.on_conflict_do_update(index_elements=[users.c.id], set_=set_)
    return stmt.on_duplicate_key_update(set_)


def _seed(engine, *ids) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(users),
            [
                {"id": i, "email": f"old{i}@x.org", "ssn": "123-45-6789", "name": "plain"}
                for i in ids
            ],
        )


def _ids(engine, *criteria) -> list[int]:
    with Session(engine) as session:
        return sorted(session.scalars(select(User.id).where(*criteria)))


def _stored(engine, ident) -> tuple:
    return tuple(
        raw(engine, "ss_users", col, ident) for col in ("ssn", "notes", "email", "email_index")
    )


def _moved(engine, ident, new: str, old: str | None = None) -> None:
    """The row is found by its new value through the index, and no longer by the old one."""
    assert _ids(engine, User.email == new) == [ident]
    if old is not None:
        assert _ids(engine, User.email == old) == []
    with Session(engine) as session:
        assert session.get(User, ident).email == new


# ---- only sealed values reach an encrypted column ------------------------------------------------

REFUSED = {
    "function": lambda: update(users).where(users.c.id == 1).values(ssn=func.upper(SECRET)),
    "other column": lambda: update(users).where(users.c.id == 1).values(notes=users.c.name),
    "text": lambda: update(users).where(users.c.id == 1).values(notes=text(f"'{SECRET}'")),
    "literal_column": lambda: update(users).values(notes=literal_column(f"'{SECRET}'")),
    "typed literal": lambda: update(users).values(ssn=literal(SECRET)),
    "typed bindparam": lambda: update(users).values(ssn=bindparam("p", SECRET, type_=String)),
    "valued bindparam": lambda: update(users).values(ssn=bindparam("p", SECRET)),  # typed by value
    "subquery": lambda: update(users).values(notes=select(users.c.name).scalar_subquery()),
    "cast": lambda: update(users).values(notes=func.cast(SECRET, String)),
    "indexed source": lambda: update(users).values(email=func.lower(SECRET)),
    "insert function": lambda: insert(users).values(id=2, notes=func.lower(SECRET)),
    "insert other column": lambda: insert(users).values(id=2, ssn=users.c.name),
    "multi-row bindparam": lambda: insert(users).values(
        [{"id": 2, "ssn": "a"}, {"id": 3, "ssn": bindparam("later")}]
    ),
    "multi-row function": lambda: insert(users).values([{"id": 2, "ssn": func.upper(SECRET)}]),
    "insert from select": lambda: insert(users).from_select(
        ["id", "notes"], select(users.c.id + 10, users.c.name)
    ),
    "ordered_values": lambda: update(users).ordered_values((users.c.notes, func.upper(SECRET))),
    "orm values": lambda: update(User).where(User.id == 1).values(notes=func.upper(SECRET)),
    "orm insert": lambda: insert(User).values(id=2, ssn=func.upper(SECRET)),
}


@pytest.mark.parametrize("form", list(REFUSED))
def test_sql_expressions_are_refused_before_anything_is_written(db, form):
    _seed(db, 1)
    before = _stored(db, 1)
    with pytest.raises(UnsealedExpression) as info:
        with Session(db) as session:
            session.execute(REFUSED[form](), {"later": SECRET})
            session.commit()
    assert SECRET not in str(info.value) and info.value.__cause__ is None
    assert _stored(db, 1) == before
    with db.connect() as conn:
        assert conn.execute(select(func.count()).select_from(users)).scalar() == 1


def test_upsert_set_expressions_are_refused(db):
    _seed(db, 1)
    before = _stored(db, 1)
    ins = _dialect_insert(db)(users).values(id=1, ssn="999-99-9999")
    for set_ in (
        {"ssn": func.upper(SECRET)},
        {"ssn": users.c.name},
        {"notes": literal(SECRET)},
        {"ssn": ins.excluded.notes if hasattr(ins, "excluded") else ins.inserted.notes},
    ):
        with pytest.raises(UnsealedExpression), db.begin() as conn:
            conn.execute(_upsert(db, ins, set_))
    assert _stored(db, 1) == before


def test_orm_flush_of_an_expression_is_refused(db):
    _seed(db, 1)
    before = _stored(db, 1)
    for attr in ("ssn", "email"):
        with Session(db) as session:
            setattr(session.get(User, 1), attr, func.upper(SECRET))
            with pytest.raises(UnsealedExpression):
                session.commit()
    with Session(db) as session:
        session.add(User(id=5, notes=func.upper(SECRET)))
        with pytest.raises(UnsealedExpression):
            session.commit()
    with Session(db) as session:  # row-bound columns are sealed by the flush hooks
        session.add(Secret(owner="o", token=func.upper(SECRET)))
        with pytest.raises(UnsealedExpression):
            session.commit()
    assert _stored(db, 1) == before
    with db.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Secret.__table__)).scalar() == 0


def test_lambda_statements_are_checked(db):
    _seed(db, 1)
    before = _stored(db, 1)
    with pytest.raises(UnsealedExpression), db.begin() as conn:
        conn.execute(lambda_stmt(lambda: update(users).values(ssn=func.upper(SECRET))))
    value = "new@x.org"
    with pytest.raises(UnsealedExpression), db.begin() as conn:  # SQLAlchemy types it String
        conn.execute(lambda_stmt(lambda: update(users).where(users.c.id == 1).values(email=value)))
    with pytest.raises(BlindIndexError), db.begin() as conn:  # sealed, but the index cannot follow
        conn.execute(
            lambda_stmt(
                lambda: (
                    update(users)
                    .where(users.c.id == 1)
                    .values(email=bindparam("e", type_=users.c.email.type))
                )
            ),
            {"e": value},
        )
    assert _stored(db, 1) == before
    with db.begin() as conn:  # parameter sets keyed by column: the index follows
        conn.execute(
            lambda_stmt(lambda: update(users).where(users.c.id == bindparam("i"))),
            [{"i": 1, "email": value}],
        )
    _moved(db, 1, value, "old1@x.org")


def test_values_and_bound_parameters_are_sealed(db):
    _seed(db, 1)
    with db.begin() as conn:
        conn.execute(update(users).where(users.c.id == 1).values(ssn="111-11-1111"))
        conn.execute(
            update(users).where(users.c.id == 1).values(notes=bindparam("n")), {"n": SECRET}
        )
        conn.execute(
            insert(users).values(id=2, notes=bindparam("n", type_=users.c.notes.type)),
            {"n": SECRET},
        )
    for ident in (1, 2):
        assert SECRET.encode() not in raw(db, "ss_users", "notes", ident)
    with Session(db) as session:
        assert [session.get(User, i).notes for i in (1, 2)] == [SECRET, SECRET]
        assert session.get(User, 1).ssn == "111-11-1111"


def test_textual_sql_is_not_inspected(db):
    """Documented limit: text() runs as written; a parameter typed as the column is sealed."""
    _seed(db, 1)
    stmt = text("UPDATE ss_users SET notes = :v WHERE id = 1")
    with db.begin() as conn:
        conn.execute(stmt.bindparams(bindparam("v", type_=users.c.notes.type)), {"v": SECRET})
    assert SECRET.encode() not in raw(db, "ss_users", "notes", 1)
    with Session(db) as session:
        assert session.get(User, 1).notes == SECRET
    with db.begin() as conn:  # untyped: the plain value is stored, and never read back as data
        conn.execute(stmt, {"v": SECRET.encode()})
    with Session(db) as session, pytest.raises(Exception) as info:
        session.get(User, 1).notes
    assert isinstance(info.value, MalformedCiphertext) or isinstance(
        getattr(info.value, "orig", None), MalformedCiphertext
    )


# ---- blind indexes follow every write -------------------------------------------------------------


def test_executemany_with_named_bindparams(db):
    _seed(db, 1, 2)
    stmt = update(users).where(users.c.id == bindparam("b_id")).values(email=bindparam("b_email"))
    with db.begin() as conn:
        conn.execute(stmt, [{"b_id": 1, "b_email": "n1@x.org"}, {"b_id": 2, "b_email": "n2@x.org"}])
    _moved(db, 1, "n1@x.org", "old1@x.org")
    _moved(db, 2, "n2@x.org", "old2@x.org")
    with db.begin() as conn:  # the same statement again (compiled cache), one parameter set
        conn.execute(stmt, {"b_id": 1, "b_email": "again@x.org"})
    _moved(db, 1, "again@x.org", "n1@x.org")


def test_insert_values_with_a_named_bindparam(db):
    stmt = insert(users).values(email=bindparam("e"))
    with db.begin() as conn:
        conn.execute(stmt, [{"id": 1, "e": "a@x.org"}, {"id": 2, "e": "b@x.org"}])
        conn.execute(stmt, {"id": 3, "e": "c@x.org"})
        conn.execute(
            insert(users).values(id=4, email=bindparam("e", "d@x.org", type_=users.c.email.type))
        )
    for ident, email in ((1, "a@x.org"), (2, "b@x.org"), (3, "c@x.org"), (4, "d@x.org")):
        _moved(db, ident, email)


def test_literal_values_multi_row_values_and_ordered_values(db):
    _seed(db, 1, 2)
    with db.begin() as conn:
        conn.execute(
            insert(users).values([{"id": 3, "email": "m3@x.org"}, {"id": 4, "email": "m4@x.org"}])
        )
        conn.execute(update(users).where(users.c.id == 1).values(email="lit@x.org"))
        conn.execute(
            update(users).where(users.c.id == 2).ordered_values((users.c.email, "ord@x.org"))
        )
    _moved(db, 3, "m3@x.org")
    _moved(db, 4, "m4@x.org")
    _moved(db, 1, "lit@x.org", "old1@x.org")
    _moved(db, 2, "ord@x.org", "old2@x.org")
    with db.begin() as conn:
        conn.execute(update(users).where(users.c.id == 1).values(email=None))
    assert raw(db, "ss_users", "email_index", 1) is None


def test_orm_paths(db):
    _seed(db, 1, 2, 3)
    with Session(db) as session:
        session.execute(update(User), [{"id": 1, "email": "bulk@x.org"}])
        session.execute(update(User).where(User.id == 2).values(email="orm@x.org"))
        session.execute(insert(User).values(id=9, email=bindparam("e")), {"e": "nine@x.org"})
        session.connection().execute(
            update(User).where(User.id == bindparam("b_id")).values(email=bindparam("b_email")),
            [{"b_id": 3, "b_email": "three@x.org"}],
        )
        session.commit()
    _moved(db, 1, "bulk@x.org", "old1@x.org")
    _moved(db, 2, "orm@x.org", "old2@x.org")
    _moved(db, 3, "three@x.org", "old3@x.org")
    _moved(db, 9, "nine@x.org")


def test_returning(db):
    if db.dialect.name == "mysql" or db.dialect.name == "mariadb":
        if not db.dialect.update_returning:
            pytest.skip("MariaDB has no UPDATE ... RETURNING")
    _seed(db, 1)
    with db.begin() as conn:
        got = (
            conn.execute(
                update(users)
                .where(users.c.id == 1)
                .values(email=bindparam("e"))
                .returning(users.c.id),
                {"e": "ret@x.org"},
            )
            .scalars()
            .all()
        )
    assert got == [1]
    _moved(db, 1, "ret@x.org", "old1@x.org")


def test_insert_returning_with_named_bindparams(db):
    if not db.dialect.insert_returning:
        pytest.skip(f"{db.dialect.name} has no INSERT ... RETURNING")
    with db.begin() as conn:
        got = (
            conn.execute(
                insert(users)
                .values(email=bindparam("e"))
                .returning(users.c.id, sort_by_parameter_order=True),
                [{"id": 1, "e": "r1@x.org"}, {"id": 2, "e": "r2@x.org"}],
            )
            .scalars()
            .all()
        )
    assert got == [1, 2]
    _moved(db, 1, "r1@x.org")
    _moved(db, 2, "r2@x.org")


def test_upserts(db):
    _seed(db, 1, 2, 3, 4)
    make = _dialect_insert(db)
    ins = make(users).values(id=1, email="up1@x.org")
    row = ins.excluded if hasattr(ins, "excluded") else ins.inserted
    with db.begin() as conn:
        conn.execute(_upsert(db, ins, {"email": row.email}))
        conn.execute(
            _upsert(db, make(users).values(id=2, email="ignored@x.org"), {"email": "up2@x.org"})
        )
        named = make(users).values(id=bindparam("i"), email=bindparam("e"))
        conn.execute(_upsert(db, named, {"email": bindparam("e")}), [{"i": 3, "e": "up3@x.org"}])
        fresh = make(users).values(id=7, email="new7@x.org")
        conn.execute(
            _upsert(
                db,
                fresh,
                {"email": (fresh.excluded if hasattr(fresh, "excluded") else fresh.inserted).email},
            )
        )
    _moved(db, 1, "up1@x.org", "old1@x.org")
    _moved(db, 2, "up2@x.org", "old2@x.org")
    _moved(db, 3, "up3@x.org", "old3@x.org")
    _moved(db, 7, "new7@x.org")
    assert _ids(db, User.email == "ignored@x.org") == []
    if db.dialect.name != "sqlite" and db.dialect.name != "postgresql":  # MySQL's VALUES(col)
        ins = make(users).values(id=4, email="up4@x.org")
        with db.begin() as conn:
            conn.execute(ins.on_duplicate_key_update(email=func.values(users.c.email)))
        _moved(db, 4, "up4@x.org", "old4@x.org")


def test_a_callable_bindparam_on_an_indexed_column_is_refused(db):
    _seed(db, 1)
    before = _stored(db, 1)
    with pytest.raises(BlindIndexError), db.begin() as conn:
        conn.execute(update(users).values(email=bindparam("e", callable_=lambda: "c@x.org")))
    assert _stored(db, 1) == before


def test_an_index_the_statement_sets_itself_is_left_as_given(db):
    _seed(db, 1)
    computed = users.c.email_index.type.compute("mine@x.org")
    with db.begin() as conn:
        conn.execute(
            update(users).where(users.c.id == 1).values(email="mine@x.org", email_index=computed)
        )
    assert raw(db, "ss_users", "email_index", 1) == computed
    _moved(db, 1, "mine@x.org", "old1@x.org")


def test_orm_insert_returning_the_model_with_a_list_of_dicts(db):
    """SQLAlchemy tests ``column in list_of_columns`` while compiling it: no UnsupportedComparison."""
    if not db.dialect.insert_returning:
        pytest.skip(f"{db.dialect.name} has no INSERT ... RETURNING")
    rows = [{"id": 1, "email": "a@x.org", "ssn": "123-45-6789"}, {"id": 2, "email": "b@x.org"}]
    with Session(db) as session:
        got = session.scalars(
            insert(User).returning(User, sort_by_parameter_order=True), rows
        ).all()
        assert [(u.id, u.email, u.ssn) for u in got] == [
            (1, "a@x.org", "123-45-6789"),
            (2, "b@x.org", None),
        ]
        session.commit()
    _moved(db, 1, "a@x.org")
    _moved(db, 2, "b@x.org")
    stmt = update(User).where(User.id == 1).values(email="c@x.org")
    with Session(db) as session:  # and the ORM's update ... returning, where the database has it
        if db.dialect.update_returning:
            assert [u.email for u in session.scalars(stmt.returning(User))] == ["c@x.org"]
        else:
            session.execute(stmt)
        session.commit()
    _moved(db, 1, "c@x.org", "a@x.org")


# ---- a UNIQUE blind index across an index-key rotation (docs/COLUMNS.md) ----------------------


class _UniqueBase(DeclarativeBase):
    pass


class Account(_UniqueBase):
    __tablename__ = "ss_accounts"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    login: Mapped[str | None] = mapped_column(EncryptedString(80))
    login_index: Mapped[bytes | None] = mapped_column(BlindIndex("login"), unique=True)


def test_a_unique_index_holds_across_an_index_key_rotation_and_reindexing_detects_a_duplicate(
    db, keyrings
):
    from sealstore.migrations.rotation.reindex import reindex
    from sealstore.migrations.schema import create_tables, drop_tables

    _UniqueBase.metadata.create_all(db)
    create_tables(db)
    try:
        with Session(db) as session:
            session.add(Account(id=1, login="ada"))
            session.commit()
            session.add(Account(id=2, login="ada"))
            with pytest.raises(IntegrityError):  # the same index key: refused by the database
                session.commit()
        old = raw(db, "ss_accounts", "login_index", 1)
        keyrings.idx.rotate()
        with Session(db) as session:  # row 1 is under the older key: refused before the INSERT
            session.add(Account(id=2, login="ada"))
            with pytest.raises(DuplicateIndexValue, match="ss_accounts.login_index is UNIQUE"):
                session.commit()
        (result,) = reindex(db, Account)
        assert result.remaining == 0
        with Session(db) as session:  # both under the primary key: the database's constraint
            session.add(Account(id=2, login="ada"))
            with pytest.raises(IntegrityError):
                session.commit()
        # a writer that never loaded the rotated keyring wrote a duplicate under the old key:
        # re-indexing it collides, reported without the statement's parameters
        with db.begin() as conn:
            conn.execute(
                text("INSERT INTO ss_accounts (id, login, login_index) "
                     "SELECT 3, login, :old FROM ss_accounts WHERE id = 1"),
                {"old": old},
            )  # fmt: skip
        with pytest.raises(DatabaseOperationFailed, match="IntegrityError|UniqueViolation") as info:
            reindex(db, Account)
        assert info.value.__cause__ is None and info.value.__context__ is None
    finally:
        drop_tables(db)
