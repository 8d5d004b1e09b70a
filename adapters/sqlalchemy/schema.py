"""Binding encrypted and blind-index columns to their table when the column joins a Table.

The listener gives every such column its own copy of its type carrying the table and column
names (so one type object used in two places is never shared), and wires blind indexes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Table, event

from ...errors import UnsupportedOperation
from . import blind_index, writes
from .blind_index import BlindIndex
from .types import EncryptedType

__all__: list[str] = []


@event.listens_for(Column, "after_parent_attach")
def _bind_to_table(column: Column[Any], parent: Any) -> None:
    if not isinstance(parent, Table):
        return
    type_ = column.type
    if isinstance(type_, (EncryptedType, BlindIndex)):
        writes.forget_table(parent)
    if isinstance(type_, EncryptedType):
        if column.server_default is not None or column.server_onupdate is not None:
            raise UnsupportedOperation(
                f"{parent.name}.{column.name} is encrypted: a server_default/server_onupdate would "
                "store the database's plaintext, which never opens; use default= (a Python value, "
                "sealed like any other)"
            )
        column.type = type_.bound_to(parent.name, column.name, parent.schema)
    elif isinstance(type_, BlindIndex):
        blind_index.attach(column, parent)
