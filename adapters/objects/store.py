"""The raw object store the engine seals into: the :class:`ObjectStore` protocol.

A store moves stored (sealed) bytes and nothing else: it never seals, opens or looks inside a
body.  Everything storage-neutral (sizes, ranges, location binding, part planning, spooling,
rotation, references for key retirement) is the engine's (``engine.py`` and its helpers), so a
store binding is the client calls and their errors, translated:

* a missing object or bucket raises :class:`~sealstore.errors.ObjectNotFound`;
* a failed condition (``if_match`` not the current version, ``if_none_match`` on an existing
  object) raises :class:`~sealstore.errors.ObjectChanged`, and nothing is written;
* anything else is the client's own error.

``options`` (on ``head``, ``get``, ``put`` and the multipart calls): the store's own extras of
one request, passed on as they are (S3: ``SSECustomerKey``..., ``RequestPayer``,
``ExpectedBucketOwner`` as boto3 parameters).  A store that takes none raises
:class:`~sealstore.errors.UnsupportedOperation` for any non-empty ``options``, before any
request: an extra is never silently dropped.

``etag`` is the store's version token for conditions (S3's ETag, a GCS generation as text):
opaque to the engine, which only passes it back.  Metadata maps names to text; the engine's
fields are the ``sealstore-*`` names of ``metadata.py``, compared case-insensitively.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable

from sealstore.errors import UnsupportedOperation

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ObjectStore", "PartLimits", "StoredObject", "Written", "refuse_options"]


def refuse_options(options: Mapping[str, Any] | None, store: str) -> None:
    """UnsupportedOperation when ``options`` is not empty: for a store that takes no
    per-request extras (the names only, never the values: an extra may be a key)."""
    if options:
        raise UnsupportedOperation(
            f"the {store} store takes no per-request options ({', '.join(sorted(options))})"
        )


class Written(str):
    """What a write answered: its version token (this string, what every caller passes back
    as ``if_match``), with ``version`` (the new version's id; None without versioning) and
    ``answer``, the store's own answer fields a binding may repeat to its caller (S3:
    ``ServerSideEncryption``, ``SSEKMSKeyId``, ``BucketKeyEnabled``, ``SSECustomerAlgorithm``,
    ``SSECustomerKeyMD5``, ``Expiration``).  A store's ``put``, ``complete_multipart`` and
    ``copy`` may return one instead of a plain token; the engine's writes always do."""

    version: str | None
    answer: Mapping[str, Any]

    def __new__(
        cls, etag: str, *, version: str | None = None, answer: Mapping[str, Any] | None = None
    ) -> Self:
        self = super().__new__(cls, etag)
        self.version = version
        self.answer = dict(answer or {})
        return self

    @classmethod
    def of(cls, token: str) -> Written:
        """``token`` as a Written (itself when it is one)."""
        return token if isinstance(token, Written) else cls(str(token))

    @property
    def etag(self) -> str:
        """The version token, as a plain string."""
        return str(self)


@dataclass(frozen=True)
class StoredObject:
    """One stored object (a version of it, for ``versions()``), as a HEAD or a listing sees it."""

    bucket: str
    key: str
    size: int  #: stored (sealed) bytes
    etag: str  #: the version token to pass back as ``if_match``
    metadata: Mapping[str, str] = field(default_factory=dict)
    version: str | None = None  #: a version id (None: the current version, or no versioning)
    #: the store's own description (S3: the HeadObject response), for its ``settings``
    raw: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PartLimits:
    """What a store takes in one request and in a multipart upload (stored bytes)."""

    min_part: int  #: smallest part but the last
    max_part: int  #: largest part
    max_parts: int  #: most parts in one upload
    max_single: int  #: largest ``put`` body and ``copy`` source


@runtime_checkable
class ObjectStore(Protocol):
    """A raw object store (stored bytes in, stored bytes out).  See the module docstring for the
    errors every method raises."""

    #: the URL scheme of its locations (``s3``, ``gs``, ``memory``)
    scheme: str
    limits: PartLimits

    def location(self, bucket: str, key: str) -> bytes:
        """The bytes an object at ``bucket/key`` is bound to: a domain tag naming the store
        kind, then the bucket and the key, length-prefixed (``location.py``).  TypeError or
        ValueError for names the store cannot hold."""
        ...

    def head(
        self,
        bucket: str,
        key: str,
        *,
        version: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> StoredObject:
        """The object's size, version token and metadata."""
        ...

    def get(
        self,
        bucket: str,
        key: str,
        first: int = 0,
        last: int | None = None,
        *,
        if_match: str | None = None,
        version: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> BinaryIO:
        """A readable stream of stored bytes ``first..last`` (inclusive; ``last`` None or past
        the end: to the end).  Empty when ``first`` is at or past the end.  The caller closes
        it."""
        ...

    def put(
        self,
        bucket: str,
        key: str,
        body: Any,
        *,
        length: int,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Store ``length`` bytes read from ``body`` (bytes-like or a readable binary stream);
        returns the new version token.  At most ``limits.max_single`` bytes."""
        ...

    def create_multipart(
        self,
        bucket: str,
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a multipart upload; returns its id."""
        ...

    def upload_part(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        body: bytes,
        *,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Store part ``number`` (1-based); returns its token for ``complete_multipart``.  The
        engine uploads parts in increasing order, one at a time (unless the store says
        ``parts_in_any_order``), every part but the last at least ``limits.min_part`` bytes:
        a store may rely on that (e.g. to stream them into one resumable upload)."""
        ...

    def complete_multipart(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        *,
        if_match: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Make the parts ``(number, token)`` the object; returns its version token."""
        ...

    def abort_multipart(
        self, bucket: str, key: str, upload_id: str, *, options: Mapping[str, Any] | None = None
    ) -> None:
        """Drop an unfinished upload and its parts (no error if it is gone already)."""
        ...

    def copy(
        self,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
    ) -> str:
        """Copy the stored bytes as they are (server-side), with ``metadata`` (None: the
        source's); ``if_match`` is a condition on the source.  A bound sealed object copied so
        does not open at its new place (WrongLocation): the engine's ``copy`` re-seals."""
        ...

    def list(
        self, bucket: str, prefix: str = "", *, start_after: str | None = None
    ) -> Iterator[StoredObject]:
        """Current objects under ``prefix`` in key order (after ``start_after``), metadata
        not filled in (a listing does not carry it: ``head`` does)."""
        ...

    def versions(self, bucket: str, prefix: str = "") -> Iterator[StoredObject]:
        """Every stored version under ``prefix`` (noncurrent ones and those behind delete
        markers included), each with its ``version`` (metadata not filled in: ``head`` with
        ``version`` gives it); a store without versioning yields what ``list`` does."""
        ...

    def delete(self, bucket: str, key: str) -> None:
        """Delete the object (no error if it is absent)."""
        ...


# Optional, for stores whose objects carry settings a rewrite must repeat (S3: content headers,
# tags, storage class, server-side encryption, object lock, ACL): a method
#
#     def settings(self, obj: StoredObject) -> Mapping[str, Any]
#
# whose answer the engine passes back as ``settings=`` to ``put``, ``create_multipart`` and
# ``copy`` of a rewrite (rotation).  Stores without it are never passed ``settings``.
#
# Optional too: ``parts_in_any_order: bool`` (absent: False), True when ``upload_part`` takes
# parts in any order and several at once (S3, the in-memory store; not GCS's resumable session):
# the engine's large copies then send a few parts at a time (``ObjectSealing.copy``).
#
# Optional too: ``client_errors: tuple[type[BaseException], ...]``, the client's errors of one
# object's request (S3: botocore's ClientError) that a rotation records as that object's
# failure and goes on (any other error stops the run).
