"""Encrypted columns under asyncio: SQLAlchemy's AsyncSession on aiosqlite (run by
tests/test_examples.py).

Nothing changes for async code: the column types seal on flush and open on load, in the
driver's thread as for a synchronous session; the keyrings are registered once at start-up.

    python examples/async_app.py sqlite+aiosqlite:///notes.db sealstore.toml sealstore-index.toml
"""

from __future__ import annotations

import asyncio
import sys

import sealstore
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedJSON, EncryptedString
from sealstore.config import load_config
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(EncryptedString(320))
    owner_index: Mapped[bytes] = mapped_column(BlindIndex("owner"), index=True)
    body: Mapped[dict] = mapped_column(EncryptedJSON())


async def add_note(engine: AsyncEngine, owner: str, body: dict) -> int:
    async with AsyncSession(engine, expire_on_commit=False) as session:  # no lazy loads
        note = Note(owner=owner, body=body)
        session.add(note)
        await session.commit()
        return note.id


async def notes_of(engine: AsyncEngine, owner: str) -> list[dict]:
    async with AsyncSession(engine) as session:
        result = await session.scalars(select(Note).where(Note.owner == owner).order_by(Note.id))
        return [note.body for note in result]


async def main(database_url: str) -> list[dict]:
    """Create the table, write three notes, read one owner's back (keyrings registered)."""
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        await asyncio.gather(
            add_note(engine, "ada@example.org", {"text": "engine notes", "n": 1}),
            add_note(engine, "alan@example.org", {"text": "on computable numbers", "n": 2}),
            add_note(engine, "ada@example.org", {"text": "more notes", "n": 3}),
        )
        return await notes_of(engine, "ada@example.org")
    finally:
        await engine.dispose()


def load_keyrings(config: str, index_config: str) -> None:
    """At start-up: the column keyring and the blind-index keyring."""
    sealstore.use_keyring(load_config(config, name="default").load_keyring())
    sealstore.use_keyring(load_config(index_config, name="index").load_keyring(), name="index")


if __name__ == "__main__":
    load_keyrings(sys.argv[2], sys.argv[3])
    for body in asyncio.run(main(sys.argv[1])):
        print(body)
