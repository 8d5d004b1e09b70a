"""The storage-neutral object engine: seal a stream into an object of any
:class:`~sealstore.adapters.objects.store.ObjectStore`, open it whole or by plaintext range in
bounded memory, re-seal it for a copy.

::

    sealing = ObjectSealing(keyring)
    sealing.seal(store, "b", "k", data)                       # one put, or a multipart upload
    sealing.open(store, "b", "k").read()                      # verified plaintext
    sealing.open(store, "b", "k", first=10, last=99).read()   # exactly those plaintext bytes
    sealing.copy(store, "b", "k", "b", "k2")                  # re-sealed for its new place

Objects are the format of :mod:`sealstore.stream`, with the metadata fields of ``metadata.py``;
an object is bound to ``store.location(bucket, key)`` (``bind_location``), so its stored bytes
copied elsewhere by the raw store fail to open there (WrongLocation).  Memory: one batch of
segments per stream when reading, one part when writing a multipart upload (a store's ``put``
gets a stream it may read as it sends).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sealstore.errors import (
    MalformedObject,
    NotSealedObject,
    ObjectChanged,
    RangeNotSatisfiable,
    SourceChanged,
    TruncatedObject,
    UnsupportedOperation,
)
from sealstore.stream import (
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAX_SEGMENT_SIZE,
    MIN_SEGMENT_SIZE,
    ObjectCipher,
    ObjectHeader,
    OpeningReader,
    RangePlan,
    SealingReader,
    parse_object_header,
    plan_range,
    source_length,
)

from . import metadata as M
from .parts import needs_multipart, part_ends_object, part_size, sealed_part_size
from .ranges import ByteRange
from .sizes import header_of, plaintext_of
from .store import ObjectStore, StoredObject, Written

from .tenancy import ObjectTenancy

if TYPE_CHECKING:
    from .tenancy import TenantRule
    from sealstore.segment_log import SegmentLog
    from sealstore.keyring import Keyring

__all__ = [
    "COPY_PART",
    "COPY_WORKERS",
    "RESEAL_PART",
    "SINGLE_COPY",
    "SPOOL_MEMORY",
    "Limited",
    "ObjectSealing",
    "ObjectSettings",
    "OpenedObject",
    "body_header",
    "copy_in_parts",
    "copy_takes_parts",
    "must_reseal",
    "opened_span",
    "opened_whole",
    "plan_span",
    "read_exactly",
    "sealed_body",
    "sealed_part",
    "spooled",
]

log: logging.Logger = logging.getLogger(__name__)

#: sealed bytes a spooled request body holds in memory before it moves to a temporary file
SPOOL_MEMORY = 8 << 20
#: plaintext bytes per part of a multipart upload the engine writes (one part held in memory)
RESEAL_PART = 64 << 20
#: plaintext bytes up to which a re-sealing copy is one request (the source streamed into it)
SINGLE_COPY = 16 << 20
#: plaintext bytes per part of a larger re-sealing copy (each held by one worker)
COPY_PART = 16 << 20
#: parts of a re-sealing copy read, sealed and sent at a time (stores taking parts in any order)
COPY_WORKERS = 4


def spooled(reader: Any, memory: int = SPOOL_MEMORY) -> tuple[Any, int]:
    """``(file, size)``: the rest of ``reader`` (sealed bytes) in a temporary file, in memory up to
    ``memory`` bytes then on disk, rewound: a request body a store can read again (signing,
    retries) when the plaintext source can be read only once."""
    spool = tempfile.SpooledTemporaryFile(max_size=memory)
    buf = bytearray(2 << 20)
    view = memoryview(buf)
    try:
        while n := reader.readinto(view):
            spool.write(view[:n])
    except BaseException:
        spool.close()
        raise
    size = spool.tell()
    spool.seek(0)
    return spool, size


def read_exactly(raw: Any, n: int) -> bytes:
    """Up to ``n`` bytes from ``raw`` (fewer only at its end)."""
    parts: list[bytes] = []
    got = 0
    while got < n:
        chunk = raw.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def must_reseal(
    header: ObjectHeader | None, *, same_place: bool, bind_location: bool, tenanted: bool
) -> bool:
    """Whether a copy of the object ``header`` heads (None: not sealed) must be re-sealed
    rather than copied byte for byte by the store: a tenanted copy to another place (sealed
    anew for its tenant), a bound object copied elsewhere (it would not open there), or an
    unbound one copied by a writer that binds.  An object that is not sealed, a bound object
    copied onto itself, or an unbound one with binding off keeps its stored bytes."""
    if header is None:
        return False
    if tenanted and not same_place:
        return True
    return (header.bound and not same_place) or (not header.bound and bind_location)


def copy_takes_parts(length: int, store: ObjectStore) -> bool:
    """Whether :meth:`ObjectSealing.copy` of ``length`` plaintext bytes into ``store`` is a
    multipart upload (above :data:`SINGLE_COPY`, or maybe above one request of the store)."""
    return length > SINGLE_COPY or needs_multipart(length, store.limits)


def copy_in_parts(
    length: int,
    part: int,
    read: Callable[[int, int], bytes],
    send: Callable[[int, bytes], str],
    *,
    workers: int,
) -> Sequence[tuple[int, str]]:
    """The parts ``(number, token)`` of a re-sealing copy of ``length`` plaintext bytes cut
    into parts of ``part`` bytes (the last shorter): ``read(first, last)`` returns the
    verified plaintext bytes ``first..last`` (inclusive) of the source and ``send(number,
    data)`` seals and uploads them as part ``number`` (1-based), ``workers`` parts at a time
    (each held in memory by its worker).  The first error stops the copy and is raised (the
    caller aborts its upload); a short read raises UnsupportedOperation, so a source that
    shrank is never completed into a shorter object."""
    if part <= 0:
        raise ValueError("a part holds at least one byte")

    def one(number: int) -> tuple[int, str]:
        first = (number - 1) * part
        last = min(first + part, length) - 1
        data = read(first, last)
        if len(data) != last - first + 1:
            raise UnsupportedOperation(
                f"the copy source gave {len(data)} of bytes {first}-{last} of its {length}"
            )
        return number, send(number, data)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(one, range(1, -(-length // part) + 1)))


class OpenedObject(io.RawIOBase):
    """A readable binary stream of an object's plaintext (verified before it is released), or
    of its stored bytes as they are when it is not sealed and the engine passes it through
    (``sealed`` False: NOT authenticated).

    ``size``: the object's plaintext size; ``first``/``last``: the inclusive plaintext span
    this stream returns (None for an empty answer); ``length``: the bytes it returns;
    ``header``: the object header (None when not sealed); ``stored``: what the HEAD said."""

    def __init__(
        self,
        reader: Any,
        *,
        size: int,
        span: tuple[int, int] | None,
        sealed: bool,
        header: ObjectHeader | None,
        stored: StoredObject,
    ) -> None:
        super().__init__()
        self._reader = reader
        self.size: int = size
        self.first: int | None = span[0] if span else None
        self.last: int | None = span[1] if span else None
        self.length: int = span[1] - span[0] + 1 if span else 0
        self.sealed: bool = sealed
        self.header: ObjectHeader | None = header
        self.stored: StoredObject = stored

    def __repr__(self) -> str:
        return (
            f"<OpenedObject {self.stored.bucket}/{self.stored.key} bytes "
            f"{self.first}-{self.last}/{self.size} sealed={self.sealed}>"
        )

    @property
    def content_range(self) -> str | None:
        """``bytes FIRST-LAST/SIZE`` (None for an empty answer)."""
        if self.first is None:
            return None
        return f"bytes {self.first}-{self.last}/{self.size}"

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if hasattr(self._reader, "readinto"):
            return int(self._reader.readinto(b))
        view = memoryview(b).cast("B")
        chunk = self._reader.read(len(view))
        view[: len(chunk)] = chunk
        return len(chunk)

    def read(self, size: int | None = -1) -> bytes:
        data: bytes = self._reader.read(-1 if size is None else size)
        return data

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()


def _check_end(source: Any, length: int | None) -> None:
    """A file-like ``source`` sealed to its declared ``length`` must end there (reading on
    also makes an opened object verify its final segment)."""
    if length is None or isinstance(source, (bytes, bytearray, memoryview)):
        return
    read = getattr(source, "read", None)
    if read is not None and read(1):
        raise SourceChanged(f"the source holds more than its declared {length} bytes")


class Limited:
    """``raw`` (a stored body), reading at most ``count`` bytes of it after dropping its first
    ``skip`` bytes (a store's body may start before and run on past the range wanted)."""

    def __init__(self, raw: Any, count: int, skip: int = 0) -> None:
        self._raw = raw
        self._left = count
        self._skip = skip

    def read(self, amt: int | None = -1) -> bytes:
        while self._skip:
            dropped = self._raw.read(min(self._skip, 1 << 20))
            if not dropped:
                return b""
            self._skip -= len(dropped)
        if self._left <= 0:
            return b""
        amt = self._left if amt is None or amt < 0 else min(amt, self._left)
        chunk: bytes = self._raw.read(amt)
        self._left -= len(chunk)
        return chunk

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        chunk = self.read(len(view))
        view[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        self._raw.close()


# ---- the sealing and opening streams a client binding hands its client -----------------------


def sealed_body(
    cipher: ObjectCipher, source: Any, length: int | None, *, memory: int = SPOOL_MEMORY
) -> tuple[Any, int]:
    """``(body, stored size)``: ``source`` sealed whole by ``cipher`` (``length`` plaintext
    bytes, None: to its end) as a request body a store can read again (signing, retries):
    the sealing stream itself when it can seek (bytes, seekable files), else spooled
    (:func:`spooled`, ``memory`` bytes in memory)."""
    reader = SealingReader(cipher, source, length)
    if reader.seekable():
        return reader, len(reader)
    return spooled(reader, memory)


def sealed_part(
    cipher: ObjectCipher,
    source: Any,
    size: int,
    number: int,
    part_size: int,
    *,
    final: bool,
    log: SegmentLog | None = None,
) -> SealingReader:
    """Part ``number`` (1-based) of a multipart upload whose parts hold ``part_size``
    plaintext bytes: ``size`` bytes of ``source`` sealed as the segments at its offset (part 1
    carries the header; ``final``: it ends the object, ``parts.part_ends_object``).  ``log``
    records what was sealed under each segment nonce (a part sent again must be the same)."""
    return SealingReader(
        cipher, source, size, first_index=(number - 1) * part_size // cipher.segment_size,
        final=final, header=number == 1, log=log,
    )  # fmt: skip


def body_header(head: bytes, expected: bytes | None) -> ObjectHeader | None:
    """The header of a stored body whose first bytes are ``head``, checked against
    ``expected`` (the copy in its metadata; None: none there): None when the body is not
    sealed and its metadata does not say it is.  TruncatedObject or MalformedObject when the
    metadata's copy and the body disagree."""
    if expected is not None and head != expected:
        if len(head) < HEADER_SIZE and head[: len(MAGIC)] == MAGIC:
            raise TruncatedObject("the object ended inside its header")
        try:
            parse_object_header(head)
        except NotSealedObject:
            raise MalformedObject("the object's metadata says sealed but its body is not") from None
        raise MalformedObject("the object's metadata header differs from its body header")
    try:
        return parse_object_header(head)
    except NotSealedObject:
        if expected is not None:
            raise
        return None


def plan_span(header: ObjectHeader, first: int, last: int, size: int) -> RangePlan:
    """The stored bytes and segments that hold plaintext ``first..last`` (inclusive) of an
    object of ``size`` plaintext bytes that ``header`` heads."""
    return plan_range(first, last, size, header.segment_size, header.tag_size)


def opened_whole(cipher: ObjectCipher, body: Any) -> OpeningReader:
    """The verified plaintext of a whole stored ``body`` read past its header."""
    return OpeningReader(cipher, body)


def opened_span(
    cipher: ObjectCipher, body: Any, plan: RangePlan, *, skip: int = 0
) -> OpeningReader:
    """The verified plaintext ``plan`` covers, from a stored ``body`` starting ``skip`` bytes
    before ``plan.start`` (and maybe running on past ``plan.stop``)."""
    return OpeningReader(
        cipher, Limited(body, plan.stop - plan.start, skip), first_index=plan.first_segment,
        final=plan.final, segments=plan.segments, skip=plan.skip, length=plan.length,
    )  # fmt: skip


@dataclass(frozen=True)
class ObjectSettings:
    """The sealing settings of an encrypted client of any store (the keywords of every
    adapter's ``encrypt_client``), validated once: an adapter builds one (:meth:`of`) and its
    engine from it (:meth:`ObjectSealing.from_settings`).

    ``segment_size``: plaintext bytes per segment of new objects (a power of two, 1 KiB ..
    16 MiB).  ``passthrough``: return objects sealstore did not write as they are,
    UNAUTHENTICATED.  ``allow_retired``: open objects of retired keys.  ``context``: bytes
    bound into every object key.  ``bind_location``: bind new objects to their store, bucket
    and key.  ``tenancy``: an :class:`~sealstore.adapters.objects.tenancy.ObjectTenancy`
    (None: objects are not bound to tenants)."""

    segment_size: int = DEFAULT_SEGMENT_SIZE
    passthrough: bool = False
    allow_retired: bool = False
    context: bytes = b""
    bind_location: bool = True
    tenancy: ObjectTenancy | None = None

    def __post_init__(self) -> None:
        seg = self.segment_size
        if (
            not isinstance(seg, int)
            or isinstance(seg, bool)
            or not MIN_SEGMENT_SIZE <= seg <= MAX_SEGMENT_SIZE
            or seg & (seg - 1)
        ):
            raise ValueError(
                f"segment_size must be a power of two from {MIN_SEGMENT_SIZE} to "
                f"{MAX_SEGMENT_SIZE}, not {seg!r}"
            )
        for name in ("passthrough", "allow_retired", "bind_location"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    @classmethod
    def of(
        cls,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        passthrough: bool = False,
        allow_retired: bool = False,
        context: bytes = b"",
        bind_location: bool = True,
        tenant: str | bool | None = None,
        tenant_prefix: TenantRule | None = None,
        tenant_legacy: bool = True,
    ) -> ObjectSettings:
        """The settings of an ``encrypt_client`` call, by its keywords (``tenant``,
        ``tenant_prefix``, ``tenant_legacy``: its tenancy, ``ObjectTenancy.of``)."""
        return cls(
            segment_size=segment_size, passthrough=passthrough, allow_retired=allow_retired,
            context=context, bind_location=bind_location,
            tenancy=ObjectTenancy.of(tenant, tenant_prefix, tenant_legacy),
        )  # fmt: skip

    def replace(self, **changes: Any) -> ObjectSettings:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)


class ObjectSealing:
    """Sealing settings for objects of any store (see the module docstring).

    ``keyring``: objects are sealed under its primary key and open under any usable key.
    ``segment_size``: plaintext bytes per segment of new objects.  ``context``: bytes bound into
    every object key (readers need the same).  ``bind_location``: bind new objects to
    ``store.location(bucket, key)``.  ``allow_retired``: open objects of retired keys.
    ``passthrough``: return objects sealstore did not write as they are (``sealed`` False,
    unauthenticated) instead of raising NotSealedObject.  ``part_size``: plaintext bytes per
    part of a multipart upload (held in memory, rounded to the store's limits).  ``tenancy``:
    an :class:`~sealstore.adapters.objects.tenancy.ObjectTenancy`: each object is sealed under
    its tenant's keyring and bound to its tenant (``keyring`` then opens legacy objects only).
    """

    def __init__(
        self,
        keyring: Keyring,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        context: bytes = b"",
        bind_location: bool = True,
        allow_retired: bool = False,
        passthrough: bool = False,
        part_size: int | None = None,
        tenancy: ObjectTenancy | None = None,
    ) -> None:
        settings = ObjectSettings(
            segment_size=segment_size, passthrough=passthrough, allow_retired=allow_retired,
            context=context, bind_location=bind_location, tenancy=tenancy,
        )  # fmt: skip
        self._take(keyring, settings, part_size)

    @classmethod
    def from_settings(
        cls, keyring: Keyring, settings: ObjectSettings, *, part_size: int | None = None
    ) -> ObjectSealing:
        """The engine of an adapter's ``settings`` (validated when they were made)."""
        self = cls.__new__(cls)
        self._take(keyring, settings, part_size)
        return self

    def _take(self, keyring: Keyring, settings: ObjectSettings, part_size: int | None) -> None:
        ObjectCipher.create(keyring, segment_size=settings.segment_size)  # the keyring can seal
        self.keyring: Keyring = keyring
        self.settings: ObjectSettings = settings
        #: None: objects are not bound to tenants (tenancy.py)
        self.tenancy: ObjectTenancy | None = settings.tenancy
        self.segment_size: int = settings.segment_size
        self.context: bytes = settings.context
        self.bind_location: bool = settings.bind_location
        self.allow_retired: bool = settings.allow_retired
        self.passthrough: bool = settings.passthrough
        #: None: RESEAL_PART when a part is planned
        self.part_size: int | None = part_size

    def __repr__(self) -> str:
        return (
            f"<ObjectSealing keyring={self.keyring!r} segment_size={self.segment_size} "
            f"bind_location={self.bind_location} passthrough={self.passthrough}>"
        )

    # ---- ciphers ---------------------------------------------------------------------------

    def new_cipher(self, store: ObjectStore, bucket: str, key: str) -> ObjectCipher:
        """A new object key for ``bucket/key`` (bound to its location with ``bind_location``)."""
        keyring, context = self.keyring, self.context
        if self.tenancy is not None:  # before anything is sent: TenantRequired, TenantMismatch
            bound = self.tenancy.sealing(bucket, key, self.context)
            keyring, context = bound.keyring, bound.context
        location = store.location(bucket, key) if self.bind_location else None
        return ObjectCipher.create(
            keyring, segment_size=self.segment_size, context=context, location=location
        )

    def keyring_for(self, bucket: str, key: str) -> Keyring:
        """The keyring new objects at ``bucket/key`` are sealed under (the tenant's with a
        tenancy): rotation re-seals to its primary."""
        if self.tenancy is None:
            return self.keyring
        return self.tenancy.sealing(bucket, key, self.context).keyring

    def opener(
        self,
        store: ObjectStore,
        bucket: str,
        key: str,
        header: ObjectHeader,
        *,
        allow_retired: bool | None = None,
    ) -> ObjectCipher:
        """The cipher that opens the object ``header`` heads at ``bucket/key``: its key
        commitment (and, for a bound object, its location) is checked here, before any body
        byte is read (KeyCommitmentMismatch, WrongLocation, UnknownKeyId...)."""
        keyring, context = self.keyring, self.context
        if self.tenancy is not None:
            bound = self.tenancy.opening(bucket, key, header.key_id, self.keyring, self.context)
            keyring, context = bound.keyring, bound.context
        return ObjectCipher.from_header(
            keyring,
            header,
            context=context,
            location=store.location(bucket, key),
            allow_retired=self.allow_retired if allow_retired is None else allow_retired,
        )

    # ---- writing ---------------------------------------------------------------------------

    def seal(
        self,
        store: ObjectStore,
        bucket: str,
        key: str,
        source: Any,
        *,
        length: int | None = None,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        cipher: ObjectCipher | None = None,
        settings: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Written:
        """Seal ``source`` (bytes-like, a binary file object or an iterable of bytes; ``length``
        plaintext bytes when given, else found by itself or by reading to the end) into
        ``bucket/key``; returns what the store answered (``Written``: its version token).  One
        ``put`` when the sealed object fits one request, else a multipart upload, one part in
        memory at a time, completed only after the source's end was read (so its final segment
        is authenticated) and aborted on any error.  ``if_match``/``if_none_match``: the
        store's conditions (a failed one raises ObjectChanged, and nothing is written;
        ``if_none_match`` on an object that takes a multipart upload raises
        UnsupportedOperation before anything is sent).  ``metadata``: the caller's fields
        (``sealstore-*`` names refused).  ``settings``: the store's own settings for the
        write (``store.settings(obj)`` of an object rewritten), passed on to ``put`` and
        ``create_multipart``.  ``options``: the store's extras of every request of the write
        (``store.py``).  A file-like source given a ``length`` must end there:
        SourceChanged otherwise, before the object is written (reading to its end also
        verifies the final segment of an opened object being re-sealed)."""
        M.reject_reserved(metadata)
        extra: dict[str, Any] = {} if settings is None else {"settings": settings}
        if options:
            extra["options"] = options
        user = dict(metadata or {})
        cipher = cipher or self.new_cipher(store, bucket, key)
        if length is None:
            length = source_length(source)
        limits = store.limits
        if length is not None and cipher.sealed_size(length) <= limits.max_single:
            body, size = sealed_body(cipher, source, length)
            is_spool = not isinstance(body, SealingReader)
            meta = {**user, **M.object_metadata(cipher.header, length)}
            try:
                if is_spool:
                    _check_end(source, length)
                return Written.of(store.put(
                    bucket, key, body, length=size, metadata=meta,
                    if_match=if_match, if_none_match=if_none_match, **extra,
                ))  # fmt: skip
            finally:
                if is_spool:
                    body.close()
        wanted = RESEAL_PART if self.part_size is None else self.part_size
        plain_part = part_size(length, wanted, cipher.segment_size, limits)
        step = sealed_part_size(plain_part, cipher.segment_size, cipher.tag_size)
        reader = SealingReader(cipher, source, length)
        first = read_exactly(reader, HEADER_SIZE + step)
        if len(first) < HEADER_SIZE + step and length is None:
            # a stream of unknown length that ended within one part: one request
            n = cipher.plaintext_size(len(first))
            meta = {**user, **M.object_metadata(cipher.header, n)}
            return Written.of(store.put(
                bucket, key, first, length=len(first), metadata=meta,
                if_match=if_match, if_none_match=if_none_match, **extra,
            ))  # fmt: skip
        if if_none_match:  # the protocol's completion takes no such condition: refuse, not ignore
            raise UnsupportedOperation(
                "if_none_match needs one request, and this object takes a multipart upload (its "
                "sealed size is above the store's single-request limit); nothing was sent"
            )
        meta = {**user, **M.object_metadata(cipher.header, length)}
        return self._multipart(store, bucket, key, reader, first, step, meta, if_match, extra,
                               lambda: _check_end(source, length))  # fmt: skip

    def _multipart(
        self,
        store: ObjectStore,
        bucket: str,
        key: str,
        reader: SealingReader,
        first: bytes,
        step: int,
        meta: dict[str, str],
        if_match: str | None,
        extra: dict[str, Any],
        check: Callable[[], None],
    ) -> Written:
        upload_id = store.create_multipart(bucket, key, metadata=meta, **extra)
        opts = {"options": extra["options"]} if "options" in extra else {}

        def upload() -> list[tuple[int, str]]:
            parts: list[tuple[int, str]] = []
            data, total = first, 0
            while data:  # one part in memory: a part needs no "last" flag, only bytes
                number = len(parts) + 1
                token = store.upload_part(bucket, key, upload_id, number, data, **opts)
                parts.append((number, token))
                total += len(data)
                data = read_exactly(reader, step)
            check()
            log.debug("sealed %s/%s in %d parts (%d stored bytes)", bucket, key, len(parts), total)
            return parts

        return _complete_or_abort(store, bucket, key, upload_id, upload, if_match, opts)

    # ---- reading ---------------------------------------------------------------------------

    def header(
        self, store: ObjectStore, obj: StoredObject, *, options: Mapping[str, Any] | None = None
    ) -> tuple[ObjectHeader, bytes, bool] | None:
        """``(header, its bytes, found in the metadata)`` of a stored object (one ranged GET
        of 76 bytes when its metadata lacks the copy, with the store's ``options``), or None
        when it is not sealed."""
        opts = {"options": options} if options else {}

        def fetch() -> bytes:
            body = store.get(
                obj.bucket, obj.key, 0, HEADER_SIZE - 1, if_match=obj.etag, version=obj.version,
                **opts,
            )  # fmt: skip
            try:
                return read_exactly(body, HEADER_SIZE)
            finally:
                body.close()

        return header_of(obj.metadata, obj.size, fetch)

    def size(self, store: ObjectStore, bucket: str, key: str, *, version: str | None = None) -> int:
        """The object's plaintext size (one HEAD, and 76 bytes when its metadata was lost)."""
        obj = store.head(bucket, key, version=version)
        found = self.header(store, obj)
        if found is None:
            if self.passthrough:
                return obj.size
            raise NotSealedObject(f"{bucket}/{key} is not a sealstore object")
        return self.plaintext_size(obj, found[0])

    @staticmethod
    def plaintext_size(obj: StoredObject, header: ObjectHeader) -> int:
        """The plaintext size of the stored object ``obj`` that ``header`` heads (no request);
        MalformedObject when its metadata's length disagrees."""
        return plaintext_of(obj.metadata, obj.size, header)

    def open(
        self,
        store: ObjectStore,
        bucket: str,
        key: str,
        *,
        first: int | None = None,
        last: int | None = None,
        suffix: int | None = None,
        version: str | None = None,
        if_match: str | None = None,
        head: StoredObject | None = None,
        allow_retired: bool | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> OpenedObject:
        """The plaintext of ``bucket/key``: whole, or bytes ``first..last`` (inclusive; ``last``
        None: to the end), or the last ``suffix`` bytes (HTTP range semantics).

        One HEAD (or ``head``, one the caller made), then one GET of the covering segments,
        conditional on the version the HEAD saw (ObjectChanged if it changed).  The key
        commitment and the location are checked before the body is fetched; every byte
        returned was verified.  RangeNotSatisfiable (``.size``) outside the object;
        NotSealedObject for an object sealstore did not write (unless ``passthrough``).
        ``options``: the store's extras of every request (``store.py``)."""
        if self.tenancy is not None:  # no tenant, or two that disagree: before any request
            self.tenancy.tenant_for(bucket, key)
        opts: dict[str, Any] = {"options": options} if options else {}
        obj = head if head is not None else store.head(bucket, key, version=version, **opts)
        if if_match is not None and obj.etag != if_match:
            raise ObjectChanged(f"{bucket}/{key} is not the version asked for")
        found = self.header(store, obj, **opts)
        if found is None:
            return self._passed_through(store, obj, first, last, suffix, opts)
        header, raw_header, _ = found
        n = self.plaintext_size(obj, header)
        span = _span(first, last, suffix, n)
        cipher = self.opener(store, bucket, key, header, allow_retired=allow_retired)
        if span is None:  # an empty object: its final (empty) segment is still verified
            body = store.get(
                bucket, key, 0, obj.size - 1, if_match=obj.etag, version=obj.version, **opts
            )
            reader: Any = self._whole(body, raw_header, cipher)
            reader.read()
            reader.close()
            return OpenedObject(
                io.BytesIO(b""), size=n, span=None, sealed=True, header=header, stored=obj
            )
        if span == (0, n - 1):
            body = store.get(
                bucket, key, 0, obj.size - 1, if_match=obj.etag, version=obj.version, **opts
            )
            reader = self._whole(body, raw_header, cipher)
        else:
            plan = plan_span(header, span[0], span[1], n)
            body = store.get(
                bucket, key, plan.start, plan.stop - 1, if_match=obj.etag, version=obj.version,
                **opts,
            )  # fmt: skip
            reader = opened_span(cipher, body, plan)
        return OpenedObject(reader, size=n, span=span, sealed=True, header=header, stored=obj)

    @staticmethod
    def _whole(body: Any, raw_header: bytes, cipher: ObjectCipher) -> OpeningReader:
        try:
            body_header(read_exactly(body, HEADER_SIZE), raw_header)
        except BaseException:
            body.close()
            raise
        return opened_whole(cipher, body)

    def _passed_through(
        self,
        store: ObjectStore,
        obj: StoredObject,
        first: int | None,
        last: int | None,
        suffix: int | None,
        opts: Mapping[str, Any],
    ) -> OpenedObject:
        if not self.passthrough:
            raise NotSealedObject(f"{obj.bucket}/{obj.key} is not a sealstore object")
        log.warning(
            "%s/%s: not a sealstore object, returned as stored (passthrough): NOT "
            "authenticated, anyone with write access could have written it", obj.bucket, obj.key,
        )  # fmt: skip
        span = _span(first, last, suffix, obj.size)
        if span is None:
            return OpenedObject(
                io.BytesIO(b""), size=0, span=None, sealed=False, header=None, stored=obj
            )
        body = store.get(
            obj.bucket, obj.key, span[0], span[1], if_match=obj.etag, version=obj.version, **opts
        )
        return OpenedObject(
            Limited(body, span[1] - span[0] + 1), size=obj.size, span=span, sealed=False,
            header=None, stored=obj,
        )  # fmt: skip

    # ---- copying ---------------------------------------------------------------------------

    def copy(
        self,
        store: ObjectStore,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        *,
        dst_store: ObjectStore | None = None,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        source_if_match: str | None = None,
        source_version: str | None = None,
        head: StoredObject | None = None,
        settings: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        source_options: Mapping[str, Any] | None = None,
        workers: int | None = None,
    ) -> Written:
        """Re-seal ``src_bucket/src_key`` of ``store`` (its version ``source_version``; ``head``:
        a HEAD of it the caller made) as ``dst_bucket/dst_key`` of ``dst_store`` (default: the
        same store), for its new location, with the source's user metadata unless ``metadata``
        is given; returns what the store answered (``Written``).  Every read of the source is
        conditional on the version first read (or on ``source_if_match``), so a source changed
        meanwhile fails the copy (ObjectChanged) instead of mixing two versions.

        A copy of up to :data:`SINGLE_COPY` plaintext bytes that fits one request is the source
        opened as a stream and sealed (one ``put``).  A larger one is a multipart upload of
        :data:`COPY_PART` plaintext bytes per part (rounded to the store's limits), ``workers``
        (default :data:`COPY_WORKERS`) parts at a time when the store takes parts in any order
        (``parts_in_any_order``), each read verified, sealed at its offset and sent
        (:func:`copy_in_parts`); a failure aborts the upload.  ``if_match``/``if_none_match``:
        conditions on the destination (``if_none_match`` needs one request: a larger copy
        raises UnsupportedOperation before anything is sent).  ``settings``: the store's own settings for the write
        (as for :meth:`seal`).  ``source_options`` and ``options``: the store's extras of the
        requests reading the source and writing the destination (``store.py``)."""
        dst = dst_store or store
        src_opts: dict[str, Any] = {"options": source_options} if source_options else {}
        obj = head or store.head(src_bucket, src_key, version=source_version, **src_opts)
        if source_if_match is not None and obj.etag != source_if_match:
            raise ObjectChanged(f"{src_bucket}/{src_key} is not the version asked for")
        found = self.header(store, obj, **src_opts)
        user = M.split_user_metadata(obj.metadata) if metadata is None else metadata
        if found is not None:
            n = self.plaintext_size(obj, found[0])
            if copy_takes_parts(n, dst):
                M.reject_reserved(user)
                if if_none_match:
                    raise UnsupportedOperation(
                        "if_none_match needs one request, and this copy takes a multipart "
                        f"upload (above {SINGLE_COPY} plaintext bytes); nothing was sent"
                    )
                cipher = self.new_cipher(dst, dst_bucket, dst_key)
                return self._copy_parts(
                    store, obj, dst, dst_bucket, dst_key, cipher, n, user, if_match, settings,
                    options, src_opts, COPY_WORKERS if workers is None else workers,
                )  # fmt: skip
        opened = self.open(store, src_bucket, src_key, head=obj, **src_opts)
        try:
            source: Any = opened
            if found is not None:
                # one request of at most SINGLE_COPY bytes: the verified plaintext is held and
                # sealed from memory (a stream would be spooled to a file: 14% slower at 8 MiB);
                # reading on verifies the final segment
                source = read_exactly(opened, opened.length)
                _check_end(opened, opened.length)
            return self.seal(
                dst, dst_bucket, dst_key, source, length=opened.length, metadata=user,
                if_match=if_match, if_none_match=if_none_match, settings=settings,
                options=options,
            )  # fmt: skip
        finally:
            opened.close()

    def _copy_parts(
        self,
        store: ObjectStore,
        obj: StoredObject,
        dst: ObjectStore,
        bucket: str,
        key: str,
        cipher: ObjectCipher,
        n: int,
        user: Mapping[str, str],
        if_match: str | None,
        settings: Mapping[str, Any] | None,
        options: Mapping[str, Any] | None,
        src_opts: Mapping[str, Any],
        workers: int,
    ) -> Written:
        wanted = COPY_PART if self.part_size is None else self.part_size
        size = part_size(n, wanted, cipher.segment_size, dst.limits)
        extra: dict[str, Any] = {} if settings is None else {"settings": settings}
        opts: dict[str, Any] = {"options": options} if options else {}
        meta = {**user, **M.object_metadata(cipher.header, n)}
        upload_id = dst.create_multipart(bucket, key, metadata=meta, **extra, **opts)

        def read(first: int, last: int) -> bytes:
            opened = self.open(
                store, obj.bucket, obj.key, first=first, last=last, head=obj, **src_opts
            )
            try:
                return read_exactly(opened, last - first + 1)
            finally:
                opened.close()

        def send(number: int, data: bytes) -> str:
            final = part_ends_object(number, len(data), size, n)
            body = read_exactly(sealed_part(cipher, data, len(data), number, size, final=final),
                                sealed_part_size(size, cipher.segment_size, cipher.tag_size)
                                + HEADER_SIZE)  # fmt: skip
            return dst.upload_part(bucket, key, upload_id, number, body, **opts)

        parallel = workers if getattr(dst, "parts_in_any_order", False) else 1

        def upload() -> Sequence[tuple[int, str]]:
            parts = copy_in_parts(n, size, read, send, workers=parallel)
            log.debug("re-sealed %s/%s -> %s/%s in %d parts", obj.bucket, obj.key, bucket, key,
                      len(parts))  # fmt: skip
            return parts

        return _complete_or_abort(dst, bucket, key, upload_id, upload, if_match, opts)


def _complete_or_abort(
    store: ObjectStore,
    bucket: str,
    key: str,
    upload_id: str,
    upload: Callable[[], Sequence[tuple[int, str]]],
    if_match: str | None,
    opts: dict[str, Any],
) -> Written:
    """Send a multipart upload's parts (``upload``), then complete it; abort it on any error
    (the upload's parts would otherwise stay stored, and billed, unseen)."""
    try:
        parts = upload()
        return Written.of(
            store.complete_multipart(bucket, key, upload_id, parts, if_match=if_match, **opts)
        )
    except BaseException:
        try:
            store.abort_multipart(bucket, key, upload_id, **opts)
        except Exception:  # noqa: BLE001, S110 - the original error is the one to report
            pass
        raise


def _span(
    first: int | None, last: int | None, suffix: int | None, size: int
) -> tuple[int, int] | None:
    """The inclusive span asked for in an object of ``size`` bytes (None: nothing, the object
    being empty); RangeNotSatisfiable outside it."""
    if first is None and suffix is None:
        if last is not None:
            raise ValueError("a range with a last byte needs its first byte")
        return (0, size - 1) if size else None
    if first is not None and suffix is not None:
        raise ValueError("give first (and last) or suffix, not both")
    if (first is not None and first < 0) or (suffix is not None and suffix < 0):
        raise ValueError("range bounds are not negative")
    if last is not None and first is not None and last < first:
        raise ValueError(f"range end {last} is before its start {first}")
    span = ByteRange(first, last, suffix, "").resolve(size)
    if span is None:
        exc = RangeNotSatisfiable(f"the range is outside the object's {size} bytes")
        exc.size = size
        raise exc
    if span == ():
        return None
    return span  # type: ignore[return-value]
