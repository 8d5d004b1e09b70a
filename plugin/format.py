"""The sealed-value format, version 1 (specified byte by byte in ``docs/FORMAT.md``).

A sealed value is ``header || nonce || ciphertext || tag``::

    offset  size  field
    0       1     version   0x01
    1       1     suite     0x01 AEGIS-128L, 0x02 AEGIS-128X2, 0x03 AEGIS-128X4, 0x10 AES-256-GCM
    2       4     key_id    unsigned, big-endian (fixed offset: SQL can count rows per key)
    6       1     flags     bit0: 256-bit tag (AEGIS only); bits 1-7 reserved, must be 0
    7       N     nonce     16 bytes (AEGIS) or 12 bytes (AES-256-GCM), random
    7+N     n     ciphertext
    7+N+n   T     tag       16 or 32 bytes (AEGIS), 16 bytes (AES-256-GCM)

The associated data given to the AEAD is ``header || SHA-256(context)``: the header and the
caller's context are authenticated, neither is stored twice.  Sizes and suites come from the
suite registry (:mod:`sealstore.suites`); nothing here creates a cipher, so adapters can size
columns and read key ids without a key.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from typing import Any, NamedTuple

from .errors import MalformedCiphertext
from .suites import HEADER_SIZE, Suite, spec

__all__ = [
    "DIGEST_SIZE",
    "FLAG_TAG256",
    "HEADER_SIZE",
    "KEY_ID_OFFSET",
    "KEY_ID_SIZE",
    "VERSION",
    "Header",
    "Suite",
    "column_context",
    "context_digest",
    "key_id_of",
    "nonce_size",
    "overhead",
    "pack_header",
    "parse_header",
    "sealed_size",
    "tag_sizes",
]

VERSION = 0x01
KEY_ID_OFFSET = 2
KEY_ID_SIZE = 4
FLAG_TAG256 = 0x01
DIGEST_SIZE = 32  # SHA-256 of the context, appended to the header to form the AD

_KNOWN_FLAGS = FLAG_TAG256
_HEADER = struct.Struct(">BBIB")


class Header(NamedTuple):
    """The parsed 7-byte header of a sealed value."""

    version: int
    suite: Suite
    key_id: int
    flags: int

    @property
    def tag_size(self) -> int:
        return 32 if self.flags & FLAG_TAG256 else 16

    @property
    def nonce_size(self) -> int:
        return self.suite.spec.nonce_size

    @property
    def overhead(self) -> int:
        return HEADER_SIZE + self.suite.spec.nonce_size + self.tag_size


def nonce_size(suite: Suite | str | int) -> int:
    """Nonce bytes stored in a value of ``suite`` (16 for AEGIS-128, 32 for AEGIS-256, 12 for
    AES-256-GCM)."""
    return spec(suite).nonce_size


def tag_sizes(suite: Suite | str | int) -> tuple[int, ...]:
    """Tag sizes ``suite`` supports: (16, 32) for AEGIS, (16,) for AES-256-GCM."""
    return spec(suite).tag_sizes


def overhead(suite: Suite | str | int, tag_size: int = 32) -> int:
    """Bytes a sealed value adds to its plaintext: 7 + nonce + tag.

    AEGIS-128 suites: 55 with a 32-byte tag, 39 with a 16-byte tag.  AEGIS-256 suites: 71 and
    55.  AES-256-GCM: 35.
    """
    return spec(suite).overhead(tag_size)


def sealed_size(plaintext_size: int, suite: Suite | str | int, tag_size: int = 32) -> int:
    """Exact size of a sealed value for a plaintext of ``plaintext_size`` bytes."""
    if plaintext_size < 0:
        raise ValueError("plaintext_size must be >= 0")
    return plaintext_size + overhead(suite, tag_size)


def pack_header(suite: Suite | str | int, key_id: int, tag_size: int) -> bytes:
    """The 7 header bytes for a value sealed under ``key_id`` with ``suite`` and ``tag_size``."""
    suite = Suite.parse(suite)
    suite.spec.check_tag_size(tag_size)
    if not 0 <= key_id <= 0xFFFFFFFF:
        raise ValueError("key_id must fit in 32 bits (0..0xffffffff)")
    return _HEADER.pack(VERSION, suite, key_id, FLAG_TAG256 if tag_size == 32 else 0)


def _tag_flag_problem(tag_size: int) -> str:
    """How a header whose tag size its suite does not allow is wrong (values and objects)."""
    if tag_size == 32:
        return "cannot carry a 256-bit tag flag"
    return f"must carry the 256-bit tag flag (a {tag_size}-byte tag is not allowed)"


def parse_header(sealed: bytes | bytearray | memoryview) -> Header:
    """Parse and validate the header of ``sealed`` (any bytes-like object).

    Raises :class:`MalformedCiphertext` if the value is shorter than the suite's overhead, or the
    version, suite or flags are not ones this version of the format defines.  Nothing is
    decrypted; the header is only trusted once the value opens.
    """
    try:
        view = memoryview(sealed)
    except TypeError:
        raise TypeError(
            f"sealed value must be a bytes-like object, not {type(sealed).__name__}"
        ) from None
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if len(view) < HEADER_SIZE:
        raise MalformedCiphertext(
            f"sealed value too short: {len(view)} bytes, the header alone is {HEADER_SIZE}"
        )
    version, suite_id, key_id, flags = _HEADER.unpack_from(view)
    if version != VERSION:
        raise MalformedCiphertext(f"unsupported format version 0x{version:02x} (expected 0x01)")
    try:
        suite = Suite(suite_id)
    except ValueError:
        raise MalformedCiphertext(f"unknown suite id 0x{suite_id:02x}") from None
    if flags & ~_KNOWN_FLAGS:
        raise MalformedCiphertext(f"reserved flag bits set (flags 0x{flags:02x})")
    header = Header(version, suite, key_id, flags)
    if header.tag_size not in suite.spec.tag_sizes:
        raise MalformedCiphertext(f"{suite} values {_tag_flag_problem(header.tag_size)}")
    if len(view) < header.overhead:
        raise MalformedCiphertext(
            f"sealed value too short: {len(view)} bytes, {suite} with a {header.tag_size}-byte tag "
            f"needs at least {header.overhead}"
        )
    return header


def key_id_of(sealed: bytes | bytearray | memoryview) -> int:
    """The key id of a sealed value (validated header), as stored at offset 2."""
    return parse_header(sealed).key_id


# ---- contexts ------------------------------------------------------------------------------

_COLUMN_DOMAIN = b"sealstore/v1/column"
_ROW_DOMAIN = b"sealstore/v1/row"
_TENANT_COLUMN_DOMAIN = b"sealstore/v1/tenant-column"
_TENANT_ROW_DOMAIN = b"sealstore/v1/tenant-row"


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _identity(value: Any) -> bytes:
    """Canonical, type-tagged encoding of one row-identity component."""
    if isinstance(value, bool):
        raise TypeError("row identity components cannot be bool")
    if isinstance(value, int):
        return b"i" + _lp(str(value).encode("ascii"))
    if isinstance(value, str):
        return b"s" + _lp(value.encode("utf-8"))
    if isinstance(value, uuid.UUID):
        return b"u" + _lp(value.bytes)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"b" + _lp(bytes(value))
    raise TypeError(
        "row identity must be int, str, bytes, uuid.UUID or a tuple of those, "
        f"not {type(value).__name__}"
    )


def column_context(
    table: str,
    column: str,
    row: Any = None,
    *,
    tenant: str | None = None,
    schema: str | None = None,
) -> bytes:
    """Canonical context binding a value to ``table.column``, optionally to one row, and
    optionally to a tenant and the schema the table lives in.

    Encoding: a domain tag (``sealstore/v1/column`` or ``sealstore/v1/row``, length-prefixed),
    then the length-prefixed UTF-8 table and column names, then for rows a type-tagged,
    length-prefixed identity (a tuple for composite keys).  Types matter: ``5`` and ``"5"``
    are different rows.  Lengths are 4-byte big-endian, so no two inputs share an encoding.

    With ``tenant=`` the domain is ``sealstore/v1/tenant-column`` (``sealstore/v1/tenant-row``)
    and the tenant, then the schema, come first: the length-prefixed UTF-8 tenant name, then a
    presence byte (``0x00`` no schema, ``0x01`` a schema) followed, when present, by the
    length-prefixed schema name.  ``schema=`` without ``tenant=`` is refused: an untenanted
    context keeps the version-1 encoding exactly (values written before tenancy keep opening).
    """
    if not isinstance(table, str) or not isinstance(column, str):
        raise TypeError("table and column must be str")
    if not table or not column:
        raise ValueError("table and column must be non-empty")
    head: list[bytes] = []
    if tenant is not None:
        if not isinstance(tenant, str) or not tenant:
            raise TypeError("tenant must be a non-empty str or None")
        if schema is not None and (not isinstance(schema, str) or not schema):
            raise TypeError("schema must be a non-empty str or None")
        head.append(_lp(tenant.encode("utf-8")))
        head.append(b"\x00" if schema is None else b"\x01" + _lp(schema.encode("utf-8")))
    elif schema is not None:
        raise ValueError("schema= binds only together with tenant=")
    parts = head + [_lp(table.encode("utf-8")), _lp(column.encode("utf-8"))]
    if row is None:
        domain = _COLUMN_DOMAIN if tenant is None else _TENANT_COLUMN_DOMAIN
        return _lp(domain) + b"".join(parts)
    items = row if isinstance(row, tuple) else (row,)
    if not items:
        raise ValueError("row identity must not be an empty tuple")
    parts.append(len(items).to_bytes(4, "big"))
    parts.extend(_identity(item) for item in items)
    domain = _ROW_DOMAIN if tenant is None else _TENANT_ROW_DOMAIN
    return _lp(domain) + b"".join(parts)


_DIGESTS: dict[Any, bytes] = {}  # keyed by the context objects (hashable ones)
_DIGEST_CACHE_LIMIT = 4096


def context_digest(context: bytes | bytearray | memoryview = b"") -> bytes:
    """SHA-256 of ``context`` (any bytes-like object), cached for the most used contexts.

    The cache holds digests only (contexts are table/column names, not secrets); it is cleared
    when it reaches 4096 entries, so per-row contexts cannot grow it without bound.
    """
    try:
        return _DIGESTS[context]
    except (KeyError, TypeError):  # a new context, or an unhashable buffer (bytearray, numpy)
        pass
    given: object = context  # (untyped callers)
    if isinstance(given, str):
        raise TypeError("context must be bytes, not str (encode it first)")
    try:
        digest = hashlib.sha256(context).digest()
    except TypeError:
        raise TypeError(
            f"context must be a bytes-like object, not {type(context).__name__}"
        ) from None
    if type(context) is bytes:
        if len(_DIGESTS) >= _DIGEST_CACHE_LIMIT:
            _DIGESTS.clear()
        _DIGESTS[context] = digest
    return digest
