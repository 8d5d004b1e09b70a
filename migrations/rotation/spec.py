"""Column specs: what the rotation engine needs to know about one encrypted or index column.

A :class:`ColumnSpec` names a table, its primary-key columns, one encrypted column, the
keyring that seals it, and how a value's context is built (column-bound, or row-bound with
the row's primary key).  :func:`specs_from_metadata` builds them from models that use
``sealstore.adapters.sqlalchemy`` types, calling the types' own ``context()`` so a value is
re-sealed with exactly the context the application opens it with.  :meth:`ColumnSpec.reflect`
builds one for a column known only by name (plain ``column_context(table, column)`` binding).

An :class:`IndexSpec` names a blind-index column and its source :class:`ColumnSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Column, LargeBinary, MetaData, String, Table, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.types import TypeEngine

from ...errors import ColumnBindingError, ValueTooLong
from ...format import column_context
from ...keyring import Keyring, get_keyring
from ..cursor import PrimaryKey

__all__ = ["ColumnSpec", "IndexSpec", "select_specs", "specs_from_metadata"]

ContextFn = Callable[[Any], bytes]


@dataclass(frozen=True, eq=False)
class ColumnSpec:
    """One encrypted column: ``table.column`` with primary key ``pk`` (names) of ``pk_types``.

    ``context(row)`` returns the value context; ``row`` is the primary-key tuple, or None
    unless ``row_bound``.  ``keyring`` is a registered keyring name or a Keyring.
    ``codec`` (optional) decodes opened plaintext into the Python value (blind indexes need it).
    """

    table: str
    column: str
    pk: tuple[str, ...]
    pk_types: tuple[TypeEngine[Any], ...]
    context: ContextFn
    row_bound: bool = False
    keyring: str | Keyring = "default"
    schema: str | None = None
    type: Any = None  # the sealstore column type, when the spec came from a model
    max_bytes: int | None = None  # the reflected column's width in bytes, when it has one
    #: a tenant-aware column (docs/TENANTS.md): the tenant whose values this spec re-seals
    #: (under the tenant's own keyring); ``keyring`` and ``legacy_context`` then describe the
    #: values written before the column was tenant-aware, re-sealed to the tenant binding
    tenant: str | None = None
    legacy_context: ContextFn | None = None
    #: (column name, value): only the rows whose tenant column holds the tenant
    row_filter: tuple[str, Any] | None = None
    _sql: dict[tuple[str, ...], Table] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """``table.column`` (with the schema when there is one)."""
        prefix = f"{self.schema}." if self.schema else ""
        return f"{prefix}{self.table}.{self.column}"

    def get_keyring(self) -> Keyring:
        """The keyring values are re-sealed with (a tenant's own, for a tenant spec)."""
        if self.tenant is not None:
            from ... import tenants

            return tenants.tenant_keyring(self.tenant)
        return self.keyring if isinstance(self.keyring, Keyring) else get_keyring(self.keyring)

    def legacy_keyring(self) -> Keyring | None:
        """A tenant spec's keyring of the values written before tenancy (None: not loaded)."""
        if self.tenant is None or self.legacy_context is None:
            return None
        if isinstance(self.keyring, Keyring):
            return self.keyring
        from ...keyring.named import _NAMED

        return _NAMED.get(self.keyring)

    def open_value(
        self,
        keyring: Keyring,
        sealed: bytes,
        row: PrimaryKey | None,
        *,
        allow_retired: bool = True,
    ) -> bytes:
        """The plaintext of one stored value: under ``keyring`` with this spec's context, or,
        for a tenant spec, a legacy value (its key is the column keyring's, not the tenant's)
        with the legacy context.  ``allow_retired``: True for re-sealing and re-indexing (a
        retired key's values are what they move), False for verification (a value under a
        retired key is one the application can no longer open)."""
        legacy = self.legacy_keyring()
        if legacy is not None and self.legacy_context is not None:
            from ...format import key_id_of

            key_id = key_id_of(sealed)
            if key_id not in keyring and key_id in legacy:
                legacy_ctx = self.legacy_context(row if self.row_bound else None)
                return legacy.open(sealed, legacy_ctx, allow_retired=allow_retired)
        return keyring.open(sealed, self.context_of(row), allow_retired=allow_retired)

    def is_legacy(self, key_id: int | None) -> bool:
        """True for a key id of the legacy keyring that the tenant's keyring does not hold."""
        legacy = self.legacy_keyring()
        if legacy is None or key_id is None:
            return False
        return key_id in legacy and key_id not in self.get_keyring()

    def context_of(self, row: PrimaryKey | None) -> bytes:
        """The context of the value in row ``row`` (ignored unless row-bound)."""
        return self.context(row if self.row_bound else None)

    def check_sealed(self, sealed: bytes) -> bytes:
        """``sealed``, or ValueTooLong before it is written when the column cannot hold it:
        the model type's overhead allowance (``EncryptedType.check_fits``) or, for a reflected
        column, its width (a database would truncate or refuse the value)."""
        if self.type is not None:
            return bytes(self.type.check_fits(sealed))
        if self.max_bytes is not None and len(sealed) > self.max_bytes:
            raise ValueTooLong(
                f"{self.name} holds at most {self.max_bytes} bytes; a value resealed with the "
                f"primary key takes {len(sealed)} (a suite or tag size with more overhead): "
                "widen the column first"
            )
        return sealed

    def rows_where(self, table: Table) -> Any:
        """The WHERE clause selecting this spec's rows (a tenant column's), or None."""
        if self.row_filter is None:
            return None
        return table.c[self.row_filter[0]] == self.row_filter[1]

    def sql_table(self, *extra: str) -> Table:
        """A private Core table with the primary key and this column as raw bytes (plus
        ``extra`` raw-bytes columns): reads and writes through it never seal or open."""
        key = extra
        table = self._sql.get(key)
        if table is None:
            cols = [Column(n, t, primary_key=True) for n, t in zip(self.pk, self.pk_types)]
            for name in (self.column, *extra):
                if name not in self.pk:
                    cols.append(Column(name, LargeBinary))
            if self.row_filter is not None and self.row_filter[0] not in self.pk:
                cols.append(Column(self.row_filter[0], String))
            table = Table(self.table, MetaData(), *cols, schema=self.schema)
            self._sql[key] = table
        return table

    @classmethod
    def from_column(cls, column: Column[Any]) -> ColumnSpec:
        """The spec of a model column typed with a sealstore encrypted type.  A tenant-aware
        column's spec is for one tenant: its table's schema (``tenant="schema"``), else the
        active ``sealstore.tenant()`` block's tenant (TenantRequired without one)."""
        from ...adapters.sqlalchemy import EncryptedType

        type_ = column.type
        if not isinstance(type_, EncryptedType):
            raise TypeError(f"{column} is not an encrypted column")
        table = column.table
        pk = tuple(table.primary_key.columns)
        if not pk:
            raise ColumnBindingError(f"table {table.name} has no primary key to paginate on")
        if type_.tenant_mode is not None:
            return cls._tenant_spec(column, type_, pk)
        return cls(
            table=table.name,  # SQL name; the context comes from the type
            column=column.name,
            pk=tuple(c.name for c in pk),
            pk_types=tuple(_plain(c.type) for c in pk),
            context=type_.context,
            row_bound=type_.bind_row,
            keyring=type_.keyring_name,
            schema=table.schema,
            type=type_,
        )

    @classmethod
    def _tenant_spec(cls, column: Column[Any], type_: Any, pk: tuple[Any, ...]) -> ColumnSpec:
        from ... import tenants
        from ...errors import TenantRequired

        table = column.table
        active = tenants.current_tenant()
        schema = table.schema
        if type_.tenant_mode == "schema":
            if schema is None and active is not None:
                schema = active  # a schema_translate_map model, rotated for one tenant
            if schema is None:
                raise TenantRequired(
                    f"{table.name}.{column.name} binds to its schema's tenant: rotate a "
                    "schema-qualified model, or name the tenant (sealstore.tenant(), --tenant)"
                )
            tenant = tenants.check_name(schema)
        elif active is None:
            raise TenantRequired(
                f"{table.name}.{column.name} binds to the active tenant: name the tenant to "
                "rotate (sealstore.tenant(), --tenant)"
            )
        else:
            tenant = active
        names = (type_.table, type_.column)

        def context(row: Any, _t: str = tenant, _s: str | None = schema) -> bytes:
            return column_context(names[0], names[1], row, tenant=_t, schema=_s)

        return cls(
            table=table.name,
            column=column.name,
            pk=tuple(c.name for c in pk),
            pk_types=tuple(_plain(c.type) for c in pk),
            context=context,
            row_bound=type_.bind_row,
            keyring=type_.keyring_name,
            schema=schema,
            type=type_,
            tenant=tenant,
            legacy_context=type_.context if type_.tenant_legacy else None,
            row_filter=(type_.tenant_column, tenant) if type_.tenant_column else None,
        )

    @classmethod
    def reflect(
        cls,
        bind: Engine | Connection,
        table: str,
        column: str,
        *,
        keyring: str | Keyring = "default",
        row_bound: bool = False,
        schema: str | None = None,
    ) -> ColumnSpec:
        """A spec for ``table.column`` read from the database schema, with sealstore's
        standard contexts (``column_context(table, column[, row])``)."""
        insp = inspect(bind)
        if not insp.has_table(table, schema=schema):
            raise ColumnBindingError(f"table {table} does not exist")
        columns = {c["name"]: c for c in insp.get_columns(table, schema=schema)}
        if column not in columns:
            raise ColumnBindingError(f"table {table} has no column {column}")
        pk = insp.get_pk_constraint(table, schema=schema)["constrained_columns"]
        if not pk:
            raise ColumnBindingError(f"table {table} has no primary key to paginate on")

        def context(row, _t=table, _c=column):
            return column_context(_t, _c, row)

        width = getattr(columns[column]["type"], "length", None)
        return cls(
            table=table,
            column=column,
            pk=tuple(pk),
            pk_types=tuple(columns[n]["type"] for n in pk),
            context=context,
            row_bound=row_bound,
            keyring=keyring,
            schema=schema,
            max_bytes=width if isinstance(width, int) else None,
        )


@dataclass(frozen=True, eq=False)
class IndexSpec:
    """A blind-index column ``column`` of ``source.table`` computed from ``source``'s values."""

    source: ColumnSpec
    column: str
    type: Any  # the bound sealstore BlindIndex type

    @property
    def name(self) -> str:
        prefix = f"{self.source.schema}." if self.source.schema else ""
        return f"{prefix}{self.source.table}.{self.column}"

    @property
    def table(self) -> str:
        return self.source.table

    def get_keyring(self) -> Keyring:
        if self.source.tenant is not None:  # a tenant-aware source: the tenant's index keyring
            from ... import tenants

            return tenants.tenant_index_keyring(self.source.tenant)
        return get_keyring(self.type.keyring)


_Spec = TypeVar("_Spec", ColumnSpec, IndexSpec)


def _plain(type_: TypeEngine[Any]) -> TypeEngine[Any]:
    """A primary-key type as stored (encrypted primary keys cannot be paginated)."""
    from ...adapters.sqlalchemy import EncryptedType

    if isinstance(type_, EncryptedType):
        raise ColumnBindingError("an encrypted column cannot be a primary key")
    return type_


def _tables(source) -> list[Table]:
    if isinstance(source, Table):
        return [source]
    if isinstance(source, MetaData):
        return list(source.sorted_tables)
    meta = getattr(source, "metadata", None)  # a declarative base or a mapped class
    if isinstance(meta, MetaData):
        table = getattr(source, "__table__", None)
        return [table] if isinstance(table, Table) else list(meta.sorted_tables)
    if isinstance(source, (list, tuple)):
        return [t for item in source for t in _tables(item)]
    raise TypeError(
        f"expected a MetaData, Table, declarative base or mapped class, not {type(source).__name__}"
    )


def specs_from_metadata(source: Any) -> tuple[list[ColumnSpec], list[IndexSpec]]:
    """Every encrypted column and every blind index of ``source`` (MetaData, a declarative
    base, a mapped class, a Table, or a list of those)."""
    from ...adapters.sqlalchemy import BlindIndex, EncryptedType

    columns: list[ColumnSpec] = []
    indexes: list[IndexSpec] = []
    for table in _tables(source):
        by_name: dict[str, ColumnSpec] = {}
        for col in table.columns:
            if isinstance(col.type, EncryptedType):
                spec = ColumnSpec.from_column(col)
                columns.append(spec)
                by_name[col.name] = by_name[col.key] = spec
        for col in table.columns:
            if isinstance(col.type, BlindIndex):
                source_spec = by_name.get(col.type.source)
                if source_spec is None:
                    continue  # the type itself reports a missing source when used
                indexes.append(IndexSpec(source_spec, col.name, col.type))
    return columns, indexes


def select_specs(
    specs: Iterable[_Spec], table: str | None = None, column: str | None = None
) -> list[_Spec]:
    """The specs matching ``table`` and ``column`` (None matches all)."""
    out = [
        s
        for s in specs
        if (table is None or s.table == table) and (column is None or s.column == column)
    ]
    return out
