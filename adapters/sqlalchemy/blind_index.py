"""Blind indexes on SQLAlchemy columns: equality lookups on encrypted columns through a keyed hash.

A ``BlindIndex`` column stores, next to an encrypted column, the index value of
:mod:`sealstore.blind_index` (``key_id || HMAC-SHA256(index_key, encoded value)[:size]``) for
the context ``column_context(table, index column)``: every index has its own key, derived from a
key of a *separate* keyring (``"index"`` by default; never the keyring that encrypts the
column).  The encoded value is the source column's canonical encoding (:mod:`sealstore.codecs`),
so ``"a@x.org"`` and ``"A@x.org"`` are different; normalize before storing if lookups should
ignore case.

Writes use the index keyring's primary key; lookups query every primary and active key, so an
index-key rotation keeps lookups working while rows are re-indexed (``needs_reindex``).
Truncation (``size``, 1..32 bytes, default 16) and its collision rate: see
:mod:`sealstore.blind_index` and docs/COLUMNS.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import VARBINARY, LargeBinary
from sqlalchemy.schema import ColumnDefault
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BindParameter, ClauseElement
from sqlalchemy.sql.lambdas import PyWrapper
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from ...errors import (
    BlindIndexError,
    ColumnBindingError,
    UnsealedExpression,
    UnsupportedComparison,
)
from ... import blind_index as B
from ...blind_index import DEFAULT_SIZE, INDEX_KEYRING, KEY_ID_SIZE
from ...format import column_context
from ...keyring import Keyring, get_keyring
from ...keyring.named import _NAMED
from .lookups import IndexLookup, IndexValues
from .rows import PreSealed

__all__ = [
    "INDEX_KEYRING",
    "KEY_ID_SIZE",
    "BlindIndex",
    "equality_via_index",
    "find_blind_index",
]


class BlindIndex(TypeDecorator[Any]):
    """The type of a blind-index column: ``mapped_column(BlindIndex("email"), index=True)``.

    ``source`` names the encrypted column of the same table (its key or its name); ``size`` is
    the number of HMAC bytes kept (1..32, default 16); ``keyring`` names the index keyring.
    The column is filled on every INSERT (a column default computed from the source value, so
    ORM flushes, ``bulk_insert_mappings`` and Core ``executemany`` all work) and on every write
    that sets the source otherwise (an ORM flush hook, and the engine hook of ``writes.py``).
    """

    impl: Any = LargeBinary
    cache_ok: bool | None = True

    def __init__(
        self,
        source: str,
        size: int = DEFAULT_SIZE,
        *,
        keyring: str = INDEX_KEYRING,
        table: str | None = None,
        column: str | None = None,
    ) -> None:
        if not isinstance(source, str) or not source:
            raise TypeError("source must be the name of the encrypted column (a non-empty str)")
        B.check_size(size)
        if not isinstance(keyring, str) or not keyring:
            raise TypeError("keyring must be a keyring name (a non-empty str)")
        self.source = source
        self.size = size
        self.keyring = keyring
        self.table = table
        self.column = column
        self._pinned = (table, column)
        self._table_obj: Any = None  # the Table this copy is attached to (set by attach())
        self._info_memo: bytes | None = None
        # (index keyring, its keys, each visible encryption keyring and its keys) last checked
        self._separate_memo: tuple[Any, ...] | None = None
        self._tenant_info_memo: dict[tuple[str, str | None], bytes] = {}
        super().__init__(KEY_ID_SIZE + size)

    # ---- copies and binding -----------------------------------------------------------------

    def _rebuild(self, table: str | None, column: str | None) -> "BlindIndex":
        new = BlindIndex(self.source, self.size, keyring=self.keyring, table=table, column=column)
        new._pinned = self._pinned
        return new

    def copy(self, **kw: Any) -> "BlindIndex":
        new = self._rebuild(self.table, self.column)
        new._table_obj = self._table_obj
        return new

    def bound_to(self, table: str, column: str) -> "BlindIndex":
        pinned_table, pinned_column = self._pinned
        return self._rebuild(pinned_table or table, pinned_column or column)

    def __repr__(self) -> str:
        parts = [repr(self.source)]
        if self.size != DEFAULT_SIZE:
            parts.append(f"size={self.size}")
        if self.keyring != INDEX_KEYRING:
            parts.append(f"keyring={self.keyring!r}")
        for name, value in zip(("table", "column"), self._pinned):
            if value is not None:
                parts.append(f"{name}={value!r}")
        return f"BlindIndex({', '.join(parts)})"

    @property
    def python_type(self) -> type:
        return bytes

    @property
    def storage_length(self) -> int:
        return KEY_ID_SIZE + self.size

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(VARBINARY(self.storage_length))
        return dialect.type_descriptor(LargeBinary(self.storage_length))

    # ---- the source column --------------------------------------------------------------------

    @property
    def source_column(self) -> Any:  # a Column whose type is an EncryptedType
        """The encrypted Column this index is computed from (same table)."""
        table = self._table_obj
        if table is None:
            raise BlindIndexError(
                f"BlindIndex({self.source!r}) is not attached to a table column yet"
            )
        col = _column_named(table, self.source)
        if col is None:
            raise BlindIndexError(
                f"BlindIndex source {self.source!r} is not a column of table {table.name}"
            )
        if not getattr(col.type, "sealstore_encrypted", False):
            raise BlindIndexError(
                f"BlindIndex source {table.name}.{col.name} is not an encrypted column"
            )
        if col.type.keyring_name == self.keyring:
            raise BlindIndexError(
                f"the blind index on {table.name}.{col.name} uses keyring {self.keyring!r}, the "
                "column's encryption keyring; index keys must be separate (keyring=...)"
            )
        return col

    def _info(self) -> bytes:
        info = self._info_memo
        if info is None:
            if self.table is None or self.column is None:
                raise BlindIndexError("BlindIndex is not bound to a table column")
            info = self._info_memo = B.index_info(column_context(self.table, self.column))
        return info

    def _keyring(self, source_type: Any) -> Keyring:
        """The index keyring, once it is known to share no key id or material with the
        encryption keyrings this index can see: its source column's and ``"default"``
        (SharedIndexKey otherwise, before any index value is computed).  The check runs again
        whenever one of them is replaced or gains a key (a keyring's key table is replaced
        whole on every added key)."""
        keyring = found = get_keyring(self.keyring)  # `found`: not narrowed by the `is` tests
        source_name = source_type.keyring_name
        col = _NAMED.get(source_name)
        default = _NAMED.get("default") if source_name != "default" else None
        m = self._separate_memo
        if (
            m is not None
            and m[0] is keyring
            and m[1] is keyring._keys
            and m[2] is col
            and (col is None or m[3] is col._keys)
            and m[4] is default
            and (default is None or m[5] is default._keys)
        ):
            return found
        for name, other in ((source_name, col), ("default", default)):
            if other is not None:
                B.check_separate(
                    keyring, other, index_name=self.keyring, other_name=name,
                    what=f"blind index {self.table}.{self.column}",
                )  # fmt: skip
        self._separate_memo = (
            keyring,
            keyring._keys,
            col,
            None if col is None else col._keys,
            default,
            None if default is None else default._keys,
        )
        return keyring

    # ---- computing index values -------------------------------------------------------------

    def compute(self, value: Any) -> bytes | None:
        """The index value of ``value`` (a plaintext of the source column) under the primary key."""
        if value is None:
            return None
        if isinstance(value, ClauseElement) or hasattr(value, "__clause_element__"):
            raise UnsealedExpression(
                f"the source of blind index {self.table}.{self.column} is assigned a SQL "
                f"expression ({type(value).__name__}); only Python values are sealed and indexed"
            )
        source_type = self.source_column.type
        if type(value) is PreSealed:
            if (value.table, value.column) != (source_type.table, source_type.column):
                raise ColumnBindingError(
                    f"a value sealed for {value.table}.{value.column} was written to "
                    f"{source_type.table}.{source_type.column}"
                )
            value = value.plaintext
        data = source_type.codec.encode(value)
        if source_type.tenant_mode is not None:
            return B.index_value(*self._tenant_key(source_type), data, self.size)
        return B.index_value(self._keyring(source_type), self._info(), data, self.size)

    def candidates(self, value: Any) -> list[bytes]:
        """Index values of ``value`` under every key a lookup must try (primary first, then active)."""
        if value is None:
            return []
        source_type = self.source_column.type
        data = source_type.codec.encode(value)
        if source_type.tenant_mode is not None:
            return B.candidates(*self._tenant_key(source_type), data, self.size)
        return B.candidates(self._keyring(source_type), self._info(), data, self.size)

    def compute_for_tenant(self, value: Any, tenant: str, schema: str | None) -> bytes | None:
        """The index value of ``value`` for ``tenant`` (and ``schema``), whatever the active
        tenant: what a re-index of one tenant's rows writes."""
        if value is None:
            return None
        source_type = self.source_column.type
        data = source_type.codec.encode(value)
        return B.index_value(*self._tenant_key(source_type, (tenant, schema)), data, self.size)

    def _tenant_key(
        self, source_type: Any, where: tuple[str, str | None] | None = None
    ) -> tuple[Keyring, bytes]:
        """(index keyring, HKDF info) of a tenant-aware source column for the value being
        indexed now: the tenant's own index keyring, and an info naming the tenant and schema
        (tenancy.py), so equal values in two tenants give unrelated index values."""
        from . import tenancy  # (imported late: tenancy.py uses the column types)
        from ... import tenants

        tenant, schema = tenancy.resolve(source_type) if where is None else where
        keyring = tenants.tenant_index_keyring(tenant)
        memo = self._tenant_info_memo
        info = memo.get((tenant, schema))
        if info is None:
            if self.table is None or self.column is None:
                raise BlindIndexError("BlindIndex is not bound to a table column")
            if len(memo) >= 4096:
                memo.clear()
            info = memo[(tenant, schema)] = B.index_info(
                column_context(self.table, self.column, tenant=tenant, schema=schema)
            )
        return keyring, info

    def key_id_of(self, stored: bytes) -> int:
        """The index key id at the start of a stored index value."""
        return B.key_id_of(stored)

    def needs_reindex(self, stored: bytes | None) -> bool:
        """True when ``stored`` was not computed with the index keyring's primary key."""
        return B.is_stale(get_keyring(self.keyring), stored)

    def compute_from_params(self, params: dict[str, Any]) -> bytes | None:
        return self.compute(params.get(self.source_column.key))


def _column_named(table: Any, name: str) -> Any:
    col = table.c.get(name)
    if col is not None:
        return col
    for col in table.c:
        if col.name == name:
            return col
    return None


def _insert_default(context: Any) -> Any:
    """Column default of every BlindIndex column: the index of the row's source value (a
    UNIQUE index's value was checked under older index keys by ``writes.py`` already)."""
    return context.current_column.type.compute_from_params(context.get_current_parameters())


def attach(column: Any, table: Any) -> None:
    """Bind a BlindIndex column to its table: a bound type copy and the insert default (UPDATEs
    and statement-level values are kept in step by ``writes.py``)."""
    bound = column.type.bound_to(table.name, column.name)
    bound._table_obj = table
    column.type = bound
    if column.default is None:
        ColumnDefault(_insert_default)._set_parent_with_dispatch(column)


# ---- equality lookups ------------------------------------------------------------------------


def find_blind_index(expr: Any) -> Any:
    """The BlindIndex column of the selectable holding ``expr`` (a table or an alias), or None."""
    selectable = getattr(expr, "table", None)
    if selectable is None:
        return None
    names = {getattr(expr, "key", None), getattr(expr, "name", None)} - {None}
    for col in selectable.c:
        if isinstance(col.type, BlindIndex) and col.type.source in names:
            return col
    return None


def _source_bind(expr: Any, op: Any, other: Any) -> Any:
    """The bound parameter whose value is only known at execution (a named ``bindparam()``, a
    ``lambda_stmt()`` closure variable), or None for a value known now."""
    if isinstance(other, PyWrapper):
        return other._py_wrapper_literal(expr=expr, operator=op)  # type: ignore[no-untyped-call]
    if isinstance(other, BindParameter) and other.callable is not None:
        raise UnsupportedComparison(
            f"{_where(expr)}: a blind-index lookup cannot take a bindparam() with a callable"
        )
    if isinstance(other, BindParameter) and not other.unique:
        return other
    return None


def _where(expr: Any) -> str:
    return f"{getattr(getattr(expr, 'table', None), 'name', '?')}.{getattr(expr, 'key', '?')}"


def equality_via_index(expr: Any, op: Any, other: Any, name: str) -> Any:
    """Rewrite ``expr == value`` (``!=``, ``in_``, ``not_in``) to the expression's blind index."""
    index = find_blind_index(expr)
    if index is None:
        raise UnsupportedComparison(
            f"{name} is encrypted with random nonces, so equality on its ciphertext never "
            f"matches; add a blind index column, e.g. "
            f"mapped_column(BlindIndex({getattr(expr, 'key', 'column')!r}), index=True)"
        )
    source = _source_bind(expr, op, other)
    if source is None and getattr(index.type.source_column.type, "tenant_mode", None):
        # a literal of a tenant-aware column: its index values depend on the tenant of the
        # execution (an option, a schema map), so they are computed then, as for a bindparam
        if isinstance(other, BindParameter):
            other = other.value
        source = BindParameter(None, other, unique=True)
        lookup = IndexLookup(source, index, many=op in (operators.in_op, operators.not_in_op))
        lookup.named, lookup.default = True, other
        return index.in_(lookup) if op in (operators.eq, operators.in_op) else index.not_in(lookup)
    if source is not None:
        lookup = IndexLookup(source, index, many=op in (operators.in_op, operators.not_in_op))
        return index.in_(lookup) if op in (operators.eq, operators.in_op) else index.not_in(lookup)
    if isinstance(other, BindParameter):  # a bound value: literal("x"), bindparam(None, "x")
        other = other.value
    if op in (operators.eq, operators.ne):
        values = [other]
    elif isinstance(other, (list, tuple, set, frozenset)):
        values = list(other)
    else:
        raise UnsupportedComparison(
            f"{name}: in_()/not_in() through a blind index takes a list of literal values"
        )
    for value in values:
        if (
            hasattr(value, "__clause_element__")
            or isinstance(value, ClauseElement)
            or value is None
        ):
            raise UnsupportedComparison(
                f"{name}: blind-index lookups compare values or bound parameters (not SQL "
                "expressions, or NULL inside a list)"
            )
    itype: BlindIndex = index.type
    found = [c for value in values for c in itype.candidates(value)]
    if not found:  # in_([]) / not_in([]): SQLAlchemy's empty-set expression
        return index.in_([]) if op is operators.in_op else index.not_in([])
    one = len(found) == 1 and op in (operators.eq, operators.ne)
    marked = IndexValues(found, itype, expanding=not one)  # seen by the lookup hook
    if op is operators.eq:
        return index == marked if one else index.in_(marked)
    if op is operators.ne:
        return index != marked if one else index.not_in(marked)
    if op is operators.in_op:
        return index.in_(marked)
    return index.not_in(marked)


BlindIndex.__module__ = "sealstore.adapters.sqlalchemy"
