"""The canonical codecs in the core (``sealstore.codecs``): storage-neutral (no SQLAlchemy), the
same bytes the SQLAlchemy columns seal, and bad values refused with the value kept out of the
message.  Per-type edge cases through the column types: tests/adapters/sqlalchemy/."""

import datetime as dt
import decimal
import enum
import subprocess
import sys
import uuid

import pytest

from sealstore import codecs as C
from sealstore.errors import UnencodableValue, ValueTooLong, WrongValueType


def test_the_core_codecs_import_no_storage_library():
    code = (
        "import sys, sealstore.codecs, sealstore.blind_index\n"
        "bad = [m for m in ('sqlalchemy', 'botocore', 'boto3', 'alembic') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "codec, value, encoded",
    [
        (C.string_codec(None), "é", "é".encode()),
        (C.binary_codec(4), b"\x00\x01", b"\x00\x01"),
        (C.json_codec(), {"b": [1, "x"], "a": None}, b'{"b":[1,"x"],"a":null}'),
        (C.boolean_codec("B"), True, b"1"),
        (C.integer_codec(16, "I"), -32768, b"-32768"),
        (C.float_codec("F", False), 0.1, b"0.1"),
        (C.numeric_codec(5, 2, True, "N"), decimal.Decimal("1.005"), b"1.01"),
        (C.date_codec("D"), dt.date(2026, 12, 1), b"2026-12-01"),
        (
            C.datetime_codec("T"),
            dt.datetime(2026, 12, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            b"2026-12-01T00:00:00+00:00",
        ),
        (C.time_codec("t"), dt.time(23, 59), b"23:59:00"),
        (C.interval_codec("i"), dt.timedelta(seconds=1), b"1000000"),
        (C.uuid_codec(True, "U"), uuid.UUID(int=1), uuid.UUID(int=1).bytes),
    ],
)
def test_encodings_are_the_documented_canonical_bytes(codec, value, encoded):
    assert codec.encode(value) == encoded
    assert codec.max_size is None or len(encoded) <= codec.max_size


class Colour(enum.Enum):
    RED = "r"
    GREEN = "g"
    CRIMSON = "r"  # an alias


def test_enum_codec_writes_the_persisted_string_and_reads_members_back():
    codec = C.enum_codec(
        {"RED": Colour.RED, "GREEN": Colour.GREEN},
        "E",
        enum_class=Colour,
        legacy={"old": Colour.RED},
    )
    assert codec.encode(Colour.CRIMSON) == b"RED" and codec.encode("GREEN") == b"GREEN"
    assert codec.decode(b"RED") is Colour.RED and codec.decode(b"old") is Colour.RED
    assert codec.max_size == 5
    with pytest.raises(UnencodableValue) as err:
        codec.encode("old")  # legacy strings are read, never written
    assert "old" not in str(err.value)
    with pytest.raises(WrongValueType):
        codec.encode(1)


def test_bad_values_never_appear_in_the_message():
    secret = "s3cret-value-" * 3
    with pytest.raises(ValueTooLong) as err:
        C.string_codec(5, "S").encode(secret)
    assert "s3cret" not in str(err.value)
    with pytest.raises(UnencodableValue) as err:
        C.string_codec(None, "S").encode("s3cret\udc80")
    assert "s3cret" not in str(err.value) and err.value.__context__ is None
    with pytest.raises(ValueTooLong):
        C.integer_codec(32, "I").encode(2**31)


def test_enum_codec_refuses_persisted_values_that_are_not_strings():
    with pytest.raises(TypeError, match="str"):
        C.enum_codec({None: None, "A": "A"}, "E")
