"""Encrypted(Enum(...)) stores the string SQLAlchemy's own Enum persists (``type.enums``): member
names for a plain enum class, the ``values_callable`` values, the strings of a string enum; on
SQLite, PostgreSQL and MariaDB, native and non-native, with non-ASCII values."""

from __future__ import annotations

import enum
import hashlib

import pytest
import sqlalchemy as sa
from sqlalchemy import Column, Integer, MetaData, Table, insert, inspect, select
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import StatementError
from sqlalchemy.schema import CreateTable

from sealstore.adapters.sqlalchemy import MAX_OVERHEAD, Encrypted, codec_for
from sealstore.errors import UndecodableValue
from sealstore.format import Suite, column_context
from sealstore.keyring import Key, Keyring, KeyState, forget_keyring, use_keyring

from sqlalchemy_cases import keyrings, raw, write_raw  # noqa: F401


class Status(enum.Enum):
    ACTIVE = "active"
    PAUSED = "en pause"
    CLOSED = "fermé ✓"  # 10 bytes in UTF-8, 7 characters
    LIVE = "active"  # an alias of ACTIVE


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Swap(enum.Enum):  # every name is also another member's value
    A = "B"
    B = "A"


def by_value(e):
    return [m.value for m in e]


LONGEST = len("fermé ✓".encode())

metadata = MetaData()
enums = Table(
    "ss_enums",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("native", Encrypted(sa.Enum(Status, values_callable=by_value, name="status_native"))),
    Column("non_native", Encrypted(sa.Enum(Status, values_callable=by_value, native_enum=False))),
    Column(
        "validated", Encrypted(sa.Enum(Status, values_callable=by_value, validate_strings=True))
    ),
    Column("by_name", Encrypted(sa.Enum(Status, name="status_names"))),
    Column("strings", Encrypted(sa.Enum("rouge", "vert ✓", "日本", name="colors"))),
    # what SQLAlchemy itself persists, beside the encrypted columns
    Column("plain", sa.Enum(Status, values_callable=by_value, native_enum=False, length=20)),
)
ENCRYPTED = ("native", "non_native", "validated", "by_name", "strings")


@pytest.fixture
def db(sql_engine, keyrings):
    metadata.create_all(sql_engine)
    return sql_engine


def _opened_plaintext(engine, keyrings, column, key=1) -> bytes:
    return keyrings.enc.open(raw(engine, "ss_enums", column, key), enums.c[column].type.context())


@pytest.mark.parametrize("member", list(Status))
def test_members_round_trip_and_are_stored_as_sqlalchemy_persists_them(db, keyrings, member):
    with db.begin() as conn:
        conn.execute(insert(enums).values(
            id=1, native=member, non_native=member, validated=member, by_name=member,
            plain=member, strings="日本",
        ))  # fmt: skip
        row = conn.execute(select(enums)).one()
    assert (row.native, row.non_native, row.validated, row.by_name) == (member,) * 4
    assert row.strings == "日本"
    persisted = raw(db, "ss_enums", "plain", 1)  # SQLAlchemy's own Enum, no sealstore
    for column in ("native", "non_native", "validated"):
        assert _opened_plaintext(db, keyrings, column) == persisted.encode()
    assert _opened_plaintext(db, keyrings, "by_name") == member.name.encode()
    assert _opened_plaintext(db, keyrings, "strings") == "日本".encode()


def test_persisted_strings_are_accepted_and_read_back_as_members(db):
    with db.begin() as conn:
        conn.execute(
            insert(enums).values(id=1, native="fermé ✓", by_name="CLOSED", strings="vert ✓")
        )
        row = conn.execute(select(enums)).one()
    assert row.native is Status.CLOSED and row.by_name is Status.CLOSED and row.strings == "vert ✓"


@pytest.mark.parametrize("column, value", [
    ("native", "PAUSED"),  # a name where values are persisted
    ("non_native", "CLOSED"),
    ("validated", "unknown"),
    ("by_name", "en pause"),  # a value where names are persisted
    ("strings", "ROUGE"),
    ("native", Color.RED),  # a member of another enum
])  # fmt: skip
def test_strings_that_are_not_persisted_forms_are_refused_before_writing(db, column, value):
    with pytest.raises(StatementError) as info, db.begin() as conn:
        conn.execute(insert(enums).values(id=1, **{column: value}))
    assert isinstance(info.value.orig, (ValueError, TypeError))
    with db.connect() as conn:
        assert conn.execute(select(sa.func.count()).select_from(enums)).scalar_one() == 0


def test_validate_strings_false_does_not_let_unknown_strings_through():
    # SQLAlchemy's Enum passes unknown strings to the database when validate_strings=False;
    # sealed, such a string could never be read back as a member, so it is refused
    for validate in (False, True):
        codec = codec_for(sa.Enum(Status, values_callable=by_value, validate_strings=validate))
        with pytest.raises(ValueError):
            codec.encode("not a member")
        assert codec.encode("en pause") == "en pause".encode()


def test_mariadb_width_is_the_longest_persisted_string_in_bytes():
    ddl = str(CreateTable(enums).compile(dialect=mysql.dialect()))
    for name in ("native", "non_native", "validated"):
        assert f"{name} VARBINARY({LONGEST + MAX_OVERHEAD})" in ddl
    assert f"by_name VARBINARY({len('PAUSED') + MAX_OVERHEAD})" in ddl  # ACTIVE, PAUSED, CLOSED
    assert f"strings VARBINARY({len('vert ✓'.encode()) + MAX_OVERHEAD})" in ddl  # 日本 is 6 bytes


def test_longest_value_fills_the_column_exactly(db, keyrings):
    with db.begin() as conn:
        conn.execute(insert(enums).values(id=1, native=Status.CLOSED))
        assert conn.execute(select(enums.c.native)).scalar_one() is Status.CLOSED
    stored = raw(db, "ss_enums", "native", 1)
    assert len(stored) == LONGEST + MAX_OVERHEAD  # the keyring's values carry the largest overhead
    if db.dialect.name in ("mysql", "mariadb"):
        width = {c["name"]: c["type"] for c in inspect(db).get_columns("ss_enums")}["native"]
        assert width.length == len(stored)


def test_a_name_that_is_also_a_value_reads_as_the_persisted_form():
    codec = codec_for(sa.Enum(Swap, values_callable=by_value))
    assert codec.encode(Swap.A) == b"B"
    assert codec.decode(b"A") is Swap.B


def test_aliases_are_stored_as_their_canonical_member():
    codec = codec_for(sa.Enum(Status, values_callable=by_value))
    assert codec.encode(Status.LIVE) == b"active"
    assert codec.decode(b"active") is Status.ACTIVE


# ---- values sealed by earlier releases --------------------------------------------------------

# Sealed once with the fixed key below by the codec of earlier releases (member names for enum
# classes, the string for string enums); frozen: they must keep opening to the same values.
GOLDEN_KEY = Key(0x5EA1E000, Suite.AEGIS_128L, hashlib.sha256(b"sealstore enum golden").digest(),
                 state=KeyState.PRIMARY)  # fmt: skip
GOLDEN = {
    # Enum(Color): Color.GREEN
    "color": "01015ea1e0000117468f9b76624ed445cc5196da9ce0c4c05ada2d4fcae7a6d42c410050a67b8a068c2"
             "8adf72c32b41ccc296cc272dbcb37f6173301",
    # Enum("a", "b"): "b"
    "letter": "01015ea1e0000112a9d8dbd1343a2870469f80dad525cc6456daea660ecf7fcc2fae76c652bf0eab"
              "c18d5adf4e6d823bf027e33eb2a717d6",
    # Enum(Status, values_callable=...): Status.PAUSED, sealed as its name "PAUSED" before
    "status": "01015ea1e0000109e063d0f0acf4081f6c0da7eed0bdd878243ac8d35ebf14a6076ef76556b17b07"
              "99a6d5fbf00d3bdd37914f4ad7da3b3edfc757f574",
}  # fmt: skip
golden = Table(
    "ss_enum_golden",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("color", Encrypted(sa.Enum(Color))),
    Column("letter", Encrypted(sa.Enum("a", "b", name="ab"))),
    Column("status", Encrypted(sa.Enum(Status, values_callable=by_value))),
)


@pytest.fixture
def golden_ring():
    use_keyring(Keyring([GOLDEN_KEY]))
    yield
    forget_keyring()


def test_values_sealed_by_earlier_releases_still_open(sql_engine, golden_ring):
    golden.create(sql_engine)
    with sql_engine.begin() as conn:
        conn.execute(insert(golden).values(id=1))
    for column, sealed in GOLDEN.items():
        write_raw(sql_engine, "ss_enum_golden", column, 1, bytes.fromhex(sealed))
    with sql_engine.connect() as conn:
        row = conn.execute(select(golden)).one()
    assert (row.color, row.letter, row.status) == (Color.GREEN, "b", Status.PAUSED)
    assert golden.c.color.type.context() == column_context("ss_enum_golden", "color")
    # and the same members are still sealed in that form (a blind index over them still matches)
    assert golden.c.color.type.codec.encode(Color.GREEN) == b"GREEN"
    assert golden.c.letter.type.codec.encode("b") == b"b"


def test_names_are_not_read_where_they_could_mean_another_member():
    codec = codec_for(sa.Enum(Swap, values_callable=by_value))
    assert codec.decode(b"B") is Swap.A  # the persisted form, never the legacy name
    with pytest.raises(UndecodableValue):
        codec_for(sa.Enum(Status, values_callable=by_value)).decoded(b"LIVE-ish")
