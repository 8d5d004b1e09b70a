"""The column types without a database: sizing, DDL per dialect, repr, binding, codecs."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import pickle
import uuid

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, Table
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column
from sqlalchemy.schema import CreateTable

import sealstore.adapters.sqlalchemy as ssa
from sealstore.adapters.sqlalchemy import (
    MAX_OVERHEAD,
    BlindIndex,
    Encrypted,
    EncryptedBinary,
    EncryptedJSON,
    EncryptedString,
    EncryptedText,
    codec_for,
)
from sealstore.errors import ColumnBindingError, InvalidTag, ValueTooLong
from sealstore.format import Suite, overhead, tag_sizes

from sqlalchemy_cases import keyrings  # noqa: F401


def _table(*columns, name="t"):
    return Table(name, MetaData(), Column("id", Integer, primary_key=True), *columns)


def test_max_overhead_is_pinned_at_the_aegis128_long_tag_overhead():
    # AEGIS-256 with 32-byte tags needs more and is sized explicitly (test_sqlalchemy_overhead)
    assert MAX_OVERHEAD == overhead(Suite.AEGIS_128L, 32) == 55
    assert MAX_OVERHEAD == max(overhead(s, t) for s in Suite for t in tag_sizes(s) if t == 16)


@pytest.mark.parametrize(
    "type_, plain_bytes",
    [
        (EncryptedString(11), 44),  # characters, 4 UTF-8 bytes each at most
        (EncryptedBinary(16), 16),
        (Encrypted(sa.Integer), 11),
        (Encrypted(sa.BigInteger), 20),
        (Encrypted(sa.Date), 10),
        (Encrypted(sa.Numeric(10, 2)), 12),
        (Encrypted(sa.Uuid), 16),
    ],
)
def test_storage_length_is_plaintext_plus_overhead(type_, plain_bytes):
    assert type_.storage_length == plain_bytes + MAX_OVERHEAD


def test_unbounded_types_have_no_storage_length():
    for type_ in (EncryptedText(), EncryptedJSON(), EncryptedBinary(), EncryptedString()):
        assert type_.storage_length is None


def test_ddl_per_dialect():
    t = _table(
        Column("ssn", EncryptedString(11)),
        Column("notes", EncryptedText()),
        Column("email_index", BlindIndex("ssn", keyring="index")),
    )
    pg = str(CreateTable(t).compile(dialect=postgresql.dialect()))
    lite = str(CreateTable(t).compile(dialect=sqlite.dialect()))
    my = str(CreateTable(t).compile(dialect=mysql.dialect()))
    assert "ssn BYTEA" in pg and "notes BYTEA" in pg and "email_index BYTEA" in pg
    assert "ssn BLOB" in lite and "notes BLOB" in lite
    assert (
        "ssn VARBINARY(99)" in my and "notes LONGBLOB" in my and "email_index VARBINARY(20)" in my
    )
    big = _table(Column("doc", EncryptedBinary(100_000)), name="big")
    assert "doc BLOB(100055)" in str(CreateTable(big).compile(dialect=mysql.dialect()))


def test_repr_is_secret_free_and_evaluable(keyrings):
    t = _table(
        Column("a", EncryptedString(11)),
        Column("b", EncryptedString(20, keyring="pii", column="old_b")),
        Column("c", Encrypted(sa.Numeric(10, 2), bind_row=True)),
        Column("d", EncryptedJSON()),
        Column("e", BlindIndex("a", size=8)),
        name="users",
    )
    expected = {
        "a": "EncryptedString(11)",
        "b": "EncryptedString(20, keyring='pii', column='old_b')",
        "c": "Encrypted(sa.Numeric(precision=10, scale=2), bind_row=True)",
        "d": "EncryptedJSON()",
        "e": "BlindIndex('a', size=8)",
    }
    namespace = {"sa": sa, **{name: getattr(ssa, name) for name in ssa.__all__}}
    for name, text in expected.items():
        type_ = t.c[name].type
        assert repr(type_) == text
        assert type(type_).__module__ == "sealstore.adapters.sqlalchemy"
        rebuilt = eval(text, namespace)  # what an Alembic migration renders, evaluated
        assert type(rebuilt) is type(type_)
        assert repr(rebuilt) == text
    material = keyrings.enc.primary.reveal_material()
    for col in t.c:
        assert material.hex() not in repr(col.type) and repr(material) not in repr(col.type)


def test_attaching_binds_each_column_to_its_own_copy():
    shared = EncryptedString(30)
    t1 = _table(Column("a", shared), Column("b", shared), name="t1")
    t2 = _table(Column("a", shared), name="t2")
    bound = [(c.type.table, c.type.column) for c in (t1.c.a, t1.c.b, t2.c.a)]
    assert bound == [("t1", "a"), ("t1", "b"), ("t2", "a")]
    assert shared.table is None and shared.column is None and not shared.bound
    assert len({id(c.type) for c in (t1.c.a, t1.c.b, t2.c.a)}) == 3
    assert t1.c.a.type.context() != t1.c.b.type.context() != t2.c.a.type.context()


def test_pinned_names_survive_renames_and_copies():
    t = _table(Column("new_name", EncryptedString(30, column="old_name")), name="users")
    assert (t.c.new_name.type.table, t.c.new_name.type.column) == ("users", "old_name")
    copy = t.to_metadata(MetaData(), name="users_copy")
    assert (copy.c.new_name.type.table, copy.c.new_name.type.column) == ("users_copy", "old_name")
    unpinned = _table(Column("x", EncryptedString(30)), name="a").to_metadata(MetaData(), name="b")
    assert unpinned.c.x.type.table == "b"


def test_unbound_type_cannot_seal(keyrings):
    with pytest.raises(ColumnBindingError, match="not bound"):
        EncryptedString(10).seal("x")
    explicit = EncryptedString(10, table="users", column="ssn")
    assert explicit.open(explicit.seal("x")) == "x"


def test_types_pickle(keyrings):
    t = _table(Column("a", EncryptedString(11)), Column("a_index", BlindIndex("a")), name="users")
    for type_ in (t.c.a.type, Encrypted(sa.Date), t.c.a_index.type):
        clone = pickle.loads(pickle.dumps(type_))
        assert repr(clone) == repr(type_)
    assert pickle.loads(pickle.dumps(t.c.a.type)).open(t.c.a.type.seal("123")) == "123"


def test_the_base_type_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        ssa.EncryptedType()


def test_encrypted_refuses_unsupported_and_nested_types():
    with pytest.raises(TypeError, match="no canonical encoding"):
        Encrypted(sa.ARRAY(sa.Integer))
    with pytest.raises(TypeError, match="plain SQL type"):
        Encrypted(EncryptedString(3))


def test_constructor_arguments_are_checked():
    with pytest.raises(ValueError):
        EncryptedString(-1)
    with pytest.raises(TypeError):
        EncryptedString(10, keyring=b"default")
    with pytest.raises(ValueError):
        BlindIndex("email", size=33)
    with pytest.raises(ValueError):
        BlindIndex("email", size=0)
    with pytest.raises(TypeError):
        BlindIndex("")


# ---- codecs ----------------------------------------------------------------------------------


def _round(type_, value):
    codec = codec_for(type_)
    return codec.decode(codec.encode(value))


@given(st.text())
def test_string_codec_round_trips(value):
    assert _round(sa.Text(), value) == value


@given(st.binary())
def test_binary_codec_round_trips(value):
    assert _round(sa.LargeBinary(), value) == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_bigint_codec_round_trips(value):
    assert _round(sa.BigInteger(), value) == value


@given(st.floats(allow_nan=False))
def test_float_codec_round_trips_exactly(value):
    assert _round(sa.Float(), value) == value


@given(st.datetimes(timezones=st.none() | st.timezones()))
def test_datetime_codec_keeps_the_instant(value):
    out = _round(sa.DateTime(timezone=True), value)
    if value.utcoffset() is None:
        assert out == value
    else:  # the instant its offset names; == between zones is False for a time in a DST gap (PEP 495)
        assert out.utcoffset() == dt.timedelta(0)
        assert out.replace(tzinfo=None) == value.replace(tzinfo=None) - value.utcoffset()


@given(st.timedeltas())
def test_interval_codec_round_trips(value):
    assert _round(sa.Interval(), value) == value


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.text()
        | st.floats(allow_nan=False, allow_infinity=False),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_json_codec_round_trips(value):
    assert codec_for(sa.JSON()).decode(codec_for(sa.JSON()).encode(value)) == value


def test_codecs_are_canonical_and_enforce_the_declared_type():
    num = codec_for(sa.Numeric(6, 2))
    assert num.encode(decimal.Decimal("10.005")) == b"10.01"  # half away from zero, like PostgreSQL
    assert num.encode(decimal.Decimal("-10.005")) == b"-10.01"
    assert num.encode(decimal.Decimal("1E+2")) == b"100.00"
    assert num.encode(3) == b"3.00"
    with pytest.raises(ValueTooLong):
        num.encode(decimal.Decimal("123456.7"))
    with pytest.raises(ValueTooLong):
        codec_for(sa.Integer()).encode(2**31)
    with pytest.raises(ValueTooLong):
        codec_for(sa.SmallInteger()).encode(-(2**15) - 1)
    with pytest.raises(TypeError):
        codec_for(sa.Integer()).encode("5")
    with pytest.raises(TypeError):
        codec_for(sa.Integer()).encode(True)
    with pytest.raises(TypeError):
        codec_for(sa.Date()).encode(dt.datetime(2020, 1, 1))  # a datetime is not a date
    assert codec_for(sa.Boolean()).encode(False) == b"0"
    u = uuid.uuid4()
    assert codec_for(sa.Uuid()).encode(str(u)) == u.bytes
    assert codec_for(sa.Uuid(as_uuid=False)).decode(u.bytes) == str(u)
    with pytest.raises(ValueTooLong):
        codec_for(sa.String(3)).encode("abcd")
    assert codec_for(sa.String(3)).encode("😀😀😀") == "😀😀😀".encode()


def test_enum_codec():
    class Color(enum.Enum):
        RED = 1
        GREEN = 2

    codec = codec_for(sa.Enum(Color))
    assert codec.encode(Color.GREEN) == b"GREEN"
    assert codec.decode(b"GREEN") is Color.GREEN
    with pytest.raises(ValueError):
        codec.encode("BLUE")
    plain = codec_for(sa.Enum("a", "b", name="ab"))
    assert plain.decode(plain.encode("b")) == "b"


def test_alembic_autogenerate_renders_the_types():
    alembic = pytest.importorskip("alembic", reason="Alembic is an optional dependency")
    from alembic.autogenerate import produce_migrations, render_python_code
    from alembic.migration import MigrationContext

    t = _table(
        Column("ssn", EncryptedString(11)),
        Column("amount", Encrypted(sa.Numeric(10, 2), keyring="pii")),
        Column("ssn_index", BlindIndex("ssn", size=8), index=True),
        name="users",
    )
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        code = render_python_code(
            produce_migrations(MigrationContext.configure(conn), t.metadata).upgrade_ops
        )
    assert alembic.__version__
    assert "sealstore.adapters.sqlalchemy.EncryptedString(11)" in code
    assert (
        "sealstore.adapters.sqlalchemy.Encrypted(sa.Numeric(precision=10, scale=2), keyring='pii')"
        in code
    )
    assert "sealstore.adapters.sqlalchemy.BlindIndex('ssn', size=8)" in code
    assert "info=" not in code  # nothing of sealstore's bookkeeping leaks into migrations
    # the rendered column definitions evaluate back to the same types
    namespace = {"sa": sa, "sealstore": __import__("sealstore.adapters.sqlalchemy")}
    rendered = eval("sealstore.adapters.sqlalchemy.EncryptedString(11)", namespace)
    assert isinstance(rendered, EncryptedString) and rendered.length == 11


def test_declarative_mixins_bind_per_table(keyrings):
    class Base(DeclarativeBase):
        pass

    class HasSecret:
        secret: Mapped[str | None] = mapped_column(EncryptedString(20))

    class A(HasSecret, Base):
        __tablename__ = "mix_a"
        id: Mapped[int] = mapped_column(primary_key=True)

    class B(HasSecret, Base):
        __tablename__ = "mix_b"
        id: Mapped[int] = mapped_column(primary_key=True)
        secret_or_none = column_property(sa.func.coalesce(sa.literal_column("secret"), None))

    sa.orm.configure_mappers()
    a_type, b_type = A.__table__.c.secret.type, B.__table__.c.secret.type
    assert (a_type.table, b_type.table) == ("mix_a", "mix_b")
    with pytest.raises(InvalidTag):
        b_type.open(a_type.seal("x"))


# ---- the processors: one native call per value, the Python path behind it -------------------

_PROCESSOR_CASES = [
    (EncryptedString(30), ["", "ascii", "héllo wörld", "x" * 30]),
    (EncryptedText(), ["", "t" * 5000, "日本語" * 100]),
    (EncryptedBinary(64), [b"", b"\x00\xff" * 32, bytearray(b"ba"), memoryview(b"mv")]),
    (EncryptedJSON(), [{"a": [1, "é"]}, [], "s", 1.5, True]),
    (Encrypted(sa.Integer), [0, -(2**31), 2**31 - 1]),
    (Encrypted(sa.Date), [dt.date(2026, 11, 30)]),
]


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect(), mysql.dialect()],
                         ids=["sqlite", "postgresql", "mysql"])  # fmt: skip
@pytest.mark.parametrize("type_, values", _PROCESSOR_CASES, ids=lambda c: repr(c)[:24])
def test_processors_round_trip_through_the_keyring(keyrings, dialect, type_, values):
    col = _table(Column("c", type_)).c.c
    impl = col.type.dialect_impl(dialect)
    bind, result = impl.bind_processor(dialect), impl.result_processor(dialect, None)
    assert type(bind).__name__ == "NamedSealer" and type(result).__name__ == "NamedOpener"
    ctx = col.type.context()
    for value in values:
        sealed = bind(value)
        # SQLite's driver binds a bytearray without its adapter lookup; others get bytes
        assert type(sealed) is (bytearray if dialect.name == "sqlite" else bytes)
        assert col.type.codec.decode(keyrings.enc.open(bytes(sealed), ctx)) == result(bytes(sealed))
        expected = bytes(value) if isinstance(value, (bytearray, memoryview)) else value
        assert result(bytes(sealed)) == expected
        assert result(memoryview(bytes(sealed))) == expected  # psycopg may hand a memoryview
        assert col.type.open(col.type.seal(value)) == expected  # the public helpers agree
    assert bind(None) is None and result(None) is None


def test_processors_refuse_bad_values_before_sealing(keyrings):
    t = _table(Column("s", EncryptedString(3)), Column("b", EncryptedBinary(2)),
               Column("i", Encrypted(sa.SmallInteger)))  # fmt: skip
    d = sqlite.dialect()
    s, b, i = (c.type.dialect_impl(d).bind_processor(d) for c in (t.c.s, t.c.b, t.c.i))
    with pytest.raises(ValueTooLong):
        s("abcd")
    with pytest.raises(ValueTooLong):
        s("éééé")
    with pytest.raises(TypeError):
        s(b"abc")
    with pytest.raises(ValueTooLong):
        b(b"abc")
    with pytest.raises(TypeError):
        b("ab")
    with pytest.raises(ValueTooLong):
        i(2**15)


def test_processors_follow_keyring_swaps_and_gcm(keyrings):
    from sealstore.format import parse_header
    from sealstore.keyring import Keyring, use_keyring

    col = _table(Column("c", EncryptedString(30))).c.c
    d = postgresql.dialect()
    impl = col.type.dialect_impl(d)
    bind, result = impl.bind_processor(d), impl.result_processor(d, None)
    gcm = use_keyring(Keyring.generate(Suite.AES_256_GCM))  # replaces "default"
    sealed = bind("after the swap")
    assert parse_header(sealed).suite is Suite.AES_256_GCM
    assert parse_header(sealed).key_id == gcm.primary.key_id
    assert result(sealed) == "after the swap"
    with pytest.raises(InvalidTag):
        other = _table(Column("other", EncryptedString(30)), name="t2").c.other
        other.type.dialect_impl(d).result_processor(d, None)(sealed)


@pytest.mark.parametrize("type_, plaintext", [
    (EncryptedString(30), b"secret \xff\xfe"),
    (EncryptedText(), b"secret \xc3"),
    (EncryptedJSON(), b"secret, not JSON"),
    (Encrypted(sa.Integer), b"secret"),
    (Encrypted(sa.Date), b"secret"),
], ids=lambda c: repr(c)[:24])  # fmt: skip
@pytest.mark.parametrize("suite", [Suite.AEGIS_128X4, Suite.AES_256_GCM])  # native / Python path
def test_plaintext_that_does_not_decode_raises_undecodable_value(type_, plaintext, suite):
    from sealstore.errors import UndecodableValue
    from sealstore.keyring import Keyring, forget_keyring, use_keyring

    ring = use_keyring(Keyring.generate(suite))
    try:
        col = _table(Column("c", type_)).c.c
        sealed = ring.seal(plaintext, col.type.context())  # right key and context, wrong type
        d = sqlite.dialect()
        result = col.type.dialect_impl(d).result_processor(d, None)
        for read in (result, col.type.open):
            with pytest.raises(UndecodableValue) as info:
                read(sealed)
            assert "secret" not in str(info.value)
            assert info.value.__context__ is None and info.value.__cause__ is None
    finally:
        forget_keyring()
