"""Tenant-bound columns: ``EncryptedString(..., tenant="schema" | "context")`` and
``tenant_column="tenant_id"`` (docs/TENANTS.md).

A tenant-aware column seals each value under its tenant's own data keyring
(:mod:`sealstore.tenants`) with the context ``column_context(table, column, tenant=...,
schema=...)``: a value copied to another tenant, another schema, another table or column does
not open there.  Where the tenant comes from:

* ``tenant="schema"``: the schema the statement runs against, i.e. the table's ``schema=``
  translated by the execution's ``schema_translate_map``; the schema name is the tenant name;
* ``tenant="context"``: the execution option ``sealstore_tenant`` (of the call, the statement
  or the connection) or else the innermost ``with sealstore.tenant(name):`` block; the schema
  is bound as well;
* ``tenant_column="tenant_id"``: as ``"context"``, and every INSERT or UPDATE of the table is
  checked before it runs: the row's tenant column must be the active tenant (TenantMismatch),
  and an INSERT must give it (TenantRequired).

An engine ``before_execute`` hook (registered first, so the blind-index hooks see it) records
the execution's tenant option and schema map in a context variable.  The bind and result
processors read it for every value: it stays in force on this thread or task until the next
statement starts, so rows are read under the tenant they were selected with, as long as they
are fetched before the next statement (fetching an older result afterwards fails closed: its
values refuse to open under another tenant's key).

Values sealed before the column became tenant-aware (under the column's own keyring, context
without tenant) still open while ``tenant_legacy=True`` (the default): a value whose key id is
not the tenant's but the column keyring's is opened as a legacy value.  ``sealstore status``
counts them and ``sealstore rotate`` re-seals them to the tenant binding.

With ``bind_row=True`` as well, the context is ``column_context(table, column, row,
tenant=..., schema=...)`` (the ``sealstore/v1/tenant-row`` domain): a value copied to another
tenant (even a row with an equal primary key) or to another row of the same tenant does not
open.  The ORM flush and ``seal_for_row()`` hand the bind step a :class:`~.rows.PreSealed`
holding the plaintext and the row; the bind step seals it under the statement's tenant, so
every tenancy style (schema, ``schema_translate_map``, execution option, block, tenant column)
binds exactly as for column-bound values.  Reads give a :class:`~.rows.SealedRowValue` that
keeps the (tenant, schema) of its statement; the ORM load hook opens it with the identity.
Legacy values are the row-bound values written before tenancy: column keyring, untenanted row
context.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from sqlalchemy import Insert, Update, event
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import BindParameter

from ... import tenants as T
from ...errors import ColumnBindingError, SealstoreError, TenantMismatch, TenantRequired
from ...format import column_context, key_id_of
from ...keyring import named_opener, named_sealer
from ...keyring.named import _NAMED
from .read_errors import read_error
from .rows import PreSealed, SealedRowValue

__all__ = ["open_for_tenant", "resolve", "seal_for_tenant"]

#: (sealstore_tenant option, schema_translate_map) of the statement executing on this thread
_EXEC: contextvars.ContextVar[tuple[str | None, Any] | None] = contextvars.ContextVar(
    "sealstore_execution_tenant", default=None
)


def _option(name: str, conn: Any, elem: Any, options: Any) -> Any:
    if options and name in options:
        return options[name]
    own = getattr(elem, "_execution_options", None)
    if own and name in own:
        return own[name]
    return conn._execution_options.get(name)


def _before_execute(conn: Any, elem: Any, multiparams: Any, params: Any, options: Any) -> Any:
    tenant = _option("sealstore_tenant", conn, elem, options)
    smap = _option("schema_translate_map", conn, elem, options)
    if tenant is not None:
        T.check_name(tenant)
    _EXEC.set(None if tenant is None and not smap else (tenant, smap))
    if isinstance(elem, (Insert, Update)):
        _check_tenant_rows(elem, multiparams, params, tenant)
    return elem, multiparams, params


# first of the before_execute hooks: the blind-index ones (writes.py, lookups.py) read it
event.listen(Engine, "before_execute", _before_execute, retval=True, insert=True)


#: what decides the tenant of a value: (sealstore_tenant option, schema_translate_map, the
#: active sealstore.tenant() block's tenant)
State = tuple[Any, Any, Any]


def snapshot(options: Any = None) -> State:
    """The state now: ``options`` (an execution's merged options) when given, else what the
    statement executing on this thread set, and the active block's tenant."""
    if options is not None:
        option, smap = options.get("sealstore_tenant"), options.get("schema_translate_map")
    else:
        ex = _EXEC.get()
        option, smap = ex if ex is not None else (None, None)
    return option, smap, T._SCOPED.get()


def resolve(
    type_: Any, *, statement: bool = True, state: State | None = None
) -> tuple[str, str | None]:
    """(tenant, schema) of a tenant-aware column for the value being processed now (or in
    ``state``; ``statement=False``: outside any statement, the block's tenant only)."""
    if state is None:
        state = snapshot() if statement else (None, None, T._SCOPED.get())
    option, smap, scoped = state
    schema = type_.schema
    if smap and schema in smap:
        schema = smap[schema]
    if type_.tenant_mode == "schema":
        if schema is None:
            raise TenantRequired(
                f"{type_.table}.{type_.column} is bound to its schema's tenant, and its table "
                "has no schema here: give the Table a schema= or a schema_translate_map"
            )
        if option is not None and option != schema or scoped is not None and scoped != schema:
            raise TenantMismatch(
                f"{type_.table}.{type_.column} is in schema {schema!r}, but the active tenant "
                f"is {option or scoped!r}; nothing was written or read"
            )
        return T.check_name(schema), schema
    return T.pick_tenant(option, scoped), schema


def _contexts(type_: Any, tenant: str, schema: str | None, row: Any = None) -> bytes:
    return column_context(type_.table, type_.column, row, tenant=tenant, schema=schema)


def _row_of(type_: Any, row: Any) -> Any:
    """The row identity a value of ``type_`` is bound to (None unless row-bound)."""
    if not type_.bind_row:
        return None
    if row is None:
        raise ColumnBindingError(
            f"{type_.table}.{type_.column} is row-bound: give the row's primary key"
        )
    return row


def tenant_bind_processor(type_: Any, out: type[bytes | bytearray]) -> Callable[[Any], Any]:
    """The bind processor of a tenant-aware column; ``out`` is the dialect's sealed-value type."""
    type_.context()  # ColumnBindingError now for an unbound type
    if type_.bind_row:
        return _row_bind_processor(type_, out)
    encode = type_.codec.encode
    check = type_.check_fits
    limit = None if type_.storage_length is None else type_.overhead
    sealers: dict[tuple[str, str | None], Callable[[Any], Any]] = {}

    def make(tenant: str, schema: str | None) -> Callable[[Any], Any]:
        ctx = _contexts(type_, tenant, schema)

        def fallback(value: Any) -> Any:
            if value is None:
                return None
            ring = T.tenant_keyring(tenant)  # UnknownTenant, TenantShredded
            sealed = check(ring.seal(encode(value), ctx))
            return out(sealed) if type(sealed) is not out else sealed

        sealer = named_sealer(
            T.keyring_name(tenant), ctx, fallback, raw=type_._raw, max_length=type_.length,
            encode=encode, out=out, max_overhead=limit,
        )  # fmt: skip
        sealers[(tenant, schema)] = sealer
        return sealer

    return _dispatching(type_, sealers, make)


def tenant_result_processor(type_: Any) -> Callable[[Any], Any]:
    type_.context()
    if type_.bind_row:
        return _row_result_processor(type_)
    openers: dict[tuple[str, str | None], Callable[[Any], Any]] = {}
    text = type_._raw is str
    decode = None if type_._raw is bytes else type_.codec.decode

    def make(tenant: str, schema: str | None) -> Callable[[Any], Any]:
        ctx = _contexts(type_, tenant, schema)

        def fallback(value: Any) -> Any:
            if value is None:
                return None
            return _opened(type_, bytes(value), tenant, ctx)

        if text:
            opener = named_opener(T.keyring_name(tenant), ctx, fallback, text=True)
        else:
            opener = named_opener(T.keyring_name(tenant), ctx, fallback, decode=decode)
        openers[(tenant, schema)] = opener
        return opener

    return _dispatching(type_, openers, make)


def _row_bind_processor(type_: Any, out: type[bytes | bytearray]) -> Callable[[Any], Any]:
    """The bind processor of a tenant-aware row-bound column: it seals each
    :class:`~.rows.PreSealed` for its row under the statement's tenant."""
    names = (type_.table, type_.column)
    where = f"{type_.table}.{type_.column}"
    encode = type_.codec.encode
    check = type_.check_fits

    def process(value: Any) -> Any:
        if value is None:
            return None
        if type(value) is not PreSealed:
            raise ColumnBindingError(
                f"{where} is row-bound: plain values are sealed by ORM flushes, which know the "
                "primary key; for Core or bulk writes use seal_for_row(column, value, "
                "primary_key)"
            )
        if (value.table, value.column) != names:
            raise ColumnBindingError(
                f"a value sealed for {value.table}.{value.column} was written to {where}"
            )
        tenant, schema = resolve(type_)
        ring = T.tenant_keyring(tenant)  # UnknownTenant, TenantShredded
        ctx = _contexts(type_, tenant, schema, value.row)
        sealed = check(ring.seal(encode(value.plaintext), ctx))
        return out(sealed) if type(sealed) is not out else sealed

    return process


def _row_result_processor(type_: Any) -> Callable[[Any], Any]:
    """Reads of a tenant-aware row-bound column: a :class:`~.rows.SealedRowValue` that keeps
    the (tenant, schema) of the statement it was read by."""

    def bound(where: tuple[str, str | None]) -> Callable[[Any], Any]:
        def process(value: Any) -> Any:
            return None if value is None else SealedRowValue(bytes(value), type_, where)

        return process

    def process(value: Any) -> Any:
        return None if value is None else SealedRowValue(bytes(value), type_, resolve(type_))

    process.sealstore_for = lambda state: bound(resolve(type_, state=state))  # type: ignore[attr-defined]
    return process


def _dispatching(
    type_: Any,
    made: dict[tuple[str, str | None], Callable[[Any], Any]],
    make: Callable[[str, str | None], Callable[[Any], Any]],
) -> Callable[[Any], Any]:
    """The per-value processor: the tenant's own sealer (opener) found in a dict, built on
    first use.  The usual cases cost two context-variable reads and one dict look-up: no
    execution option or schema map, and the tenant of a ``sealstore.tenant()`` block (or the
    table's own schema); anything else goes through :func:`resolve`."""
    exec_get = _EXEC.get
    scoped_get = T._SCOPED.get
    schema = type_.schema
    by_tenant: dict[str, Callable[[Any], Any]] = {}

    def concrete(state: State | None = None) -> Callable[[Any], Any]:
        where = resolve(type_, state=state)
        fn = made.get(where)
        if fn is None:
            fn = make(*where)
        return fn

    def slow(value: Any) -> Any:
        return concrete()(value)

    if type_.tenant_mode == "schema":
        if schema is None:

            def unqualified(value: Any) -> Any:
                return None if value is None else slow(value)

            unqualified.sealstore_for = concrete  # type: ignore[attr-defined]
            return unqualified

        def by_schema(value: Any) -> Any:
            if value is None:
                return None
            if exec_get() is None:
                scoped = scoped_get()
                if scoped is None or scoped == schema:
                    fn = by_tenant.get(schema)
                    if fn is not None:
                        return fn(value)
                    fn = by_tenant[schema] = make(T.check_name(schema), schema)
                    return fn(value)
            return slow(value)

        by_schema.sealstore_for = concrete  # type: ignore[attr-defined]
        return by_schema

    def by_context(value: Any) -> Any:
        if value is None:
            return None
        if exec_get() is None:
            tenant = scoped_get()
            if tenant is not None:
                fn = by_tenant.get(tenant)
                if fn is None:
                    fn = by_tenant[tenant] = make(tenant, schema)
                return fn(value)
        return slow(value)

    by_context.sealstore_for = concrete  # type: ignore[attr-defined]
    return by_context


def for_execution(columns: Any, state: State) -> Any:
    """``columns`` ((index, processor) pairs of a result) with each tenant-aware processor
    replaced by the concrete opener of the execution's tenant (``state``, taken when the
    statement ran): resolved once per result, not once per value."""
    if not any(hasattr(p, "sealstore_for") for _, p in columns):
        return columns
    return tuple(
        (i, p.sealstore_for(state) if hasattr(p, "sealstore_for") else p) for i, p in columns
    )


def _opened(type_: Any, sealed: bytes, tenant: str, ctx: bytes, row: Any = None) -> Any:
    """Open one value of ``tenant`` (or a legacy, untenanted value), errors naming the column
    (and the row, for a row-bound column: ``row`` is its identity)."""
    ring = T.tenant_keyring(tenant)  # UnknownTenant, TenantShredded: they name the tenant only
    try:
        key_id = key_id_of(sealed)
        if key_id not in ring and type_.tenant_legacy:
            legacy = _NAMED.get(type_.keyring_name)
            if legacy is not None and key_id in legacy:
                return type_.codec.decoded(legacy.open(sealed, type_.context(row)))
        return type_.codec.decoded(ring.open(sealed, ctx))
    except SealstoreError as exc:
        failure = exc
    raise read_error(failure, type_.table, type_.column, row)


def seal_for_tenant(type_: Any, value: Any, row: Any = None) -> bytes:
    """``type_.seal(value[, row])`` for a tenant-aware column, outside a statement: the tenant
    of the active ``sealstore.tenant()`` block (or the table's schema)."""
    row = _row_of(type_, row)
    tenant, schema = resolve(type_, statement=False)
    ring = T.tenant_keyring(tenant)
    sealed = ring.seal(type_.codec.encode(value), _contexts(type_, tenant, schema, row))
    return bytes(type_.check_fits(sealed))


def open_for_tenant(
    type_: Any, sealed: bytes, row: Any = None, where: tuple[str, str | None] | None = None
) -> Any:
    """``type_.open(sealed[, row])`` for a tenant-aware column: under ``where`` (tenant,
    schema), the tenant a row-bound value was read under, else outside a statement."""
    row = _row_of(type_, row)
    tenant, schema = resolve(type_, statement=False) if where is None else where
    return _opened(type_, sealed, tenant, _contexts(type_, tenant, schema, row), row)


# ---- tenant columns: checked on writes --------------------------------------------------------


def _tenant_columns(table: Any) -> list[Any]:
    names = {
        c.type.tenant_column
        for c in getattr(table, "c", ())
        if getattr(c.type, "sealstore_encrypted", False) and c.type.tenant_column is not None
    }
    out = []
    for name in sorted(names):
        col = table.c.get(name)
        if col is None:
            col = next((c for c in table.c if c.name == name), None)
        if col is None:
            raise TenantRequired(f"{table.name} has no tenant column {name!r}")
        out.append(col)
    return out


def _given(row: Any, col: Any) -> tuple[bool, Any]:
    for key in (col.key, col.name, col):
        try:
            if key in row:
                value = row[key]
                if isinstance(value, BindParameter):
                    value = value.value
                return True, value
        except TypeError:
            continue
    return False, None


def _check_tenant_rows(elem: Any, multiparams: Any, params: Any, option: str | None) -> None:
    table = getattr(elem, "table", None)
    if table is None:
        return
    cols = _tenant_columns(table)
    if not cols:
        return
    tenant = T.resolve_tenant(option)
    rows: list[Any] = []
    if elem._values:
        rows.append(dict(elem._values))
    for group in getattr(elem, "_multi_values", ()) or ():
        for row in group:
            if isinstance(row, dict):
                rows.append(row)
            else:
                rows.append({c: v for c, v in zip(table.c, row)})
    sets = multiparams or ([params] if params else [])
    base = rows[0] if rows else {}
    if sets:
        rows = [{**base, **s} for s in sets]
    elif not rows:
        rows = [{}]
    insert = isinstance(elem, Insert)
    for row in rows:
        for col in cols:
            found, value = _given(row, col)
            if not found:
                if insert and col.default is None:
                    raise TenantRequired(
                        f"{table.name}.{col.name} is the tenant column of encrypted columns: "
                        f"an INSERT must give it (the active tenant is {tenant!r})"
                    )
                continue
            if value != tenant:
                raise TenantMismatch(
                    f"{table.name}.{col.name} is set to another tenant than the active one "
                    f"({tenant!r}): values are sealed for the active tenant; nothing was written"
                )
