"""Canonical byte encodings of values, the bytes sealstore seals (and indexes) for a typed field.

A codec turns one Python value into the exact bytes that get sealed (and back), and knows the
longest encoding so a storage adapter can size its column.  Encodings are canonical and
independent of any database, so a ciphertext means the same thing on SQLite, PostgreSQL and
MySQL, and a blind index computed from the encoding matches equal values:

==================  ==========================================================================
codec               encoding
==================  ==========================================================================
string              UTF-8 (``length`` counts characters)
binary              the bytes themselves
json                compact ``json.dumps`` (``","`` and ``":"`` separators, UTF-8, keys in
                    insertion order)
boolean             ``b"0"`` / ``b"1"``
integer             decimal ASCII; the range of the declared width is enforced (16, 32, 64 bits)
float               ``repr(float)`` (shortest round-tripping form)
numeric             fixed-point ``format(d, "f")``; quantized to ``scale`` (half away from
                    zero, like PostgreSQL), ``precision`` enforced (without a scale it
                    counts every digit written); ``NaN``, ``Infinity``, ``-Infinity``
date / time         ISO 8601
datetime            ISO 8601; aware datetimes are converted to UTC first
interval            whole microseconds, decimal ASCII
uuid                the 16 raw bytes
enum                the persisted string of the member
==================  ==========================================================================

Which codec a column type gets is the adapter's business (``sealstore.adapters.sqlalchemy
.codecs.codec_for`` for SQLAlchemy types); bad values raise the ``sealstore.errors`` classes
``WrongValueType``, ``ValueTooLong``, ``UnencodableValue`` and ``UndecodableValue``, never with
the value in the message.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import uuid
from typing import Any, Callable, NamedTuple

from .errors import UndecodableValue, UnencodableValue, ValueTooLong, WrongValueType

__all__ = [
    "Codec",
    "binary_codec",
    "boolean_codec",
    "date_codec",
    "datetime_codec",
    "enum_codec",
    "float_codec",
    "integer_codec",
    "interval_codec",
    "json_codec",
    "numeric_codec",
    "numeric_size",
    "string_codec",
    "time_codec",
    "uuid_codec",
]


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
        error = UndecodableValue(
            f"a {self.name} value opened but does not decode ({failed}); was it written by "
            "another column type?"
        )
        error.failed = failed  # the decoder's exception class name, nothing of its message
        raise error


def _type_error(name: str, expected: str, value: Any) -> WrongValueType:
    return WrongValueType(f"{name} column expects {expected}, not {type(value).__name__}")


def _utf8(text: str, name: str) -> bytes:
    """``text`` in UTF-8; a lone surrogate raises UnencodableValue without the text (the
    UnicodeEncodeError would carry it in ``.object``, and chain it as ``__context__``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    raise UnencodableValue(
        f"{name} value is not valid Unicode (a lone surrogate): it has no UTF-8 form"
    )


def string_codec(length: int | None, name: str = "EncryptedString") -> Codec:
    """UTF-8 text; ``length`` is in characters and enforced (ValueTooLong)."""

    def encode(value: Any) -> bytes:
        if type(value) is not str and not isinstance(value, str):
            raise _type_error(name, "str", value)
        if length is not None and len(value) > length:
            raise ValueTooLong(f"{name} value has {len(value)} characters, more than {length}")
        return _utf8(value, name)

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
            raise ValueTooLong(f"{name} value has {len(value)} bytes, more than {length}")
        out: bytes = value
        return out

    def decode(data: bytes) -> bytes:
        return data

    return Codec(encode, decode, length, name)


def json_codec(name: str = "EncryptedJSON") -> Codec:
    """Compact JSON in UTF-8.  Python ``None`` is SQL NULL, so a JSON ``null`` cannot be stored."""
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    loads = json.loads

    def encode(value: Any) -> bytes:
        try:
            text = dumps(value)
        except TypeError as exc:
            raise WrongValueType(f"{name} value is not JSON serializable: {exc}") from None
        return _utf8(text, name)

    return Codec(encode, loads, None, name)


def integer_codec(bits: int, name: str) -> Codec:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(name, "int", value)
        if not low <= value <= high:
            raise ValueTooLong(f"{name} value does not fit in {bits} bits")
        return b"%d" % value

    return Codec(encode, int, len(str(low)), name)


def boolean_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if value is True or value == 1 and isinstance(value, int):
            return b"1"
        if value is False or value == 0 and isinstance(value, int):
            return b"0"
        raise _type_error(name, "bool", value)

    def decode(data: bytes) -> bool:
        return data == b"1"

    return Codec(encode, decode, 1, name)


def float_codec(name: str, asdecimal: bool) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise _type_error(name, "float", value)
        try:
            f = float(value)
        except OverflowError:  # an int beyond a double
            f = math.inf
        if math.isinf(f) and not (
            isinstance(value, float) or isinstance(value, decimal.Decimal) and value.is_infinite()
        ):
            raise ValueTooLong(f"{name} value does not fit in a double")
        return repr(f).encode("ascii")

    def decode(data: bytes) -> Any:
        return decimal.Decimal(data.decode("ascii")) if asdecimal else float(data)

    # repr(): at most 17 significant digits, "-2.2250738585072014e-308"
    return Codec(encode, decode, 24, name)


#: digits before the point of an unconstrained Numeric (PostgreSQL's numeric limit)
_MAX_WHOLE = 131072
_SPECIALS = {"NaN": b"NaN", "Infinity": b"Infinity", "-Infinity": b"-Infinity"}


def numeric_size(precision: int | None, scale: int | None) -> int | None:
    """The longest ``format(d, "f")`` a ``Numeric(precision, scale)`` codec writes, in bytes.

    With a scale: a sign, the integer digits (at least one ``0``), and a point plus ``scale``
    digits (a negative scale writes that many zeros instead).  Without one, ``precision``
    counts every digit written, so a sign, ``0.`` and ``precision`` digits.  ``-Infinity`` is
    the longest special value.
    """
    if precision is None:
        return None
    if scale is None:
        fixed = 1 + 2 + precision
    else:
        fixed = 1 + max(precision - scale, 1) + (scale + 1 if scale > 0 else 0)
    return max(fixed, len(_SPECIALS["-Infinity"]))


def _written_digits(d: decimal.Decimal) -> int:
    """Digits of ``format(d, "f")`` other than the single ``0`` before the point of |d| < 1."""
    _, digits, exponent = d.as_tuple()
    if not isinstance(exponent, int):  # 'n', 'N', 'F': NaN and Infinity, refused before
        raise ValueError("a finite Decimal is required")
    if exponent >= 0:
        return len(digits) + exponent if digits != (0,) else 1
    return max(len(digits), -exponent)


def numeric_codec(precision: int | None, scale: int | None, asdecimal: bool, name: str) -> Codec:
    quantum = decimal.Decimal(1).scaleb(-scale) if scale is not None else None
    exact = decimal.Context(prec=decimal.MAX_PREC, rounding=decimal.ROUND_HALF_UP)
    too_long = f"{name} value does not fit in Numeric({precision}, {scale})"

    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise _type_error(name, "Decimal", value)
        d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if not d.is_finite():
            special = _SPECIALS.get("NaN" if d.is_qnan() and not d.as_tuple().digits else str(d))
            if special is None:  # sNaN, NaN with a payload
                raise UnencodableValue(
                    f"{name} takes NaN, Infinity and -Infinity, no other special value"
                )
            return special
        # bounded before quantizing or formatting: 1E+999999999 must not build a billion digits
        if d and d.adjusted() >= (
            precision - (scale or 0) if precision is not None else _MAX_WHOLE
        ):
            raise ValueTooLong(too_long)
        if quantum is not None:
            d = d.quantize(quantum, context=exact)
            if precision is not None and len(d.as_tuple().digits) > precision and d != 0:
                raise ValueTooLong(too_long)
        elif precision is not None and _written_digits(d) > precision:
            raise ValueTooLong(too_long)
        return format(d, "f").encode("ascii")

    def decode(data: bytes) -> Any:
        d = decimal.Decimal(data.decode("ascii"))
        return d if asdecimal else float(d)

    return Codec(encode, decode, numeric_size(precision, scale), name)


def date_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date):
            raise _type_error(name, "datetime.date", value)
        return _dt.date.isoformat(value).encode("ascii")  # a subclass's own isoformat may differ

    return Codec(encode, lambda b: _dt.date.fromisoformat(b.decode("ascii")), 10, name)


def datetime_codec(name: str) -> Codec:
    utc = _dt.timezone.utc

    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.datetime):
            raise _type_error(name, "datetime.datetime", value)
        if value.tzinfo is not None and value.utcoffset() is not None:
            try:
                value = value.astimezone(utc)
            except OverflowError:  # 0001-01-01 00:00+01:00 is before year 1 in UTC
                value = None
            if value is None:
                raise ValueTooLong(f"{name} value is out of datetime's range once in UTC")
        return _dt.datetime.isoformat(value).encode("ascii")

    # "9999-12-31T23:59:59.999999+00:00": aware values are in UTC, so the offset has no seconds
    return Codec(encode, lambda b: _dt.datetime.fromisoformat(b.decode("ascii")), 32, name)


def time_codec(name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.time):
            raise _type_error(name, "datetime.time", value)
        return _dt.time.isoformat(value).encode("ascii")

    # "23:59:59.999999-23:59:59.999999": the offset keeps its seconds and microseconds
    return Codec(encode, lambda b: _dt.time.fromisoformat(b.decode("ascii")), 31, name)


def interval_codec(name: str) -> Codec:
    one = _dt.timedelta(microseconds=1)

    def encode(value: Any) -> bytes:
        if not isinstance(value, _dt.timedelta):
            raise _type_error(name, "datetime.timedelta", value)
        return b"%d" % (value // one)

    size = len(str(_dt.timedelta.min // one))  # "-86399999999999999999", 21 bytes
    return Codec(encode, lambda b: _dt.timedelta(microseconds=int(b)), size, name)


def uuid_codec(as_uuid: bool, name: str) -> Codec:
    def encode(value: Any) -> bytes:
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, str):
            try:
                return uuid.UUID(value).bytes
            except ValueError:
                raise UnencodableValue(f"{name} value is not a UUID string") from None
        raise _type_error(name, "uuid.UUID", value)

    def decode(data: bytes) -> Any:
        u = uuid.UUID(bytes=bytes(data))
        return u if as_uuid else str(u)

    return Codec(encode, decode, 16, name)


def enum_codec(
    by_string: dict[str, Any],
    name: str,
    *,
    enum_class: type | None = None,
    legacy: dict[str, Any] | None = None,
) -> Codec:
    """An enumeration stored as strings: ``by_string`` maps each persisted string to its member
    (to itself for a string enum); ``enum_class`` is the members' class, if any.

    A member is encoded as its persisted string (the first one, for aliases) and a str only when
    it is one of the persisted strings: any other string could be sealed but never read back as
    a member.  ``legacy`` maps other strings (e.g. member names written before a change of the
    persisted strings) to the members they are read back as; they are never written.
    """
    by_string = dict(by_string)
    if not all(isinstance(text, str) for text in by_string):
        raise TypeError("an enum codec's persisted values must all be str")
    legacy = dict(legacy or {})
    to_string: dict[int, str] = {}
    for text, member in by_string.items():
        to_string.setdefault(id(member), text)

    def encode(value: Any) -> bytes:
        if enum_class is not None and isinstance(value, enum_class):
            text = to_string.get(id(value))
        elif isinstance(value, str):
            text = value if value in by_string else None
        else:
            raise _type_error(name, "an enum member or str", value)
        if text is None:
            raise UnencodableValue(f"{name} value is not one of the enum's members")
        return text.encode("utf-8")

    def decode(data: bytes) -> Any:
        text = data.decode("utf-8")
        try:
            return by_string[text]
        except KeyError:
            return legacy[text]

    size = max((len(e.encode("utf-8")) for e in by_string), default=0)
    return Codec(encode, decode, size, name)
