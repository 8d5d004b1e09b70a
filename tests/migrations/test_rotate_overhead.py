"""Rotating to a suite with more overhead than a bounded column allows (AEGIS-256 with 32-byte
tags: 71 bytes, against the default 55) is refused with ValueTooLong before any row is
rewritten, for model columns and for reflected ones; a column declared with ``overhead=71``
rotates."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.errors import ValueTooLong
from sealstore.format import KEY_ID_OFFSET
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation.reseal import rotate
from sealstore.migrations.rotation.spec import ColumnSpec
from sealstore.migrations.schema import create_tables


def _tables(overhead: int) -> tuple[sa.MetaData, sa.Table]:
    md = sa.MetaData()
    t = sa.Table(
        "notes",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("body", EncryptedString(40, overhead=overhead)),
    )
    return md, t


@pytest.fixture
def engine():
    eng = sa.create_engine("sqlite://", poolclass=sa.StaticPool)
    create_tables(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def keyring():
    ring = use_keyring(Keyring.generate("AEGIS-128X4", tag_size=32))
    yield ring
    forget_keyring()


def _fill(engine, t) -> dict[int, str]:
    values = {i: f"note {i}" for i in range(12)}
    with engine.begin() as conn:
        conn.execute(sa.insert(t), [{"id": k, "body": v} for k, v in values.items()])
    return values


def _stored(engine) -> dict[int, bytes]:
    with engine.connect() as conn:
        return {k: bytes(v) for k, v in conn.exec_driver_sql("SELECT id, body FROM notes")}


def _key_ids(stored: dict[int, bytes]) -> set[int]:
    return {int.from_bytes(v[KEY_ID_OFFSET : KEY_ID_OFFSET + 4], "big") for v in stored.values()}


def test_rotation_to_a_wider_suite_is_refused_before_any_row_changes(engine, keyring):
    md, t = _tables(55)
    md.create_all(engine)
    values = _fill(engine, t)
    before = _stored(engine)
    keyring.rotate(suite="AEGIS-256X4")
    with pytest.raises(ValueTooLong, match=r"notes\.body is sized for 55 bytes.*overhead=71"):
        rotate(engine, ColumnSpec.from_column(t.c.body), batch_size=5)
    assert _stored(engine) == before  # nothing rewritten, every value still opens
    with engine.connect() as conn:
        assert dict(conn.execute(sa.select(t.c.id, t.c.body)).all()) == values


def test_a_column_declared_wide_enough_rotates(engine, keyring):
    md, t = _tables(71)
    md.create_all(engine)
    values = _fill(engine, t)
    new = keyring.rotate(suite="AEGIS-256X4")
    result = rotate(engine, ColumnSpec.from_column(t.c.body), batch_size=5)[0]
    assert (result.status, result.resealed, result.failed) == ("done", len(values), 0)
    stored = _stored(engine)
    assert _key_ids(stored) == {new.key_id}
    assert {v[1] for v in stored.values()} == {0x04}  # short values: AEGIS-256 (adaptive)
    with engine.connect() as conn:
        assert dict(conn.execute(sa.select(t.c.id, t.c.body)).all()) == values


def test_a_reflected_column_is_checked_against_its_width(sql_engine, keyring):
    """MariaDB keeps the width (VARBINARY(215)): a resealed value that would not fit is refused
    before any row changes.  SQLite and PostgreSQL store unbounded bytes: the rotation runs."""
    create_tables(sql_engine)
    md, t = _tables(55)
    md.create_all(sql_engine)
    _fill(sql_engine, t)
    with sql_engine.begin() as conn:  # the longest value the column takes: 160 + 55 bytes sealed
        conn.execute(sa.insert(t).values(id=99, body="\U0001f600" * 40))
    before = _stored(sql_engine)
    spec = ColumnSpec.reflect(sql_engine, "notes", "body")  # no model type: only the width
    keyring.rotate(suite="AEGIS-256X4")
    if sql_engine.dialect.name in ("mysql", "mariadb"):
        assert spec.type is None and spec.max_bytes == 40 * 4 + 55
        with pytest.raises(ValueTooLong, match=r"notes\.body holds at most 215 bytes"):
            rotate(sql_engine, spec, batch_size=50)  # resealed, the longest takes 160 + 71
        assert _stored(sql_engine) == before
    else:
        assert spec.max_bytes is None
        assert rotate(sql_engine, spec, batch_size=50)[0].status == "done"
