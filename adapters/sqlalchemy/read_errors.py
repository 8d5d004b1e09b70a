"""Errors raised while reading an encrypted column: they name ``table.column`` and, where the
row is known, its primary key, and carry no plaintext and no byte of the stored value.

The keyring's own errors say what failed but not where (``InvalidTag`` is raised bare), and
some describe the value's header (a version or key-id byte of a value that was never sealed is
a byte of whatever was stored).  :func:`read_error` rebuilds such an error for one column: the
same class (so ``except InvalidTag`` still works), a fixed message for the header and tag
failures, the column and row as attributes.  Callers raise it outside their ``except`` block,
so it has neither ``__cause__`` nor ``__context__``.
"""

from __future__ import annotations

from typing import Any

from ...errors import (
    InvalidTag,
    MalformedCiphertext,
    SealstoreError,
    ShortTagRefused,
    UndecodableValue,
    UnknownKeyId,
)

__all__ = ["read_error", "with_primary_key", "describe_row"]

# fixed messages for the errors whose own message may describe the stored bytes
_REASONS = (
    (InvalidTag, "the stored value does not authenticate: it was modified or truncated, or "
                 "sealed for another column, row or keyring"),
    (MalformedCiphertext, "the stored value is not a sealed value (never sealed by sealstore, "
                          "or damaged)"),
    (UnknownKeyId, "the stored value names a key that the column's keyring does not hold"),
    (ShortTagRefused, "the stored value has a shorter tag than the keyring requires (open it "
                      "with accept_short_tags=True, e.g. while re-sealing)"),
)  # fmt: skip

_REPR_LIMIT = 80  # a primary key is shown, not dumped


def describe_row(row: Any) -> str:
    """``row`` (a primary-key tuple) as the messages show it: ``1``, ``'a', 2``."""
    values = row if isinstance(row, tuple) else (row,)
    text = ", ".join(repr(v) for v in values)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _reason(exc: SealstoreError) -> str:
    for cls, reason in _REASONS:
        if isinstance(exc, cls):
            return reason
    if isinstance(exc, UndecodableValue):
        failed = getattr(exc, "failed", "error")
        return (f"the value opened but does not decode ({failed}); was it written by another "
                "column type?")  # fmt: skip
    return str(exc)  # KeyNotUsable, UnknownKeyring: they name keys and keyrings, no stored bytes


def read_error(
    exc: SealstoreError, table: str | None, column: str | None, row: Any = None
) -> SealstoreError:
    """A new exception of ``exc``'s class naming ``table.column`` (and the row's primary key,
    a tuple, when given), without ``exc``'s message where that may describe the stored bytes."""
    reason = getattr(exc, "sealstore_reason", None) or _reason(exc)
    cls = type(exc)
    where = f"{table}.{column}"
    if row is not None:
        where += f" (primary key {describe_row(row)})"
    new = cls.__new__(cls)
    Exception.__init__(new, f"{where}: {reason}")  # the class's own __init__ may build a message
    new.table, new.column, new.primary_key = table, column, row
    new.sealstore_reason = reason
    if isinstance(exc, UnknownKeyId):
        setattr(new, "key_id", exc.key_id)
    return new


def with_primary_key(exc: SealstoreError, row: Any) -> SealstoreError:
    """``exc`` (from :func:`read_error`) with the row's primary key added, or ``exc`` itself
    when it names no column or already names a row."""
    if getattr(exc, "table", None) is None or getattr(exc, "primary_key", None) is not None:
        return exc
    return read_error(exc, exc.table, exc.column, row)
