"""Which canonical codec (``sealstore.codecs``) an encrypted column's inner SQLAlchemy type gets.

==================  ==================================================
inner type          codec
==================  ==================================================
String / Text       ``string_codec(length)``
LargeBinary         ``binary_codec(length)``
JSON                ``json_codec()``
Boolean             ``boolean_codec()``
Integer family      ``integer_codec(bits)``: SmallInteger 16, Integer 32, BigInteger 64
Float               ``float_codec(asdecimal)``
Numeric             ``numeric_codec(precision, scale, asdecimal)``
Date / Time         ``date_codec()`` / ``time_codec()``
DateTime            ``datetime_codec()``
Interval            ``interval_codec()``
Uuid                ``uuid_codec(as_uuid)``
Enum                ``enum_codec`` over the strings SQLAlchemy's Enum persists (``type.enums``):
                    member names, or the ``values_callable`` values, or the strings of a
                    string enum
==================  ==================================================
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import types as sqltypes

from ... import codecs as C
from ...codecs import Codec

__all__ = ["Codec", "codec_for"]


def _enum_codec(type_: sqltypes.Enum, name: str) -> Codec:
    """The strings SQLAlchemy's own Enum persists: ``type_._object_lookup`` maps each one to its
    member (SQLAlchemy's own table, aliases included)."""
    enum_class = type_.enum_class
    # (its None -> None entry is SQL NULL, which is never sealed)
    by_string = {k: v for k, v in type_._object_lookup.items() if k is not None}
    # enums with values_callable were sealed as member names before: read those back too, when
    # no name is also a persisted string (else a name could mean another member)
    legacy = {}
    if enum_class is not None and type_.values_callable is not None:
        names = dict(enum_class.__members__)
        if not set(names) & set(by_string):
            legacy = names
    return C.enum_codec(by_string, name, enum_class=enum_class, legacy=legacy)


def codec_for(
    type_: sqltypes.TypeEngine[Any], name: str = "Encrypted", where: str | None = None
) -> Codec:
    """The canonical codec for a generic SQLAlchemy type (``Integer``, ``Date``, ``Numeric`` ...);
    ``where`` (``"table.column"``) is named in its error messages.

    Raises TypeError for types without a canonical encoding (user TypeDecorators, ARRAY ...).
    """
    label = f"{name}({type(type_).__name__})"
    if where is not None:
        label = f"{where} ({label})"
    # Order matters: Enum is a String, Float is a Numeric, BigInteger/SmallInteger are Integers.
    if isinstance(type_, sqltypes.Enum):
        return _enum_codec(type_, label)
    if isinstance(type_, sqltypes.String):
        return C.string_codec(type_.length, label)
    if isinstance(type_, sqltypes._Binary):
        return C.binary_codec(type_.length, label)
    if isinstance(type_, sqltypes.JSON):
        return C.json_codec(label)
    if isinstance(type_, sqltypes.Boolean):
        return C.boolean_codec(label)
    if isinstance(type_, sqltypes.BigInteger):
        return C.integer_codec(64, label)
    if isinstance(type_, sqltypes.SmallInteger):
        return C.integer_codec(16, label)
    if isinstance(type_, sqltypes.Integer):
        return C.integer_codec(32, label)
    if isinstance(type_, sqltypes.Float):
        return C.float_codec(label, bool(type_.asdecimal))
    if isinstance(type_, sqltypes.Numeric):
        return C.numeric_codec(type_.precision, type_.scale, bool(type_.asdecimal), label)
    if isinstance(type_, sqltypes.DateTime):
        return C.datetime_codec(label)
    if isinstance(type_, sqltypes.Date):
        return C.date_codec(label)
    if isinstance(type_, sqltypes.Time):
        return C.time_codec(label)
    if isinstance(type_, sqltypes.Interval):
        return C.interval_codec(label)
    if isinstance(type_, sqltypes.Uuid):
        return C.uuid_codec(bool(type_.as_uuid), label)
    raise TypeError(
        f"Encrypted() has no canonical encoding for {type(type_).__name__}; supported: String, "
        "Text, LargeBinary, JSON, Boolean, Integer, BigInteger, SmallInteger, Float, Numeric, "
        "Date, DateTime, Time, Interval, Uuid, Enum"
    )
