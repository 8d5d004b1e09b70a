"""Canonical byte encodings of column values, sealed by the encrypted column types.

A codec turns one Python value into the exact bytes that get sealed (and back).  Encodings are
canonical and dialect independent, so a ciphertext means the same thing on SQLite, PostgreSQL
and MySQL, and a blind index computed from the encoding matches equal values:

==================  ==========================================================================
inner type          encoding
==================  ==========================================================================
String / Text       UTF-8 (``length`` counts characters, as in the plain type)
LargeBinary         the bytes themselves
JSON                compact ``json.dumps`` (``","`` and ``":"`` separators, UTF-8, keys in
                    insertion order)
Boolean             ``b"0"`` / ``b"1"``
Integer family      decimal ASCII; the range of the declared type is enforced
                    (SmallInteger 16 bits, Integer 32, BigInteger 64)
Float               ``repr(float)`` (shortest round-tripping form)
Numeric             fixed-point ``format(d, "f")``; quantized to ``scale`` (half away from
                    zero, like PostgreSQL), ``precision`` enforced
Date / Time         ISO 8601
DateTime            ISO 8601; aware datetimes are converted to UTC first
Interval            whole microseconds, decimal ASCII
Uuid                the 16 raw bytes
Enum                the string SQLAlchemy's Enum persists (``type.enums``): member names, or
                    the ``values_callable`` values, or the strings of a string enum
==================  ==========================================================================
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import uuid
from typing import Any, Callable, NamedTuple

from sqlalchemy import types as sqltypes

from ...errors import UndecodableValue, ValueTooLong

__all__ = ["Codec", "codec_for", "string_codec", "binary_codec", "json_codec"]


class Codec(NamedTuple):
    """How one column type turns values into bytes: ``encode``, ``decode`` and ``max_size``
    (the largest encoding in bytes, or None when unbounded)."""

    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]
    max_size: int | None
    name: str

    def decoded(self, plaintext: bytes) -> Any:
        """``decode(plaintext)`` for a value just opened; a failure raises UndecodableValue,
        without the plaintext (a UnicodeDecodeError or JSONDecodeError would carry it in its
        attributes, and chain it as ``__context__``)."""
        try:
            return self.decode(plaintext)
        except Exception as exc:  # raised below, outside the handler: no __context__ either
            failed = type(exc).__name__
        raise UndecodableValue(
            f"a {self.name} value opened but does not decode ({failed}); was it written by "
            "another column type?"
        )


def _type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"{name} column expects {expected}, not {type(value).__name__}")


def string_codec(length: int | None, name: str = "EncryptedString") -> Codec:
    """UTF-8 text; ``length`` is in characters and enforced (ValueTooLong)."""

    def encode(value: Any) -> bytes:
        if type(value) is not str and not isinstance(value, str):
            raise _type_error(name, "str", value)
        if length is not None and len(value) > length:
            raise ValueTooLong(f"{name}({length}) value has {len(value)} characters")
        return value.encode("utf-8")

    def decode(data: bytes) -> str:
        return data.decode("utf-8")

    return Codec(encode, decode, None if length is None else 4 * length, name)


def binary_codec(length: int | None, name: str = "EncryptedBinary") -> Codec:
    """Bytes as they are; ``length`` in bytes is enforced (ValueTooLong)."""

    def encode(value: Any) -> bytes:
        if type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise _type_error(name, "bytes", value)
            value = bytes(value)
        if length is not None and len(value) > length:
            raise ValueTooLong(f"{name}({length}) value has {len(value)} bytes")
        return value

    def decode(data: bytes) -> bytes:
        return data

    return Codec(encode, decode, length, name)


def json_codec(name: str = "EncryptedJSON") -> Codec:
    """Compact JSON in UTF-8.  Python ``None`` is SQL NULL, so a JSON ``null`` cannot be stored."""
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    loads = json.loads

    def encode(value: Any) -> bytes:
        try:
            return dumps(value).encode("utf-8")
        except TypeError as exc:
            raise TypeError(f"{name} value is not JSON serializable: {exc}") from None

    return Codec(encode, loads, None, name)


def _integer_codec(bits: int, name: str) -> Codec:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(name, "int", value)
        if not low <= value <= high:
            raise ValueTooLong(f"{name} value does not fit in {bits} bits")
        return b"%d" % value

    return Codec(encode, int, len(str(low)), name)


def _boolean_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if value is True or value == 1 and isinstance(value, int):
            return b"1"
        if value is False or value == 0 and isinstance(value, int):
            return b"0"
        raise _type_error(name, "bool", value)

    def decode(data: bytes) -> bool:
        return data == b"1"

    return Codec(encode, decode, 1, name)


def _float_codec(name: str, asdecimal: bool) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise _type_error(name, "float", value)
        return repr(float(value)).encode("ascii")

    def decode(data: bytes):
        return decimal.Decimal(data.decode("ascii")) if asdecimal else float(data)

    return Codec(encode, decode, 24, name)


def _numeric_codec(precision: int | None, scale: int | None, asdecimal: bool, name: str) -> Codec:
    quantum = decimal.Decimal(1).scaleb(-scale) if scale is not None else None

    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise _type_error(name, "Decimal", value)
        d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if quantum is not None and d.is_finite():
            d = d.quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        if precision is not None and d.is_finite():
            digits = len(d.as_tuple().digits)
            if digits > precision and d != 0:
                raise ValueTooLong(f"{name}({precision}, {scale}) value has {digits} digits")
        return format(d, "f").encode("ascii")

    def decode(data: bytes):
        d = decimal.Decimal(data.decode("ascii"))
        return d if asdecimal else float(d)

    size = precision + 2 if precision is not None else None
    return Codec(encode, decode, size, name)


def _date_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date):
            raise _type_error(name, "datetime.date", value)
        return value.isoformat().encode("ascii")

    return Codec(encode, lambda b: _dt.date.fromisoformat(b.decode("ascii")), 10, name)


def _datetime_codec(name: str) -> Codec:
    utc = _dt.timezone.utc

    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.datetime):
            raise _type_error(name, "datetime.datetime", value)
        if value.tzinfo is not None and value.utcoffset() is not None:
            value = value.astimezone(utc)
        return value.isoformat().encode("ascii")

    return Codec(encode, lambda b: _dt.datetime.fromisoformat(b.decode("ascii")), 32, name)


def _time_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.time):
            raise _type_error(name, "datetime.time", value)
        return value.isoformat().encode("ascii")

    return Codec(encode, lambda b: _dt.time.fromisoformat(b.decode("ascii")), 21, name)


def _interval_codec(name: str) -> Codec:
    one = _dt.timedelta(microseconds=1)

    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.timedelta):
            raise _type_error(name, "datetime.timedelta", value)
        return b"%d" % (value // one)

    return Codec(encode, lambda b: _dt.timedelta(microseconds=int(b)), 25, name)


def _uuid_codec(as_uuid: bool, name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, str):
            try:
                return uuid.UUID(value).bytes
            except ValueError:
                raise ValueError(f"{name} value is not a UUID string") from None
        raise _type_error(name, "uuid.UUID", value)

    def decode(data: bytes):
        u = uuid.UUID(bytes=bytes(data))
        return u if as_uuid else str(u)

    return Codec(encode, decode, 16, name)


def _enum_codec(type_: sqltypes.Enum, name: str) -> Codec:
    """The string SQLAlchemy's own Enum persists (``type_.enums``): the member names of an enum
    class, or what ``values_callable`` returns for it, or the strings of a string enum.

    A member is encoded as its persisted string (the first one, for aliases, as SQLAlchemy
    does) and a str only when it is one of the persisted strings, whatever ``validate_strings``
    says: any other string could be sealed but never read back as a member.
    """
    enum_class = type_.enum_class
    persisted = list(type_.enums)
    by_string = dict(type_._object_lookup)  # SQLAlchemy's own: persisted string -> member
    to_string = {}
    for text, member in by_string.items():
        to_string.setdefault(id(member), text)
    # enums with values_callable were sealed as member names before: read those back too, when
    # no name is also a persisted string (else a name could mean another member)
    legacy = {}
    if enum_class is not None and type_.values_callable is not None:
        names = dict(enum_class.__members__)
        if not set(names) & set(by_string):
            legacy = names

    def encode(value: Any) -> bytes:
        if enum_class is not None and isinstance(value, enum_class):
            text = to_string.get(id(value))
        elif isinstance(value, str):
            text = value if value in by_string else None
        else:
            raise _type_error(name, "an enum member or str", value)
        if text is None:
            raise ValueError(f"{name} value is not one of the enum's members")
        return text.encode("utf-8")

    def decode(data: bytes):
        text = data.decode("utf-8")
        try:
            return by_string[text]
        except KeyError:
            return legacy[text]

    size = max((len(e.encode("utf-8")) for e in persisted), default=0)
    return Codec(encode, decode, size, name)


def codec_for(type_: sqltypes.TypeEngine, name: str = "Encrypted") -> Codec:
    """The canonical codec for a generic SQLAlchemy type (``Integer``, ``Date``, ``Numeric`` ...).

    Raises TypeError for types without a canonical encoding (user TypeDecorators, ARRAY ...).
    """
    label = f"{name}({type(type_).__name__})"
    # Order matters: Enum is a String, Float is a Numeric, BigInteger/SmallInteger are Integers.
    if isinstance(type_, sqltypes.Enum):
        return _enum_codec(type_, label)
    if isinstance(type_, sqltypes.String):
        return string_codec(type_.length, label)
    if isinstance(type_, sqltypes._Binary):
        return binary_codec(type_.length, label)
    if isinstance(type_, sqltypes.JSON):
        return json_codec(label)
    if isinstance(type_, sqltypes.Boolean):
        return _boolean_codec(label)
    if isinstance(type_, sqltypes.BigInteger):
        return _integer_codec(64, label)
    if isinstance(type_, sqltypes.SmallInteger):
        return _integer_codec(16, label)
    if isinstance(type_, sqltypes.Integer):
        return _integer_codec(32, label)
    if isinstance(type_, sqltypes.Float):
        return _float_codec(label, bool(type_.asdecimal))
    if isinstance(type_, sqltypes.Numeric):
        return _numeric_codec(type_.precision, type_.scale, bool(type_.asdecimal), label)
    if isinstance(type_, sqltypes.DateTime):
        return _datetime_codec(label)
    if isinstance(type_, sqltypes.Date):
        return _date_codec(label)
    if isinstance(type_, sqltypes.Time):
        return _time_codec(label)
    if isinstance(type_, sqltypes.Interval):
        return _interval_codec(label)
    if isinstance(type_, sqltypes.Uuid):
        return _uuid_codec(bool(type_.as_uuid), label)
    raise TypeError(
        f"Encrypted() has no canonical encoding for {type(type_).__name__}; supported: String, "
        "Text, LargeBinary, JSON, Boolean, Integer, BigInteger, SmallInteger, Float, Numeric, "
        "Date, DateTime, Time, Interval, Uuid, Enum"
    )
