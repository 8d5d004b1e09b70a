"""Encrypted column types: ``EncryptedString``, ``EncryptedText``, ``EncryptedBinary``,
``EncryptedJSON`` and ``Encrypted(inner_type)``.

Each is a ``TypeDecorator`` over ``LargeBinary`` (BYTEA on PostgreSQL, BLOB on SQLite,
VARBINARY/BLOB on MySQL) that seals on the way in and opens on the way out, through the keyring
registered under the type's ``keyring`` name (``sealstore.keyring.use_keyring``; None means
``"default"``), looked up on every value so a keyring can be swapped or rotated at run time.

Every value is bound to its table and column: when a column with one of these types is attached
to a ``Table``, the column gets its own copy of the type carrying the table and column names,
and the value's context is ``sealstore.format.column_context(table, column)``.  Pass ``table=``
and ``column=`` to pin the names (for example after renaming a column without re-sealing).
With ``bind_row=True`` the context also includes the row's primary key (see ``rows.py``), and
with ``tenant=``/``tenant_column=`` the tenant and schema (``tenancy.py``); the two combine.

The storage width is the declared length's worst-case encoding plus an overhead allowance,
``overhead=`` (default ``MAX_OVERHEAD``, 55 bytes: every AEGIS-128 suite with either tag, AEGIS-256
with 16-byte tags, AES-256-GCM), so a declared length keeps its meaning whichever of those suites
the keyring uses now or after a rotation.  AEGIS-256 with 32-byte tags needs 71 bytes
(``sealstore.format.overhead("AEGIS-256X4", 32)``): a bounded column sized for less refuses such
values with ``ValueTooLong`` before anything is sent, instead of letting the database truncate
or reject them; declare ``overhead=71`` on it (and widen the column).
"""

from __future__ import annotations

from collections.abc import Callable

import inspect as _inspect
from typing import Any

from sqlalchemy import VARBINARY, LargeBinary
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine, to_instance

from ...errors import ColumnBindingError, SealstoreError, ValueTooLong
from ...format import column_context, parse_header
from ...keyring import get_keyring, named_opener, named_sealer
from ...suites import COLUMN_OVERHEAD
from ...codecs import Codec, binary_codec, json_codec, string_codec
from .codecs import codec_for
from .comparison import EncryptedComparator
from .read_errors import read_error
from .refused import check_selected

__all__ = [
    "DEFAULT_KEYRING",
    "MAX_OVERHEAD",
    "EncryptedType",
    "EncryptedString",
    "EncryptedText",
    "EncryptedBinary",
    "EncryptedJSON",
    "Encrypted",
]

DEFAULT_KEYRING = "default"
#: The overhead a column's width allows for (55 bytes): the registry pins it, so a new suite
#: with a larger overhead fails a test instead of silently widening every MySQL column.
MAX_OVERHEAD = COLUMN_OVERHEAD
#: MySQL/MariaDB: VARBINARY up to this many bytes, BLOB types above (row size limits),
#: LONGBLOB when unbounded.
MYSQL_VARBINARY_LIMIT = 8192

_PUBLIC_MODULE = "sealstore.adapters.sqlalchemy"


class EncryptedType(TypeDecorator[Any]):
    """Base class of the encrypted column types (not used directly).

    Subclasses define ``_make_codec()``.  Constructor arguments are stored under their own names
    (they form SQLAlchemy's cache key); none of them is secret: ``keyring`` is a *name*.
    """

    impl: Any = LargeBinary
    cache_ok: bool | None = True
    comparator_factory = EncryptedComparator
    #: what a blind index checks its source column's type by (blind_index.py sits below this
    #: module, so it cannot import the class)
    sealstore_encrypted = True

    #: the encrypted types' python_type is the one of the values they hold (set by subclasses)
    _python_type: type = object
    #: what the codec passes through unchanged, sealed as it is by the native path: exact
    #: ``bytes``, exact ASCII ``str`` (opened back into a str in C), or None
    _raw: type | None = None

    def __init__(
        self,
        length: int | None = None,
        *,
        keyring: str | None = None,
        table: str | None = None,
        column: str | None = None,
        bind_row: bool = False,
        overhead: int = MAX_OVERHEAD,
        tenant: str | None = None,
        tenant_column: str | None = None,
        tenant_legacy: bool = True,
    ) -> None:
        if not isinstance(overhead, int) or isinstance(overhead, bool) or overhead < 0:
            raise ValueError(f"overhead must be a non-negative int, not {overhead!r}")
        if length is not None and (
            not isinstance(length, int) or isinstance(length, bool) or length < 0
        ):
            raise ValueError(f"length must be a non-negative int or None, not {length!r}")
        if keyring is not None and (not isinstance(keyring, str) or not keyring):
            raise TypeError("keyring must be a keyring name (a non-empty str) or None")
        for label, value in (("table", table), ("column", column)):
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{label} must be a non-empty str or None")
        self.length = length
        self.keyring = keyring
        self.table = table
        self.column = column
        self.bind_row: bool = bool(bind_row)
        self.overhead = overhead
        if tenant not in (None, "schema", "context"):
            raise ValueError(f"tenant must be None, 'schema' or 'context', not {tenant!r}")
        if tenant_column is not None and (not isinstance(tenant_column, str) or not tenant_column):
            raise TypeError("tenant_column must be a column name (a non-empty str) or None")
        if tenant == "schema" and tenant_column is not None:
            raise ValueError("tenant='schema' and tenant_column= are two tenancies: pick one")
        self.tenant = tenant
        self.tenant_column = tenant_column
        self.tenant_legacy: bool = bool(tenant_legacy)
        #: the schema of the table this column belongs to (set when bound)
        self.schema: str | None = None
        self._pinned = (table, column)
        self._codec_memo: Codec | None = None
        self._context_memo: bytes | None = None
        super().__init__(self.storage_length)

    # ---- construction, copies and binding ------------------------------------------------------

    def _init_kwargs(self) -> dict[str, Any]:
        params = _inspect.signature(type(self).__init__).parameters
        return {name: getattr(self, name) for name in list(params)[1:]}

    def _rebuild(self, table: str | None, column: str | None) -> "EncryptedType":
        kwargs = self._init_kwargs()
        kwargs["table"], kwargs["column"] = table, column
        new = type(self)(**kwargs)
        new._pinned = self._pinned
        new.schema = self.schema
        return new

    def copy(self, **kw: Any) -> "EncryptedType":
        return self._rebuild(self.table, self.column)

    def bound_to(self, table: str, column: str, schema: str | None = None) -> "EncryptedType":
        """A copy bound to ``table.column`` (of ``schema``); names pinned in the constructor win."""
        pinned_table, pinned_column = self._pinned
        new = self._rebuild(pinned_table or table, pinned_column or column)
        new.schema = schema
        return new

    @property
    def tenant_mode(self) -> str | None:
        """How this column finds its tenant: ``"schema"``, ``"context"`` (a ``tenant_column``
        column too: the active tenant, checked against the row's on writes), or None."""
        if self.tenant_column is not None:
            return "context"
        return self.tenant

    @property
    def bound(self) -> bool:
        """True once the type knows its table and column names."""
        return self.table is not None and self.column is not None

    @property
    def keyring_name(self) -> str:
        """The registered keyring name this column seals with."""
        return self.keyring or DEFAULT_KEYRING

    @property
    def storage_length(self) -> int | None:
        """Bytes the stored value can take: worst-case plaintext bytes + ``overhead``."""
        size = self.codec.max_size
        return None if size is None else size + self.overhead

    def check_fits(self, sealed: bytes | bytearray) -> bytes | bytearray:
        """``sealed`` itself, or ValueTooLong when this column is bounded and the value's
        overhead (its suite and tag size) passes the column's ``overhead`` allowance."""
        if self.storage_length is not None:
            header = parse_header(sealed)
            if header.overhead > self.overhead:
                where = f"{self.table}.{self.column}" if self.bound else type(self).__name__
                raise ValueTooLong(
                    f"{where} is sized for {self.overhead} bytes of sealed-value overhead, but "
                    f"its keyring seals with {header.suite} and {header.tag_size}-byte tags "
                    f"({header.overhead} bytes): declare overhead={header.overhead} on the "
                    "column and widen it, or use 16-byte tags"
                )
        return sealed

    @property
    def codec(self) -> Codec:
        codec = self._codec_memo
        if codec is None:
            codec = self._codec_memo = self._make_codec()
        return codec

    def _codec_name(self) -> str:
        """The name codec errors give: the type, and ``table.column`` once bound."""
        name = type(self).__name__
        return f"{self.table}.{self.column} ({name})" if self.bound else name

    def _make_codec(self) -> Codec:
        raise TypeError(
            "EncryptedType is abstract: use EncryptedString, EncryptedText, EncryptedBinary, "
            "EncryptedJSON or Encrypted(type)"
        )

    @property
    def python_type(self) -> type:
        return self._python_type

    def context(self, row: Any = None) -> bytes:
        """The sealed-value context of this column (and of one row, for row binding)."""
        table, column = self.table, self.column
        if not self.bound or table is None or column is None:
            raise ColumnBindingError(
                f"{type(self).__name__} is not bound to a table column: use it on a Column of a "
                "Table (or mapped class), or pass table= and column="
            )
        if row is not None:
            return column_context(table, column, row)
        ctx = self._context_memo
        if ctx is None:
            ctx = self._context_memo = column_context(table, column)
        return ctx

    def __repr__(self) -> str:
        # Secret-free and evaluable (Alembic renders it): the constructor arguments that differ
        # from their defaults, with table/column only when pinned by the user.
        pinned = {"table": self._pinned[0], "column": self._pinned[1]}
        parts = []
        for p in list(_inspect.signature(type(self).__init__).parameters.values())[1:]:
            value = pinned[p.name] if p.name in pinned else getattr(self, p.name)
            if p.default is not p.empty and value == p.default:
                continue
            text = _repr_arg(value)
            parts.append(text if p.kind is p.POSITIONAL_OR_KEYWORD else f"{p.name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_codec_memo"] = state["_context_memo"] = None  # closures; rebuilt on use
        return state

    # ---- dialect storage --------------------------------------------------------------------

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        size = self.storage_length
        if dialect.name in ("mysql", "mariadb"):
            if size is None:  # plain BLOB stops at 64 KiB
                from sqlalchemy.dialects.mysql import LONGBLOB

                return dialect.type_descriptor(LONGBLOB())
            if size <= MYSQL_VARBINARY_LIMIT:
                return dialect.type_descriptor(VARBINARY(size))
        return dialect.type_descriptor(LargeBinary(size))

    # ---- value processing -------------------------------------------------------------------

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any]:
        if self.tenant_mode is not None:
            from .tenancy import tenant_bind_processor

            return tenant_bind_processor(self, _bind_type(dialect))
        if self.bind_row:
            from .rows import row_bind_processor

            return row_bind_processor(self)
        encode = self.codec.encode
        ctx = self.context()
        name = self.keyring_name

        def process(value: Any, _get: Callable[[str], Any] = get_keyring) -> Any:
            if value is None:
                return None
            return check(_get(name).seal(encode(value), ctx))

        check = self.check_fits
        limit = None if self.storage_length is None else self.overhead
        return named_sealer(
            name, ctx, process, raw=self._raw, max_length=self.length, encode=encode,
            out=_bind_type(dialect), max_overhead=limit,
        )  # fmt: skip

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any]:
        if self.tenant_mode is not None:
            from .tenancy import tenant_result_processor

            return tenant_result_processor(self)
        if self.bind_row:
            from .rows import row_result_processor

            return row_result_processor(self)
        decode = self.codec.decode
        ctx = self.context()
        name = self.keyring_name
        opened = self._opened

        def process(
            value: Any,
        ) -> Any:  # what the native opener leaves to Python, failures included
            if value is None:
                return None
            if type(value) is not bytes:
                value = bytes(value)
            return opened(value, ctx)

        if self._raw is str:  # UTF-8 decoded in C
            return named_opener(name, ctx, process, text=True)
        return named_opener(name, ctx, process, decode=None if self._raw is bytes else decode)  # type: ignore[arg-type]  # (bytes in, as text=False)

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return self.bind_processor(dialect)(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return self.result_processor(dialect, None)(value)

    def column_expression(self, column: Any) -> Any:
        """The selected expression, refused when it computes over ciphertexts (max, coalesce...)."""
        return check_selected(column, f"{self.table}.{self.column}" if self.bound else "column")

    def seal(self, value: Any, row: Any = None) -> bytes | None:
        """Seal one Python value as this column stores it (``row`` for row-bound columns)."""
        if value is None:
            return None
        if self.tenant_mode is not None:
            from .tenancy import seal_for_tenant

            return seal_for_tenant(self, value, row)
        sealed = get_keyring(self.keyring_name).seal(self.codec.encode(value), self.context(row))
        return bytes(self.check_fits(sealed))

    def open(
        self, sealed: bytes | None, row: Any = None, *, where: tuple[str, str | None] | None = None
    ) -> Any:
        """Open one stored value of this column (``row`` for row-bound columns; ``where``, the
        (tenant, schema) a tenant-aware value was read under, else the active block's)."""
        if sealed is None:
            return None
        if self.tenant_mode is not None:
            from .tenancy import open_for_tenant

            return open_for_tenant(self, bytes(sealed), row, where)
        return self._opened(bytes(sealed), self.context(row), row)

    def _opened(self, sealed: bytes, ctx: bytes, row: Any = None) -> Any:
        """Open and decode one stored value; a failure raises the keyring's or the codec's
        error class naming this column (and ``row``), without the stored bytes or plaintext
        and without ``__cause__``/``__context__`` (``read_errors.py``)."""
        try:
            return self.codec.decoded(get_keyring(self.keyring_name).open(sealed, ctx))
        except SealstoreError as exc:
            failure = exc
        raise read_error(failure, self.table, self.column, row)


def _bind_type(dialect: Dialect) -> type[bytes | bytearray]:
    """What sealed bind values are: bytearray for SQLite, whose driver binds a bytes parameter
    only after an adapter lookup (about 0.3 us a value) but a bytearray directly."""
    return bytearray if dialect.name == "sqlite" else bytes


def _repr_arg(value: Any) -> str:
    if hasattr(value, "_static_cache_key") and hasattr(value, "compile"):  # an inner SQL type
        module = type(value).__module__
        prefix = "sa." if module.startswith("sqlalchemy.") else f"{module}."
        return prefix + repr(value)
    return repr(value)


class EncryptedString(EncryptedType):
    """A ``str`` column; ``length`` counts characters (UTF-8, so storage is 4*length + 55)."""

    cache_ok: bool | None = True  # SQLAlchemy reads it from each class's own __dict__

    _python_type = str
    _raw = str  # non-ASCII text goes through the codec (UTF-8), then is sealed natively

    def _make_codec(self) -> Codec:
        return string_codec(self.length, self._codec_name())


class EncryptedText(EncryptedString):
    """An unbounded ``str`` column (``length`` optional, as for ``Text``)."""

    cache_ok: bool | None = True  # SQLAlchemy reads it from each class's own __dict__


class EncryptedBinary(EncryptedType):
    """A ``bytes`` column; ``length`` counts bytes (storage is length + 55)."""

    cache_ok: bool | None = True  # SQLAlchemy reads it from each class's own __dict__

    _python_type = bytes
    _raw = bytes

    def _make_codec(self) -> Codec:
        return binary_codec(self.length, self._codec_name())


class EncryptedJSON(EncryptedType):
    """A JSON document (dict, list, str, number, bool); Python ``None`` is SQL NULL.

    Like ``sqlalchemy.JSON``, in-place changes of a loaded dict are not detected by the ORM;
    assign a new value (or use ``sqlalchemy.ext.mutable``).
    """

    cache_ok: bool | None = True  # SQLAlchemy reads it from each class's own __dict__

    _python_type = dict

    def __init__(
        self,
        *,
        keyring: str | None = None,
        table: str | None = None,
        column: str | None = None,
        bind_row: bool = False,
        overhead: int = MAX_OVERHEAD,
        tenant: str | None = None,
        tenant_column: str | None = None,
        tenant_legacy: bool = True,
    ) -> None:
        super().__init__(
            None, keyring=keyring, table=table, column=column, bind_row=bind_row,
            overhead=overhead, tenant=tenant, tenant_column=tenant_column,
            tenant_legacy=tenant_legacy,
        )  # fmt: skip

    def _make_codec(self) -> Codec:
        return json_codec(self._codec_name())


class Encrypted(EncryptedType):
    """Any other generic type, sealed in its canonical encoding: ``Encrypted(Integer)``,
    ``Encrypted(Date)``, ``Encrypted(Numeric(10, 2))``, ``Encrypted(Uuid)`` ...

    The encodings are listed in :mod:`sealstore.codecs` (which codec a type gets, in :mod:`sealstore.adapters.sqlalchemy.codecs`); the declared
    type's range, precision and length are enforced before sealing.
    """

    cache_ok: bool | None = True  # SQLAlchemy reads it from each class's own __dict__

    def __init__(
        self,
        type_: Any,
        *,
        keyring: str | None = None,
        table: str | None = None,
        column: str | None = None,
        bind_row: bool = False,
        overhead: int = MAX_OVERHEAD,
        tenant: str | None = None,
        tenant_column: str | None = None,
        tenant_legacy: bool = True,
    ) -> None:
        inner = to_instance(type_)
        if isinstance(inner, EncryptedType):
            raise TypeError("Encrypted() wraps a plain SQL type, not an encrypted one")
        codec_for(inner)  # TypeError now, at model definition, for unsupported types
        self.type_ = inner
        super().__init__(
            None, keyring=keyring, table=table, column=column, bind_row=bind_row,
            overhead=overhead, tenant=tenant, tenant_column=tenant_column,
            tenant_legacy=tenant_legacy,
        )  # fmt: skip

    def _make_codec(self) -> Codec:
        where = f"{self.table}.{self.column}" if self.bound else None
        return codec_for(self.type_, type(self).__name__, where)

    @property
    def python_type(self) -> type:
        try:
            python_type: type = self.type_.python_type
            return python_type
        except NotImplementedError:
            return object


for _cls in (
    EncryptedType,
    EncryptedString,
    EncryptedText,
    EncryptedBinary,
    EncryptedJSON,
    Encrypted,
):
    _cls.__module__ = _PUBLIC_MODULE
del _cls
