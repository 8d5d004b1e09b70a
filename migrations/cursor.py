"""Keyset pagination on a primary key: comparisons on (composite) keys and their JSON form.

Checkpoints and batch bounds are stored as JSON text in the job tables, so a key must survive
a round trip exactly: each component is tagged with its type (``5`` and ``"5"`` differ).
"""

from __future__ import annotations

from collections.abc import Callable

import base64
import datetime as _dt
import decimal
import json
import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy import and_, tuple_
from sqlalchemy.sql.elements import ColumnElement

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["PrimaryKey", "after", "at_most", "dump_key", "in_range", "load_key"]

#: a row's primary-key values, in the order of the primary key's columns (of any column type)
PrimaryKey: TypeAlias = tuple[Any, ...]

_ENCODERS = (
    (bool, None),  # refused: a bool primary key is almost certainly a mistake
    (int, ("i", lambda v: v)),
    (str, ("s", lambda v: v)),
    (uuid.UUID, ("u", lambda v: v.hex)),
    (
        (bytes, bytearray, memoryview),
        ("b", lambda v: base64.b64encode(bytes(v)).decode()),
    ),
    (_dt.datetime, ("dt", lambda v: v.isoformat())),
    (_dt.date, ("d", lambda v: v.isoformat())),
    (decimal.Decimal, ("n", str)),
    (float, ("f", repr)),
)
_DECODERS: dict[str, Callable[[Any], Any]] = {
    "i": int,
    "s": str,
    "u": uuid.UUID,
    "b": base64.b64decode,
    "dt": _dt.datetime.fromisoformat,
    "d": _dt.date.fromisoformat,
    "n": decimal.Decimal,
    "f": float,
}


def _encode(value: Any) -> list:
    for types, enc in _ENCODERS:
        if isinstance(value, types):
            if enc is None:
                break
            tag, fn = enc
            return [tag, fn(value)]
    raise TypeError(f"cannot paginate on a primary key of type {type(value).__name__}")


def dump_key(key: PrimaryKey | None) -> str | None:
    """The JSON text of a primary-key tuple (None stays None)."""
    if key is None:
        return None
    return json.dumps([_encode(v) for v in key], separators=(",", ":"))


def load_key(text: str | None) -> PrimaryKey | None:
    """The primary-key tuple of :func:`dump_key` output."""
    if text is None:
        return None
    return tuple(_DECODERS[tag](value) for tag, value in json.loads(text))


def _cmp(cols, key: tuple, op: str) -> ColumnElement:
    if len(cols) != len(key):
        raise ValueError(f"primary key has {len(cols)} columns, checkpoint has {len(key)}")
    if len(cols) == 1:
        left, right = cols[0], key[0]
    else:  # row-value comparison: indexed on PostgreSQL, supported by SQLite >= 3.15
        left = tuple_(*cols)
        right = tuple(key)  # each component bound with its column's type
    return left > right if op == ">" else left <= right


def after(cols: Sequence[ColumnElement[Any]], key: PrimaryKey | None) -> ColumnElement[bool] | None:
    """``pk > key`` (None when ``key`` is None: no lower bound)."""
    return None if key is None else _cmp(cols, key, ">")


def at_most(cols: Sequence[ColumnElement[Any]], key: PrimaryKey) -> ColumnElement[bool]:
    """``pk <= key``."""
    return _cmp(cols, key, "<=")


def in_range(
    cols: Sequence[ColumnElement[Any]], lo: PrimaryKey | None, hi: PrimaryKey | None
) -> ColumnElement[bool] | None:
    """``lo < pk <= hi`` with either bound optional."""
    parts = [
        c for c in (after(cols, lo), None if hi is None else at_most(cols, hi)) if c is not None
    ]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else and_(*parts)
