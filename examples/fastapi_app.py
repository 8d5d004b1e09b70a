"""A FastAPI application with encrypted columns (run by tests/test_examples.py).

The keyrings are loaded once, in the lifespan, from two configuration files (the column keys
and the blind-index keys, docs/production-keys.md); request handlers use ordinary SQLAlchemy
sessions and never see a key or a ciphertext.  ``email`` is looked up through its blind index.

    uvicorn --factory examples.fastapi_app:app_from_environment
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import asynccontextmanager

import sealstore
from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString
from sealstore.config import load_config
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Patient(Base):
    __tablename__ = "patients"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    ssn: Mapped[str] = mapped_column(EncryptedString(11))
    email: Mapped[str] = mapped_column(EncryptedString(320))
    email_index: Mapped[bytes] = mapped_column(BlindIndex("email"), index=True)


class PatientIn(BaseModel):
    name: str
    ssn: str
    email: str


class PatientOut(PatientIn):
    id: int


def _out(p: Patient) -> PatientOut:
    return PatientOut(id=p.id, name=p.name, ssn=p.ssn, email=p.email)


def create_app(database_url: str, config: str, index_config: str) -> FastAPI:
    """The application on ``database_url``, keys from the configuration files ``config``
    (columns) and ``index_config`` (blind indexes)."""
    engine = create_engine(database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        sealstore.use_keyring(load_config(config, name="default").load_keyring())
        sealstore.use_keyring(load_config(index_config, name="index").load_keyring(), name="index")
        Base.metadata.create_all(engine)
        try:
            yield
        finally:
            for name in ("default", "index"):
                keyring = sealstore.forget_keyring(name)
                if keyring is not None:
                    keyring.close()
            engine.dispose()

    app = FastAPI(lifespan=lifespan)

    def session() -> Iterator[Session]:
        with Session(engine) as s:
            yield s

    @app.post("/patients", status_code=201)
    def add_patient(patient: PatientIn, s: Session = Depends(session)) -> PatientOut:
        row = Patient(**patient.model_dump())
        s.add(row)
        s.commit()
        return _out(row)

    @app.get("/patients/{patient_id}")
    def get_patient(patient_id: int, s: Session = Depends(session)) -> PatientOut:
        row = s.get(Patient, patient_id)
        if row is None:
            raise HTTPException(404, "no such patient")
        return _out(row)

    @app.get("/patients")
    def find_patients(email: str, s: Session = Depends(session)) -> list[PatientOut]:
        return [_out(p) for p in s.scalars(select(Patient).where(Patient.email == email))]

    return app


def app_from_environment() -> FastAPI:
    """For ``uvicorn --factory``: ``DATABASE_URL``, ``SEALSTORE_CONFIG`` and
    ``APP_INDEX_CONFIG`` name the database and the two configuration files."""
    return create_app(
        os.environ["DATABASE_URL"],
        os.environ["SEALSTORE_CONFIG"],
        os.environ["APP_INDEX_CONFIG"],
    )
