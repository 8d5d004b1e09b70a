"""``status()`` takes models like ``rotate()`` and ``verify()`` do (docs/ROTATION.md): a
declarative base, a mapped class, a Table or MetaData, alone or in a list, mixed with specs."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations import create_tables, rotate, specs_from_metadata, status, verify
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Patient(Base):
    __tablename__ = "patients"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    ssn: Mapped[str | None] = mapped_column(EncryptedString(11))
    email: Mapped[str | None] = mapped_column(EncryptedString(80))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email", size=8), index=True)


@pytest.fixture
def engine(tmp_path):
    kr = use_keyring(Keyring.generate())
    use_keyring(Keyring.generate(), "index")
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    Base.metadata.create_all(eng)
    create_tables(eng)  # the job tables rotate() uses
    with Session(eng) as s:
        s.add_all(
            Patient(id=i, ssn=f"{i:03}-00-0000", email=None if i % 4 == 0 else f"p{i}@example.org")
            for i in range(1, 13)
        )
        s.commit()
    kr.rotate()
    yield eng
    eng.dispose()
    forget_keyring()
    forget_keyring("index")


def _summary(report) -> dict:
    return {c.name: (c.kind, c.rows, c.nulls, c.not_primary) for c in report.columns}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(lambda: Base, id="declarative base"),
        pytest.param(lambda: Patient, id="mapped class"),
        pytest.param(lambda: Patient.__table__, id="table"),
        pytest.param(lambda: Base.metadata, id="metadata"),
        pytest.param(lambda: [Patient], id="list of models"),
    ],
)
def test_status_accepts_models_like_rotate_and_verify(engine, source):
    expected = {
        "patients.ssn": ("encrypted", 12, 0, 12),
        "patients.email": ("encrypted", 12, 3, 9),
        "patients.email_index": ("blind index", 12, 3, 0),
    }
    assert _summary(status(engine, source())) == expected
    assert all(r.failed == 0 for r in verify(engine, source()))
    rotate(engine, source())
    after = _summary(status(engine, source()))
    assert {name: row[3] for name, row in after.items()} == dict.fromkeys(expected, 0)


def test_status_specs_and_models_give_the_same_report(engine):
    columns, indexes = specs_from_metadata(Base)
    assert _summary(status(engine, columns, indexes)) == _summary(status(engine, Base))
    # indexes given as models add only the blind indexes
    only_index = status(engine, (), Base)
    assert [c.name for c in only_index.columns] == ["patients.email_index"]
    # a spec list and models for the indexes
    mixed = status(engine, columns[:1], Patient)
    assert [c.name for c in mixed.columns] == ["patients.ssn", "patients.email_index"]


def test_status_refuses_what_is_neither_spec_nor_model(engine):
    with pytest.raises(TypeError, match="expected a MetaData"):
        status(engine, "patients.ssn")
