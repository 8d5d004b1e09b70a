"""Row binding: values of ``bind_row=True`` columns are bound to their row's primary key too.

A ``TypeDecorator`` never sees the row it is processing, so row-bound values are sealed and
opened by the ORM (``orm.py``): at flush time, when the instance's primary key is known, each
value is sealed into a :class:`PreSealed` that the column's bind step passes through; at load
time the column reads a :class:`SealedRowValue` that the ORM ``load``/``refresh`` hooks open
with the instance's identity.

What it needs: the primary key must exist before the INSERT, i.e. assigned by the
application or by a Python-side column default (``default=uuid.uuid4``); database-generated
keys (autoincrement, sequences, server defaults) are unknown when the value is sealed and are
refused with ColumnBindingError.  Changing a row's primary key re-seals its row-bound values.

Outside the ORM (Core ``insert()``/``select()``, ``bulk_insert_mappings``) a row-bound column
accepts only values sealed with :func:`seal_for_row` and reads as :class:`SealedRowValue`
(``.open(primary_key)``); a plain value raises ColumnBindingError instead of being sealed
without its row.

A row-bound column that is also tenant-aware (``tenant=`` or ``tenant_column=``) binds each
value to its tenant, its schema and its row (``column_context(table, column, row, tenant=,
schema=)``, the ``sealstore/v1/tenant-row`` domain) under the tenant's own keyring.  Its values
are sealed in the bind step, when the statement's tenant is known (the flush or
:func:`seal_for_row` only records the plaintext and the row), and read as a
:class:`SealedRowValue` that remembers the tenant its statement ran for (``tenancy.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

from ...errors import ColumnBindingError

__all__ = ["PreSealed", "SealedRowValue", "seal_for_row", "row_identity"]


class PreSealed:
    """A value already sealed for one row of one column; the bind step writes ``sealed``."""

    __slots__ = ("sealed", "plaintext", "table", "column", "row")
    sealed: bytes | None  # None: a tenant-aware column's value, sealed in the bind step
    plaintext: Any
    table: str | None
    column: str | None
    row: tuple[Any, ...]

    def __init__(
        self,
        sealed: bytes | None,
        plaintext: Any,
        table: str | None,
        column: str | None,
        row: tuple[Any, ...],
    ) -> None:
        self.sealed = sealed
        self.plaintext = plaintext
        self.table = table
        self.column = column
        self.row = row

    def __repr__(self) -> str:  # never shows the plaintext
        return f"<PreSealed {self.table}.{self.column} row={self.row!r}>"


class SealedRowValue:
    """A row-bound value read outside the ORM: call ``.open(primary_key)`` to decrypt it."""

    __slots__ = ("sealed", "type", "where")
    sealed: bytes
    type: Any  # the column's EncryptedType
    where: tuple[str, str | None] | None  # (tenant, schema) it was read under, tenant columns

    def __init__(
        self, sealed: bytes, type_: Any, where: tuple[str, str | None] | None = None
    ) -> None:
        self.sealed = sealed
        self.type = type_
        self.where = where

    def open(self, row: Any) -> Any:
        """Decrypt with the row's primary key (a value, or a tuple for composite keys)."""
        if self.where is not None:
            return self.type.open(self.sealed, row_identity(row), where=self.where)
        return self.type.open(self.sealed, row_identity(row))

    def __repr__(self) -> str:
        return f"<SealedRowValue {self.type.table}.{self.type.column}: .open(primary_key)>"


def row_identity(row: Any) -> tuple[Any, ...]:
    """The canonical row identity: a tuple of primary-key values."""
    return tuple(row) if isinstance(row, (tuple, list)) else (row,)


def seal_for_row(column: Any, value: Any, row: Any) -> PreSealed | None:
    """Seal ``value`` for the row-bound ``column`` (a Column or mapped attribute) of the row
    whose primary key is ``row``, for Core inserts/updates and bulk inserts."""
    type_ = getattr(column, "type", None)
    if type_ is None or not getattr(type_, "bind_row", False):
        raise ColumnBindingError(
            "seal_for_row() takes a row-bound encrypted column (bind_row=True)"
        )
    if value is None:
        return None
    return sealed_for_row(type_, value, row_identity(row))


def sealed_for_row(type_: Any, value: Any, ident: tuple[Any, ...]) -> PreSealed:
    """``value`` sealed for row ``ident`` of the row-bound ``type_``; a tenant-aware column's
    value is only checked here (encoded) and sealed in the bind step, under the statement's
    tenant."""
    if type_.tenant_mode is not None:
        type_.codec.encode(value)  # bad values are refused now, as for the other columns
        return PreSealed(None, value, type_.table, type_.column, ident)
    return PreSealed(type_.seal(value, ident), value, type_.table, type_.column, ident)


def row_bind_processor(type_: Any) -> Callable[[Any], Any]:
    names = (type_.table, type_.column)
    where = f"{type_.table}.{type_.column}"

    def process(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is PreSealed:
            if (value.table, value.column) != names:
                raise ColumnBindingError(
                    f"a value sealed for {value.table}.{value.column} was written to {where}"
                )
            return value.sealed
        raise ColumnBindingError(
            f"{where} is row-bound: plain values are sealed by ORM flushes, which know the "
            "primary key; for Core or bulk writes use seal_for_row(column, value, primary_key)"
        )

    return process


def row_result_processor(type_: Any) -> Callable[[Any], Any]:
    def process(value: Any) -> Any:
        if value is None:
            return None
        return SealedRowValue(bytes(value), type_)

    return process


PreSealed.__module__ = SealedRowValue.__module__ = "sealstore.adapters.sqlalchemy"
