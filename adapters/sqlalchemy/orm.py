"""ORM hooks: row-bound sealing at flush/load time and blind indexes kept current on UPDATE.

Registered per mapper when it is configured, and only for mappers that have a row-bound
encrypted column or a blind index, so other models pay nothing.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

from sqlalchemy import Column, event, inspect
from sqlalchemy.engine import Connection
from sqlalchemy import types as sqltypes
from sqlalchemy.orm import Mapper, attributes
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import UnmappedColumnError
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from ...errors import ColumnBindingError, UnsealedExpression
from .blind_index import BlindIndex
from .index_state import guard_unique
from .rows import PreSealed, SealedRowValue, sealed_for_row
from .types import EncryptedType

__all__ = ["MapperPlan"]

_NO_INIT = attributes.PASSIVE_NO_INITIALIZE  # type: ignore[attr-defined]  # (re-exported)
_PLANS: "weakref.WeakKeyDictionary[Mapper[Any], MapperPlan]" = weakref.WeakKeyDictionary()


class MapperPlan:
    """What one mapper needs: row-bound attributes, blind indexes, primary-key attributes."""

    def __init__(
        self,
        mapper: Mapper[Any],
        row_attrs: list[tuple[str, EncryptedType]],
        indexes: list[tuple[str, str, BlindIndex]],
    ) -> None:
        self.mapper = mapper
        self.row_attrs = row_attrs  # [(attribute key, EncryptedType)]
        self.indexes = indexes  # [(source attribute key, index attribute key, BlindIndex)]
        self.pk: list[tuple[str, ColumnElement[Any]]] = [
            (mapper.get_property_by_column(c).key, c) for c in mapper.primary_key
        ]

    # ---- row identity ---------------------------------------------------------------------

    def row(self, target: Any, *, fill_defaults: bool) -> tuple[Any, ...]:
        d = inspect(target).dict
        values = []
        for key, col in self.pk:
            value = d.get(key)
            if value is None and fill_defaults:
                value = _python_default(col)
                if value is not None:
                    setattr(target, key, value)
            if value is None:
                raise ColumnBindingError(
                    f"{col.table.name} has row-bound encrypted columns, so its primary key "
                    f"{col.name} must be known before INSERT: assign it, or give it a Python-side "
                    "default such as default=uuid.uuid4 (database-generated keys cannot be used)"
                )
            values.append(_normalize(col, value))
        return tuple(values)

    # ---- flush --------------------------------------------------------------------------------

    def _seal_rows(self, target: Any, row: tuple[Any, ...], keys: Any) -> None:
        d = inspect(target).dict
        for key, type_ in self.row_attrs:
            if key not in keys:
                continue
            value = d.get(key)
            if value is None:
                continue
            if isinstance(value, ClauseElement) or hasattr(value, "__clause_element__"):
                raise UnsealedExpression(
                    f"{type_.table}.{type_.column} is encrypted: the ORM attribute {key!r} holds a "
                    f"SQL expression ({type(value).__name__}); only Python values are sealed"
                )
            if type(value) is PreSealed:
                if value.row == row:
                    continue
                value = value.plaintext
            elif type(value) is SealedRowValue:  # loaded outside the ORM hooks: open first
                value = value.open(row)
            setattr(target, key, sealed_for_row(type_, value, row))

    def before_insert(self, mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        if self.row_attrs:
            row = self.row(target, fill_defaults=True)
            self._seal_rows(target, row, {k for k, _ in self.row_attrs})

    def before_update(self, mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        state = inspect(target)
        for src_key, index_key, index_type in self.indexes:
            if state.attrs[src_key].history.has_changes():
                value = state.dict.get(src_key)
                guard_unique(connection, index_type, [value], exclude=state.identity)
                setattr(target, index_key, index_type.compute(value))
        if not self.row_attrs:
            return
        row = self.row(target, fill_defaults=False)
        pk_changed = any(
            attributes.get_history(target, key, _NO_INIT).has_changes() for key, _ in self.pk
        )
        keys = set()
        for key, _ in self.row_attrs:
            if attributes.get_history(target, key, _NO_INIT).has_changes():
                keys.add(key)
            elif pk_changed:
                getattr(target, key)  # make sure the value is loaded (and opened)
                keys.add(key)
        self._seal_rows(target, row, keys)

    def after_write(self, mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        d = inspect(target).dict
        for key, _ in self.row_attrs:
            value = d.get(key)
            if type(value) is PreSealed:
                set_committed_value(target, key, value.plaintext)

    # ---- load ---------------------------------------------------------------------------------

    def opened(self, target: Any, *args: Any) -> None:
        state = inspect(target)
        d = state.dict
        row = None
        for key, _ in self.row_attrs:
            value = d.get(key)
            if type(value) is SealedRowValue:
                if row is None:
                    row = state.identity or self.row(target, fill_defaults=False)
                set_committed_value(target, key, value.open(row))


def _python_default(col: Any) -> Any:
    default = col.default
    if default is None or getattr(default, "is_sequence", False):
        return None
    if default.is_scalar:
        return default.arg
    if default.is_callable:
        try:
            return default.arg(None)
        except Exception as exc:  # a context-sensitive default needs the statement
            raise ColumnBindingError(
                f"the Python default of {col.table.name}.{col.name} needs an execution context, "
                "so the row identity is unknown before INSERT; assign the primary key"
            ) from exc
    return None


def _normalize(col: Any, value: Any) -> Any:
    """The primary-key value as it will be loaded back (UUID strings -> UUID, and so on)."""
    if isinstance(col.type, sqltypes.Uuid) and col.type.as_uuid and isinstance(value, str):
        return uuid.UUID(value)
    return value


@event.listens_for(Mapper, "mapper_configured")
def _configure(mapper: Mapper[Any], class_: Any) -> None:
    row_attrs: list[tuple[str, EncryptedType]] = []
    indexes: list[tuple[str, str, BlindIndex]] = []
    for prop in mapper.column_attrs:
        col = prop.columns[0]
        if not isinstance(col, Column):  # column_property(<SQL expression>)
            continue
        type_ = col.type
        if isinstance(type_, EncryptedType) and type_.bind_row:
            row_attrs.append((prop.key, type_))
        elif isinstance(type_, BlindIndex) and type_._table_obj is not None:
            try:
                source = mapper.get_property_by_column(type_.source_column)
            except UnmappedColumnError:  # the source is excluded from this mapper
                continue
            indexes.append((source.key, prop.key, type_))
    if not row_attrs and not indexes:
        return
    plan = MapperPlan(mapper, row_attrs, indexes)
    event.listen(mapper, "before_insert", plan.before_insert)
    event.listen(mapper, "before_update", plan.before_update)
    if row_attrs:
        event.listen(mapper, "after_insert", plan.after_write)
        event.listen(mapper, "after_update", plan.after_write)
        event.listen(mapper, "load", plan.opened)
        event.listen(mapper, "refresh", plan.opened)
    _PLANS[mapper] = plan
