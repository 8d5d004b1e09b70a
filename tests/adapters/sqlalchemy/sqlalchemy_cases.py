"""Models and fixtures shared by the SQLAlchemy adapter tests (imported by each test module)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from types import SimpleNamespace

import pytest
from sqlalchemy import (
    bindparam,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Uuid,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sealstore.adapters.sqlalchemy import (
    BlindIndex,
    Encrypted,
    EncryptedBinary,
    EncryptedJSON,
    EncryptedString,
    EncryptedText,
)
from sealstore.keyring import Keyring, forget_keyring, use_keyring

KEYRING_NAMES = ("default", "index", "vault")


class Base(DeclarativeBase):
    pass


class User(Base):
    """One column of every encrypted type, a blind index and a plaintext column."""

    __tablename__ = "ss_users"
    id: Mapped[int] = mapped_column(primary_key=True)
    ssn: Mapped[str | None] = mapped_column(EncryptedString(11))
    notes: Mapped[str | None] = mapped_column(EncryptedText())
    profile: Mapped[dict | None] = mapped_column(EncryptedJSON())
    avatar: Mapped[bytes | None] = mapped_column(EncryptedBinary())
    born: Mapped[dt.date | None] = mapped_column(Encrypted(Date))
    seen_at: Mapped[dt.datetime | None] = mapped_column(Encrypted(DateTime(timezone=True)))
    balance: Mapped[decimal.Decimal | None] = mapped_column(Encrypted(Numeric(12, 2)))
    visits: Mapped[int | None] = mapped_column(Encrypted(BigInteger))
    active: Mapped[bool | None] = mapped_column(Encrypted(Boolean))
    ref: Mapped[uuid.UUID | None] = mapped_column(Encrypted(Uuid))
    email: Mapped[str | None] = mapped_column(EncryptedString(320))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email"), index=True)
    name: Mapped[str | None] = mapped_column(String(50))


class Secret(Base):
    """Row-bound columns (client-generated UUID primary key) with a short blind index."""

    __tablename__ = "ss_secrets"
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    owner: Mapped[str] = mapped_column(String(50))
    token: Mapped[str | None] = mapped_column(EncryptedString(64, bind_row=True))
    token_index: Mapped[bytes | None] = mapped_column(BlindIndex("token", size=8), index=True)
    blob: Mapped[bytes | None] = mapped_column(EncryptedBinary(bind_row=True))


class Counter(Base):
    """Row-bound column on a database-generated key: refused at flush."""

    __tablename__ = "ss_counters"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[str | None] = mapped_column(EncryptedString(bind_row=True))


class Vault(Base):
    """A column sealed with a keyring registered under another name."""

    __tablename__ = "ss_vault"
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str | None] = mapped_column(EncryptedString(40, keyring="vault"))


core_metadata = MetaData()
events = Table(
    "ss_events",
    core_metadata,
    Column("id", Integer, primary_key=True),
    # the index is declared before its source on purpose: resolution is lazy
    Column("payload_index", BlindIndex("payload"), index=True),
    Column("payload", EncryptedString(100)),
    Column("body", EncryptedText()),
)


@pytest.fixture
def keyrings():
    """Fresh keyrings: "default" (columns), "index" (blind indexes), "vault"."""
    rings = SimpleNamespace(
        enc=use_keyring(Keyring.generate()),
        idx=use_keyring(Keyring.generate(), name="index"),
        vault=use_keyring(Keyring.generate(), name="vault"),
    )
    yield rings
    for name in KEYRING_NAMES:
        forget_keyring(name)


@pytest.fixture
def db(sql_engine, keyrings):
    """The engine with every model's table created (dropped by ``sql_engine``)."""
    Base.metadata.create_all(sql_engine)
    core_metadata.create_all(sql_engine)
    return sql_engine


def _by_id(sql: str, key):
    # a Uuid key is bound as each dialect stores it (native uuid, or 32 hex characters: SQLite,
    # and MariaDB before SQLAlchemy 2.1): the Uuid type converts it
    return text(sql).bindparams(
        bindparam("id", key, type_=Uuid() if isinstance(key, uuid.UUID) else None)
    )


def raw(engine, table: str, column: str, key):
    """A stored value read with plain SQL, no sealstore involved (bytes, or str for text)."""
    with engine.connect() as conn:
        value = conn.execute(
            _by_id(f"SELECT {column} FROM {table} WHERE id = :id", key)
        ).scalar_one()
    if value is None or isinstance(value, str):
        return value
    return bytes(value)


def write_raw(engine, table: str, column: str, key, value: bytes | None) -> None:
    """Overwrite a stored value with plain SQL."""
    with engine.begin() as conn:
        conn.execute(_by_id(f"UPDATE {table} SET {column} = :v WHERE id = :id", key), {"v": value})
