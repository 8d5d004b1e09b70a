"""Column widths are each codec's exact worst case: the longest value every codec accepts fills
its MariaDB VARBINARY(n) column exactly, in strict mode and with ``sql_mode=''`` (which would
truncate silently), and round-trips on SQLite and PostgreSQL too; a value that would not fit is
refused before anything is written, naming the column and not the value."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    Table,
    create_engine,
    event,
    insert,
    inspect,
    select,
)
from sqlalchemy.exc import StatementError

from sealstore.adapters.sqlalchemy import MAX_OVERHEAD, Encrypted, EncryptedString, codec_for
from sealstore.errors import ValueTooLong

from sqlalchemy_cases import keyrings, raw  # noqa: F401

D = decimal.Decimal
UTC = dt.timezone.utc
LONGEST_OFFSET = dt.timezone(-dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999))

# (column, type, worst cases: the longest encoding is among them, and values near the limits)
CASES = [
    ("n44", sa.Numeric(4, 4), [D("-0.1234"), D("-0.9999"), D("-Infinity"), D("NaN"), D("0")]),
    ("n35", sa.Numeric(3, 5), [D("-0.00999"), D("0.00001"), D("-Infinity")]),
    ("n122", sa.Numeric(12, 2), [D("-9999999999.99"), D("9999999999.994"), D("Infinity")]),
    ("n10", sa.Numeric(10), [D("-0.0000000001"), D("-9999999999"), D("-1.234567890")]),
    ("n3neg", sa.Numeric(3, -2), [D("-99900"), D("-99949"), D("-Infinity")]),
    ("f", sa.Float(), [-2.2250738585072014e-308, -1.7976931348623157e308, float("-inf"), 5e-324]),
    ("i", sa.Integer(), [-(2**31), 2**31 - 1]),
    ("si", sa.SmallInteger(), [-(2**15), 2**15 - 1]),
    ("bi", sa.BigInteger(), [-(2**63), 2**63 - 1]),
    ("t", sa.Time(timezone=True), [dt.time(23, 59, 59, 999999, tzinfo=LONGEST_OFFSET),
                                   dt.time(0, 0, tzinfo=dt.timezone(dt.timedelta(seconds=1)))]),
    ("ts", sa.DateTime(timezone=True), [
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(2020, 6, 1, 12, 0, 0, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, seconds=30.5))),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    ]),
    ("d", sa.Date(), [dt.date.max, dt.date.min]),
    ("iv", sa.Interval(), [dt.timedelta.min, dt.timedelta.max]),
    ("s", sa.String(5), ["😀" * 5, "ab😀"]),
    ("b", sa.LargeBinary(7), [b"\xff" * 7]),
    ("u", sa.Uuid(), [__import__("uuid").UUID(int=2**128 - 1)]),
    ("flag", sa.Boolean(), [True, False]),
]  # fmt: skip

metadata = MetaData()
widths = Table(
    "ss_widths",
    metadata,
    Column("id", Integer, primary_key=True),
    *(Column(name, Encrypted(type_)) for name, type_, _ in CASES),
    Column("es", EncryptedString(3)),
)


def _read_equal(type_, expected, got) -> bool:
    if isinstance(expected, D) and expected.is_nan():
        return got.is_nan()
    if isinstance(type_, sa.Numeric) and not isinstance(type_, sa.Float):
        if expected.is_finite():
            scale = type_.scale
            return got == (
                expected.quantize(D(1).scaleb(-scale)) if scale is not None else expected
            )
    if isinstance(expected, dt.datetime) and expected.tzinfo is not None:
        return got == expected and got.utcoffset() == dt.timedelta(0)
    return got == expected


@pytest.mark.parametrize("name, type_, values", CASES, ids=[c[0] for c in CASES])
def test_the_longest_encoding_is_the_codec_size(name, type_, values):
    codec = codec_for(type_)
    assert max(len(codec.encode(v)) for v in values) == codec.max_size
    for value in values:
        assert _read_equal(type_, value, codec.decode(codec.encode(value)))


@settings(max_examples=300, deadline=None)
@given(st.decimals(allow_nan=True, allow_infinity=True, places=None), st.sampled_from(
    [(4, 4), (3, 5), (12, 2), (10, None), (3, -2), (1, 0), (6, 3), (38, 10)]))  # fmt: skip
def test_no_accepted_decimal_is_longer_than_the_size(value, limits):
    codec = codec_for(sa.Numeric(*limits))
    try:
        encoded = codec.encode(value)
    except (ValueTooLong, ValueError):
        return
    assert len(encoded) <= codec.max_size


_OFFSETS = st.builds(
    lambda us: dt.timezone(dt.timedelta(microseconds=us)), st.integers(-86399999999, 86399999999)
)
_ANY_VALUE = st.one_of(
    st.tuples(st.just(sa.Float()), st.floats()),
    st.tuples(st.just(sa.Time(timezone=True)), st.times(timezones=st.timezones() | _OFFSETS)),
    st.tuples(st.just(sa.DateTime(timezone=True)), st.datetimes(timezones=st.none() | _OFFSETS)),
    st.tuples(st.just(sa.Interval()), st.timedeltas()),
    st.tuples(st.just(sa.String(3)), st.text(max_size=3)),
    st.tuples(st.just(sa.Integer()), st.integers(-(2**31), 2**31 - 1)),
)


@settings(max_examples=300, deadline=None)
@given(_ANY_VALUE)
def test_no_accepted_value_is_longer_than_the_size(case):
    type_, value = case
    codec = codec_for(type_)
    try:
        encoded = codec.encode(value)
    except (ValueTooLong, ValueError):
        return
    assert len(encoded) <= codec.max_size


@pytest.fixture(params=["sqlite", "postgresql", "mariadb-strict", "mariadb-non-strict"])
def mode_engine(request, tmp_path, keyrings):
    """An engine per backend; MariaDB once in its default (strict) mode and once with sql_mode=''
    set on every connection (where MariaDB truncates an over-long value with a warning)."""
    backend = request.param
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'widths.db'}"
    else:
        url = request.getfixturevalue("pg_url" if backend == "postgresql" else "mariadb_url")
    engine = create_engine(url)
    if backend == "mariadb-non-strict":

        @event.listens_for(engine, "connect")
        def _non_strict(dbapi_conn, _record):
            with dbapi_conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = ''")

    if backend.startswith("mariadb"):
        with engine.connect() as conn:
            mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar_one()
        assert ("STRICT_TRANS_TABLES" in mode) is (backend == "mariadb-strict"), mode
    metadata.create_all(engine)
    try:
        yield engine
    finally:
        metadata.drop_all(engine)
        engine.dispose()


def test_worst_cases_round_trip_and_fill_their_columns(mode_engine):
    rows = max(len(values) for _, _, values in CASES)
    with mode_engine.begin() as conn:
        for i in range(rows):
            conn.execute(insert(widths).values(id=i + 1, **{
                name: values[i] for name, _, values in CASES if i < len(values)}))  # fmt: skip
    with mode_engine.connect() as conn:
        got = {row.id: row for row in conn.execute(select(widths))}
    for name, type_, values in CASES:
        for i, value in enumerate(values):
            assert _read_equal(type_, value, got[i + 1]._mapping[name]), (name, value)
    reflected = {c["name"]: c["type"] for c in inspect(mode_engine).get_columns("ss_widths")}
    for name, type_, values in CASES:
        longest = max(len(raw(mode_engine, "ss_widths", name, i + 1)) for i in range(len(values)))
        assert (
            longest
            == widths.c[name].type.storage_length
            == codec_for(type_).max_size + MAX_OVERHEAD
        )
        if mode_engine.dialect.name in ("mysql", "mariadb"):
            assert reflected[name].length == longest, name


REFUSED = [
    ("n44", D("1")), ("n44", D("-0.99995")), ("n35", D("0.01")), ("n35", D("-0.009995")),
    ("n122", D("10000000000")), ("n10", D("0.00000000001")), ("n10", D("1E+10")),
    ("n10", D("1E+999999999")), ("n122", D("-1E+999999999")), ("n3neg", D("99950")),
    ("i", 2**31), ("si", -(2**15) - 1), ("bi", 2**63), ("f", 10**400), ("f", D("1E+400")),
    ("ts", dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))),
    ("s", "😀" * 6), ("b", b"\x00" * 8), ("es", "abcd"),
]  # fmt: skip


@pytest.mark.parametrize("name, value", REFUSED, ids=lambda v: str(v)[:12])
def test_values_that_would_not_fit_are_refused_before_writing(mode_engine, name, value):
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(StatementError) as info, mode_engine.begin() as conn:
            conn.execute(insert(widths).values(id=1, **{name: value}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 1E+999999999 is refused, not formatted: its billion digits would take a gigabyte (a
    # memory bound, not a time one: a loaded machine changes the time, not the allocations)
    assert peak < 64 * 2**20, peak
    error = info.value.orig
    assert isinstance(error, ValueTooLong)
    assert f"ss_widths.{name}" in str(error)
    assert str(value) not in str(error) and str(value)[:4] not in str(error).replace(
        "ss_widths", ""
    )
    with mode_engine.connect() as conn:
        assert conn.execute(select(sa.func.count()).select_from(widths)).scalar_one() == 0


@pytest.mark.parametrize("value", [D("sNaN"), D("NaN123"), D("-sNaN")])
def test_other_special_decimals_are_refused(value):
    with pytest.raises(ValueError):
        codec_for(sa.Numeric(10, 2)).encode(value)


def test_negative_nan_is_stored_as_nan():
    assert codec_for(sa.Numeric(4, 4)).encode(D("-NaN")) == b"NaN"


@pytest.mark.parametrize("type_", [sa.String(10), sa.Text(), sa.JSON()])
def test_lone_surrogates_are_refused_without_the_text(type_):
    codec = codec_for(type_)
    value = "SECRET\ud800" if not isinstance(type_, sa.JSON) else {"k": "SECRET\ud800"}
    with pytest.raises(ValueError) as info:
        codec.encode(value)
    exc = info.value
    assert "SECRET" not in f"{exc!r} {exc}" and exc.__context__ is None and exc.__cause__ is None
