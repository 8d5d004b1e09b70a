"""Every exception sealstore raises.

One base class, :class:`SealstoreError`, then one class per condition, so callers can catch
exactly what they mean.  Argument errors also inherit from the matching built-in
(``ValueError``, ``TypeError``, ``LookupError``, ``PermissionError``) so generic handlers keep
working.  No exception message ever contains key material or plaintext.

What the entry points that read stored input raise, whatever the bytes (fuzzed in CI:
``tests/fuzz/``, ``tools/fuzz.sh``; and ``tests/core/test_hardening_stores.py``):

* ``load_config`` (a JSON or TOML file): :class:`ConfigError`, or :class:`InsecureConfig`
  (a ConfigError) for a file others could have written that says where keys come from;
* ``KeyFile.load``/``refresh``/``rotate``/``save``/``rewrap`` (the key file):
  :class:`ConfigError` (malformed, nested too deeply, too large), :class:`InsecureKeyFile`
  (link, not a regular file, owner, mode, directories), :class:`KeySourceError` (missing,
  unreadable, wrapping mismatch; :class:`KeyMetadataTampered`), :class:`InvalidKeyring`
  (the keys break an invariant, e.g. no primary);
* ``MasterKeyWrapper.from_file``: :class:`ConfigError`, :class:`InsecureKeyFile`,
  :class:`KeySourceError`;
* ``DatabaseKeySource`` (the ``sealstore_keys`` rows, its URL): :class:`KeySourceError`
  (any row value of the wrong type or range, a URL that cannot be used, a database that
  cannot be reached or refuses a statement; :class:`KeyMetadataTampered`),
  :class:`InvalidKeyring`;
* ``sealstore.adapters.s3.rotate`` (its checkpoint file): :class:`InsecureKeyFile`,
  :class:`ConfigError`, :class:`KeySourceError`;
* sealed values (``Keyring.open``): :class:`MalformedCiphertext`, :class:`UnknownKeyId`,
  :class:`KeyNotUsable`, :class:`ShortTagRefused`, :class:`InvalidTag`;
* object headers and streams (``parse_object_header``, ``open_stream``):
  :class:`NotSealedObject`, :class:`MalformedObject`, :class:`KeyCommitmentMismatch`,
  :class:`TruncatedObject`, :class:`InvalidTag`, and the sealed values' errors.
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidTag as _CryptoInvalidTag

__all__ = [
    "BlindIndexError",
    "ColumnBindingError",
    "ColumnNotConverted",
    "ColumnTypeMismatch",
    "ConcurrentKeyChange",
    "ConfigError",
    "DatabaseOperationFailed",
    "DuplicateIndexValue",
    "IndexIncomplete",
    "InsecureConfig",
    "InsecureKeyFile",
    "InternalError",
    "InvalidKeyring",
    "InvalidTag",
    "KernelUnavailable",
    "KeyCommitmentMismatch",
    "KeyMetadataTampered",
    "KeyNotUsable",
    "KeySourceError",
    "MalformedCiphertext",
    "MalformedObject",
    "MediumScrubFailed",
    "MigrationRequired",
    "MissingExtra",
    "NonceReuseRefused",
    "NotSealedObject",
    "ObjectChanged",
    "ObjectNotFound",
    "OverlappingBuffers",
    "RangeNotSatisfiable",
    "ReservedDerivation",
    "RetryBudgetExhausted",
    "SealstoreError",
    "SharedIndexKey",
    "ShortTagRefused",
    "SourceChanged",
    "TenantError",
    "TenantMismatch",
    "TenantRequired",
    "TenantShredded",
    "TruncatedObject",
    "UndecodableValue",
    "UnencodableValue",
    "UnknownKeyId",
    "UnknownKeyring",
    "UnknownTenant",
    "UnsealedExpression",
    "UnsealedPath",
    "UnsupportedClient",
    "UnsupportedComparison",
    "UnsupportedOperation",
    "ValueTooLong",
    "WrongLocation",
    "WrongTenant",
    "WrongValueType",
]


class SealstoreError(Exception):
    """Base class of every sealstore exception (never raised directly).

    An error about a stored value names where it was read, when known: ``table`` and
    ``column`` (an encrypted column), ``primary_key`` (the row, a tuple) and
    ``sealstore_reason`` (the message without the location).
    """

    table: str | None = None
    column: str | None = None
    primary_key: tuple[Any, ...] | None = None
    sealstore_reason: str | None = None


class InvalidTag(SealstoreError, _CryptoInvalidTag):
    """Authentication failed: wrong key, wrong associated data, or modified/truncated input.

    Raised bare, without a message, so a forged and a truncated ciphertext look the same.
    A call over many values or segments sets ``index`` to the position that failed.
    Also a ``cryptography.exceptions.InvalidTag``, so code written for cryptography's AEAD
    classes catches it.
    """

    index: int | None = None


class KernelUnavailable(SealstoreError, RuntimeError):
    """A native kernel was requested (``SEALSTORE_KERNEL`` or ``kernel=``) that this CPU
    or this build cannot run."""


class OverlappingBuffers(SealstoreError, ValueError):
    """An ``*_into`` call's output overlaps one of its inputs other than exactly in place."""


class InternalError(SealstoreError, RuntimeError):
    """The native layer reported a state that should be impossible; please report it."""


class MalformedCiphertext(SealstoreError, ValueError):
    """A sealed value is too short or has a bad version, suite or flags (checked before decrypting)."""


class UnknownKeyId(SealstoreError, LookupError):
    """A sealed value names a key id that is not in the keyring (``.key_id`` holds it)."""

    def __init__(self, key_id: int) -> None:
        super().__init__(f"unknown key id {key_id:08x}")
        self.key_id = key_id


class KeyNotUsable(SealstoreError):
    """The key exists but its state forbids the operation (retired, destroyed, or keyring closed)."""


class ShortTagRefused(SealstoreError, ValueError):
    """A value or object has a shorter tag than the keyring's tag size and short tags were not
    accepted (``accept_short_tags``); refused before anything is decrypted."""


class InvalidKeyring(SealstoreError, ValueError):
    """A keyring operation would break an invariant (one primary, unique ids, legal state change)."""


class ReservedDerivation(SealstoreError, ValueError):
    """A :meth:`~sealstore.keyring.Keyring.keyed_hash` ``info`` lies in sealstore's reserved
    derivation domain (it starts with ``sealstore/`` but not with the blind-index prefix
    ``sealstore/v1/blind-index``): it could name an internal subkey, so it is refused."""


class UnknownKeyring(SealstoreError, LookupError):
    """No keyring is registered under the requested name (see ``sealstore.use_keyring``)."""


class TenantError(SealstoreError, ValueError):
    """Base of the tenancy errors (``sealstore.tenants``): a bad tenant name, or a tenant that
    cannot be used.  The message names the tenant, never a key or a value."""


class TenantRequired(TenantError):
    """A tenant-aware column was written or read with no tenant available (no schema, no
    ``sealstore.tenant(...)`` block, no ``sealstore_tenant`` execution option): nothing is
    sealed without its tenant."""


class TenantMismatch(TenantError):
    """Two sources of the tenant disagree (a ``sealstore.tenant()`` block and an execution
    option, or a row's tenant column and the active tenant); nothing is written."""


class UnknownTenant(TenantError, LookupError):
    """The tenant store holds no keys for this tenant (``sealstore tenants create NAME``)."""


class TenantShredded(TenantError, KeyNotUsable):
    """The tenant's keys were destroyed (crypto-shredding): none of its values opens again and
    nothing is sealed for it."""


class ConfigError(SealstoreError, ValueError):
    """Configuration or a key file is malformed; the message names the field and the problem."""


class InsecureKeyFile(SealstoreError, PermissionError):
    """A key file (or a master key file, a rotation checkpoint, a lock file beside one) was
    refused: a symbolic link, not a regular file, owned by another user, readable or writable
    by group or others, or in a directory others can write into (the directory itself, or one
    above it without the sticky bit)."""


class InsecureConfig(ConfigError, PermissionError):
    """A configuration file others could have written (writable by group or others, owned by
    another user, or below a directory that lets others replace it) sets where keys come from
    (``key_source``: path, URL, wrapping, KMS ``endpoint_url``) or what opening accepts
    (``allow_retired``, ``accept_short_tags``, ``tag_size``); nothing was loaded."""


class KeySourceError(SealstoreError):
    """A key source cannot load or store the keyring (missing, already present, or KMS failed)."""


class ConcurrentKeyChange(KeySourceError, InvalidKeyring):
    """Another writer changed the same key (or promoted another primary) since this keyring was
    loaded; nothing was written: reload and apply the change again."""


class KeyMetadataTampered(KeySourceError):
    """A wrapped key store's metadata (ids, states, suites, dates, blobs) fails its
    authentication tag: it was edited outside sealstore."""


class UnsupportedComparison(SealstoreError, TypeError):
    """A SQL comparison on an encrypted column cannot work on randomized ciphertext."""


class UnsealedExpression(SealstoreError, TypeError):
    """A SQL expression (a function, another column, ``text()``, literal SQL, a subquery, a
    parameter of another type) was assigned to an encrypted column: only values sealstore seals
    may be written there; nothing was sent to the database."""


class ColumnBindingError(SealstoreError, ValueError):
    """An encrypted column cannot build its context (no table/column, or row binding without the row)."""


class ColumnTypeMismatch(ColumnBindingError):
    """A column's stored type or contents is not what its model declares: a text column that
    holds sealed bytes, a plain model column whose values are sealed, values sealed under keys
    the keyring does not hold where a conversion expects plaintext.  Raised before anything is
    read or written; the message names ``table.column``, the stored and the expected type and
    the fix (``.column``, ``.stored``, ``.expected`` hold the first three).  The CLI prints it
    as one line and exits 3."""

    column: str
    stored: str
    expected: str

    def __init__(
        self, message: str, *, column: str = "", stored: str = "", expected: str = ""
    ) -> None:
        super().__init__(message)
        self.column, self.stored, self.expected = column, stored, expected

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_mismatch, (type(self), str(self), self.column, self.stored, self.expected))


class ColumnNotConverted(ColumnTypeMismatch):
    """A column the model declares encrypted still has a plaintext type in the database (the
    conversion has not run): run ``op.encrypt_column`` in a revision or ``sealstore
    encrypt-column``, or declare the column's plaintext type in the model."""


def _rebuild_mismatch(cls: Any, message: str, column: str, stored: str, expected: str) -> Any:
    return cls(message, column=column, stored=stored, expected=expected)


class ValueTooLong(SealstoreError, ValueError):
    """A value is longer than the encrypted column's declared length."""


class UnencodableValue(SealstoreError, ValueError):
    """A value its encrypted column's type cannot hold (not one of an enum's members, a NaN
    with a payload, text with a lone surrogate, a string that is not a UUID); raised before
    anything is written, and the message holds nothing of the value."""


class WrongValueType(SealstoreError, TypeError):
    """A value of a Python type its encrypted column does not take (a str for an Integer
    column, an object JSON cannot serialize); raised before anything is written."""


class UndecodableValue(SealstoreError, ValueError):
    """A value opened (its tag verified) but its plaintext does not decode as its column's type,
    e.g. bytes that are not UTF-8 in a text column; neither the message nor the exception
    chain carries the plaintext; ``failed`` is the decoder's exception class name."""

    failed: str | None = None


class BlindIndexError(SealstoreError, ValueError):
    """A blind index cannot be computed (missing source, shared key with the encryption keyring)."""


class IndexIncomplete(BlindIndexError):
    """A lookup through a blind index that still has rows whose source is set and whose index
    value is NULL (an index added to existing rows, not filled yet): it would miss those rows.
    The message names the fix (``sealstore reindex`` or ``op.add_blind_index``); a caller that
    accepts partial results passes the execution option ``sealstore_partial_index=True``."""


class DuplicateIndexValue(BlindIndexError):
    """A write to a UNIQUE blind index whose value another row already holds under an older,
    still active index key (during an index-key rotation), which the database's unique
    constraint cannot see.  Raised before the statement runs; the database raises its own
    IntegrityError for a duplicate under the same key."""


class SharedIndexKey(BlindIndexError):
    """A blind index's keyring shares a key id or key material with an encryption keyring it
    can see (its source column's, or the ``"default"`` keyring): refused before any index value
    is computed, so none is written.  Material is compared by one-way fingerprints; the message
    names the keyrings and key ids only."""


class NotSealedObject(SealstoreError, ValueError):
    """The object or stream does not start with a sealstore object header (not written by sealstore)."""


class MalformedObject(MalformedCiphertext):
    """An object header, its metadata or its length is invalid or inconsistent (checked before decrypting)."""


class KeyCommitmentMismatch(InvalidTag):
    """The object header's key commitment does not match the named key (another key, context or an edited header)."""


class WrongLocation(InvalidTag):
    """An object bound to its location was opened somewhere else (moved or copied by another tool)."""


class WrongTenant(InvalidTag):
    """An object of one tenant was opened as another tenant's (moved or copied under another
    tenant's prefix, or read in another tenant's ``sealstore.tenant()`` block): its key is none
    of that tenant's keys."""


class TruncatedObject(InvalidTag):
    """A sealed stream ended before its final segment; ``.index`` is the segment that was missing."""


class SourceChanged(SealstoreError, RuntimeError):
    """The data being sealed changed when it was read again (e.g. on a retry); nothing changed was sent."""


class NonceReuseRefused(SourceChanged):
    """Segments already sealed under this object key were to be sealed again from other bytes (a multipart part sent twice with different data); nothing from the new bytes was sent."""


class UnsupportedOperation(SealstoreError, ValueError):
    """A request cannot be sealed or opened as asked; the message says why and what to do instead."""


class UnsealedPath(UnsupportedOperation):
    """The call would move an object's body around the sealing handlers (presigned URLs, CRT transfers); refused before anything was sent."""


class ObjectNotFound(SealstoreError, LookupError):
    """An object store has no object (or bucket) of that name; nothing was read or written."""


class ObjectChanged(SealstoreError, RuntimeError):
    """A conditional object-store request failed: the object was changed, replaced or created meanwhile (its version is not the one read); nothing was written over it."""


class RangeNotSatisfiable(SealstoreError, ValueError):
    """A plaintext byte range lies outside the object; ``.size`` is the object's plaintext size."""

    size: int | None = None


class UnsupportedClient(SealstoreError, TypeError):
    """The client cannot be encrypted (e.g. an asynchronous aiobotocore client); nothing was changed."""


class MigrationRequired(SealstoreError, RuntimeError):
    """sealstore's tables are missing from the database: run ``alembic upgrade sealstore@head``."""


class DatabaseOperationFailed(SealstoreError, RuntimeError):
    """A statement sealstore ran failed; the message names the step and the driver's error (its
    class, SQLSTATE or code), never the statement's parameters."""


class RetryBudgetExhausted(DatabaseOperationFailed):
    """A transient database error (deadlock, serialization failure, lost connection, lock
    timeout) kept recurring until the retry budget ran out; ``.attempts`` and ``.elapsed`` say how long."""

    attempts: int | None = None
    elapsed: float | None = None


class MediumScrubFailed(SealstoreError, RuntimeError):
    """The table rewrite that removes a conversion's old row versions from the database's files
    (``op.encrypt_column``'s default, :func:`sealstore.migrations.medium.scrub`) cannot run or
    did not complete: raised before any row is written when the operation could not rewrite
    the table afterwards (no autocommit), else after the conversion committed; the message
    says which and the statement that finishes the job (``VACUUM (FULL)``, ``ALTER TABLE ...
    FORCE``, ``VACUUM``)."""


class MissingExtra(SealstoreError, ImportError):
    """A part of sealstore was imported or used whose optional dependencies are not installed;
    the message names the extra that brings them (``pip install 'sealstore[s3]'``).  ``.extra``
    is that extra's name, ``.name`` the first missing module."""

    def __init__(self, what: str, extra: str, missing: list[str]) -> None:
        super().__init__(
            f"{what} needs the {extra!r} extra (missing: {', '.join(missing)}): "
            f"pip install 'sealstore[{extra}]'",
            name=missing[0],
        )
        self.what = what
        self.extra = extra
        self.missing: tuple[str, ...] = tuple(missing)

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (to another process) with its own arguments
        return (type(self), (self.what, self.extra, list(self.missing)))
