"""Where a write's ValueTooLong (and WrongValueType) arrives, per write path (issue 26, item 10; docs/COLUMNS.md,
"Where a write error arrives"): wrapped in SQLAlchemy's StatementError (``.orig``) when it is
raised while SQLAlchemy binds the parameters, the sealstore exception itself when sealstore
raises it before the statement runs (row-bound columns in an ORM flush, blind-index values
computed from a statement's own values).  Either way: the same class and message, naming the
column and not the value, nothing of the value in the chain, nothing written.  SQLite,
PostgreSQL and MariaDB."""

from __future__ import annotations

import traceback
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.errors import ColumnBindingError, SealstoreError, ValueTooLong, WrongValueType
from sealstore.keyring import Keyring, forget_keyring, use_keyring

LONG = "MARKER-too-long-" + "x" * 20
TAG = uuid.uuid4().hex[:6]


class Base(DeclarativeBase):
    pass


class Plain(Base):
    __tablename__ = f"arr_plain_{TAG}"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str | None] = mapped_column(EncryptedString(8))


class RowBound(Base):
    __tablename__ = f"arr_row_{TAG}"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str | None] = mapped_column(EncryptedString(8, bind_row=True))


class Indexed(Base):
    __tablename__ = f"arr_idx_{TAG}"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    name: Mapped[str | None] = mapped_column(EncryptedString(8))
    name_index: Mapped[bytes | None] = mapped_column(BlindIndex("name", keyring="arr-index"))


def _core_insert(s, m, v):
    s.execute(sa.insert(m.__table__).values(id=2, name=v))


def _core_many(s, m, v):
    s.execute(sa.insert(m.__table__), [{"id": 2, "name": "ok"}, {"id": 3, "name": v}])


def _core_update(s, m, v):
    s.execute(sa.update(m.__table__).where(m.__table__.c.id == 1).values(name=v))


def _flush_insert(s, m, v):
    s.add(m(id=2, name=v))
    s.flush()


def _flush_update(s, m, v):
    s.get(m, 1).name = v
    s.flush()


def _bulk_mappings(s, m, v):
    s.bulk_insert_mappings(m, [{"id": 2, "name": v}])


def _orm_bulk_insert(s, m, v):
    s.execute(sa.insert(m), [{"id": 2, "name": v}])


def _orm_bulk_update(s, m, v):
    s.execute(sa.update(m), [{"id": 1, "name": v}])


PATHS = {
    "Core insert().values()": _core_insert,
    "Core executemany": _core_many,
    "Core update().values()": _core_update,
    "ORM flush, insert": _flush_insert,
    "ORM flush, update": _flush_update,
    "bulk_insert_mappings": _bulk_mappings,
    "ORM bulk insert()": _orm_bulk_insert,
    "ORM bulk update()": _orm_bulk_update,
}

# (model, path) -> "wrapped" (StatementError, .orig) or "bare"; the table of docs/COLUMNS.md
WHERE = {
    **{(Plain, p): "wrapped" for p in PATHS},
    **{(RowBound, p): "refused" for p in PATHS},  # Core and bulk paths need the row
    (RowBound, "ORM flush, insert"): "bare",
    (RowBound, "ORM flush, update"): "bare",
    (Indexed, "Core insert().values()"): "bare",
    (Indexed, "Core executemany"): "wrapped",
    (Indexed, "Core update().values()"): "bare",
    (Indexed, "ORM flush, insert"): "wrapped",
    (Indexed, "ORM flush, update"): "bare",
    (Indexed, "bulk_insert_mappings"): "wrapped",
    (Indexed, "ORM bulk insert()"): "wrapped",
    (Indexed, "ORM bulk update()"): "bare",
}


@pytest.fixture
def db(sql_engine):
    keyring = use_keyring(Keyring.generate())
    index = use_keyring(Keyring.generate(), "arr-index")
    engine = sa.create_engine(sql_engine.url, hide_parameters=True)
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        s.add_all([Plain(id=1, name="one"), RowBound(id=1, name="one"), Indexed(id=1, name="one")])
        s.commit()
    yield engine
    Base.metadata.drop_all(engine)
    engine.dispose()
    forget_keyring()
    forget_keyring("arr-index")
    keyring.close()
    index.close()


def _text(exc: BaseException) -> str:
    parts = []
    while exc is not None:
        parts += ["".join(traceback.format_exception_only(type(exc), exc)), repr(exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


BAD = {"too long": (LONG, ValueTooLong), "wrong type": (4242424242, WrongValueType)}


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize(
    ("model", "path"), list(WHERE), ids=[f"{m.__name__}-{p}" for m, p in WHERE]
)
def test_where_a_write_error_arrives(db, model, path, bad):
    value, error = BAD[bad]
    with Session(db) as s:
        with pytest.raises((StatementError, SealstoreError)) as caught:
            PATHS[path](s, model, value)
            s.commit()
        s.rollback()
    exc = caught.value
    where = WHERE[(model, path)]
    if where == "refused":
        error = ColumnBindingError
    if where in ("wrapped", "refused"):
        assert isinstance(exc, StatementError) and type(exc.orig) is error
    else:
        assert type(exc) is error and not isinstance(exc, StatementError)
    err = getattr(exc, "orig", exc)  # the idiom docs/COLUMNS.md gives: either way
    assert f"{model.__tablename__}.name" in str(err) or where == "refused"
    assert "MARKER" not in _text(exc) and "4242424242" not in _text(exc)
    with db.connect() as conn:  # nothing written: the first row as it was, no second row
        t = model.__table__
        assert conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() == 1
    with Session(db) as s:
        assert s.get(model, 1).name == "one"


#: docs/COLUMNS.md's first column, per write path of ``PATHS``
DOC_ROWS = {
    "Core `insert().values(...)`": "Core insert().values()",
    "Core `executemany` (`insert()`, list of dicts)": "Core executemany",
    "Core `update().values(...)`": "Core update().values()",
    "ORM flush, new object": "ORM flush, insert",
    "ORM flush, changed object": "ORM flush, update",
    "`session.bulk_insert_mappings`": "bulk_insert_mappings",
    "ORM bulk `insert(Model)`, list of dicts": "ORM bulk insert()",
    "ORM bulk `update(Model)`, list of dicts": "ORM bulk update()",
}


def _cell(text: str) -> str:
    if text.startswith("refused"):
        assert "`ColumnBindingError`" in text or text == "refused, as above", text
        return "refused"
    return {"`StatementError`": "wrapped", "bare": "bare"}[text]


def test_columns_md_table_is_the_table_this_test_checks():
    """docs/COLUMNS.md, "Where a write error arrives", cell by cell against ``WHERE`` (the
    table the test above runs): the page says where each error arrives, as it does."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "COLUMNS.md").read_text()
    section = page.split("### Where a write error arrives", 1)[1].split("\n### ", 1)[0]
    rows = [
        line.strip("|").split("|")
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]
    header, body = rows[0], rows[1:]
    assert [c.strip() for c in header] == [
        "write path", "plain encrypted column", "row-bound column", "column with a blind index",
    ]  # fmt: skip
    documented = {}
    for cells in body:
        path, *where = (c.strip() for c in cells)
        for model, cell in zip((Plain, RowBound, Indexed), where):
            documented[(model, DOC_ROWS[path])] = _cell(cell)
    assert documented == WHERE
