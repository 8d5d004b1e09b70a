"""An object store in memory, for fast tests and examples: :class:`MemoryStore` keeps the
semantics the engine relies on (version tokens and conditions, ranged reads, multipart uploads
with a smallest part, raw copies, listings in key order, versions), and nothing is persisted.

Buckets exist once created (:meth:`MemoryStore.create_bucket`); a missing bucket or object
raises ObjectNotFound, as on a real store.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from sealstore.errors import ObjectChanged, ObjectNotFound, UnsupportedOperation

from .location import encode_location, location_domain
from .store import PartLimits, StoredObject, refuse_options

__all__ = ["MEMORY_LIMITS", "MemoryStore"]

#: small limits, so that tests reach multipart uploads with small objects
MEMORY_LIMITS = PartLimits(min_part=64 << 10, max_part=1 << 30, max_parts=10_000,
                           max_single=1 << 20)  # fmt: skip
_DOMAIN = location_domain("memory")


@dataclass(frozen=True)
class _Version:
    data: bytes
    metadata: dict[str, str]
    etag: str
    version: str


def _read_body(body: Any, length: int) -> bytes:
    if isinstance(body, (bytes, bytearray, memoryview)):
        data = bytes(body)
    else:
        chunks, got = [], 0
        while got < length:
            chunk = body.read(length - got)
            if not chunk:
                break
            chunks.append(bytes(chunk))
            got += len(chunk)
        data = b"".join(chunks)
    if len(data) != length:
        raise UnsupportedOperation(f"the body holds {len(data)} bytes, not the declared {length}")
    return data


class MemoryStore:
    """An :class:`~sealstore.adapters.objects.store.ObjectStore` in a dict (thread-safe)."""

    scheme = "memory"
    #: parts may be uploaded in any order, several at a time (``store.py``)
    parts_in_any_order = True

    def __init__(self, limits: PartLimits = MEMORY_LIMITS) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._buckets: dict[str, dict[str, list[_Version]]] = {}
        self._uploads: dict[str, tuple[str, str, dict[str, str], dict[int, bytes]]] = {}
        self._counter = itertools.count(1)

    def __repr__(self) -> str:
        return f"<MemoryStore buckets={sorted(self._buckets)}>"

    def create_bucket(self, bucket: str) -> None:
        with self._lock:
            self._buckets.setdefault(bucket, {})

    # -- helpers (under the lock) --
    def _bucket(self, bucket: str) -> dict[str, list[_Version]]:
        try:
            return self._buckets[bucket]
        except KeyError:
            raise ObjectNotFound(f"no bucket {bucket!r}") from None

    def _current(self, bucket: str, key: str, version: str | None = None) -> _Version:
        versions = self._bucket(bucket).get(key)
        if not versions:
            raise ObjectNotFound(f"no object {bucket}/{key}")
        if version is None:
            return versions[-1]
        for v in versions:
            if v.version == version:
                return v
        raise ObjectNotFound(f"no version {version!r} of {bucket}/{key}")

    def _check(self, bucket: str, key: str, if_match: str | None, if_none_match: bool) -> None:
        versions = self._bucket(bucket).get(key)
        if if_none_match and versions:
            raise ObjectChanged(f"{bucket}/{key} exists")
        if if_match is not None and (not versions or versions[-1].etag != if_match):
            if not versions:
                raise ObjectNotFound(f"no object {bucket}/{key}")
            raise ObjectChanged(f"{bucket}/{key} changed")

    def _store(self, bucket: str, key: str, data: bytes, metadata: Mapping[str, str]) -> str:
        n = next(self._counter)
        etag = '"' + hashlib.sha256(data + n.to_bytes(8, "big")).hexdigest()[:32] + '"'
        meta = {str(k).lower(): str(v) for k, v in metadata.items()}
        self._bucket(bucket).setdefault(key, []).append(_Version(data, meta, etag, str(n)))
        return etag

    @staticmethod
    def _described(bucket: str, key: str, v: _Version, version: str | None) -> StoredObject:
        return StoredObject(bucket, key, len(v.data), v.etag, dict(v.metadata), version)

    # -- the protocol --
    def location(self, bucket: str, key: str) -> bytes:
        return encode_location(_DOMAIN, bucket, key)

    def head(
        self,
        bucket: str,
        key: str,
        *,
        version: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> StoredObject:
        refuse_options(options, "memory")
        with self._lock:
            return self._described(bucket, key, self._current(bucket, key, version), version)

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
        refuse_options(options, "memory")
        with self._lock:
            v = self._current(bucket, key, version)
            if if_match is not None and v.etag != if_match:
                raise ObjectChanged(f"{bucket}/{key} changed")
        stop = len(v.data) if last is None else min(last + 1, len(v.data))
        return io.BytesIO(v.data[first:stop] if first < stop else b"")

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
        refuse_options(options, "memory")
        if length > self.limits.max_single:
            raise UnsupportedOperation(f"a put takes at most {self.limits.max_single} bytes")
        data = _read_body(body, length)
        with self._lock:
            self._check(bucket, key, if_match, if_none_match)
            return self._store(bucket, key, data, metadata or {})

    def create_multipart(
        self,
        bucket: str,
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        refuse_options(options, "memory")
        with self._lock:
            self._bucket(bucket)
            upload_id = f"upload-{next(self._counter)}"
            self._uploads[upload_id] = (bucket, key, dict(metadata or {}), {})
        return upload_id

    def _upload(self, bucket: str, key: str, upload_id: str) -> dict[int, bytes]:
        found = self._uploads.get(upload_id)
        if found is None or found[:2] != (bucket, key):
            raise ObjectNotFound(f"no upload {upload_id!r} for {bucket}/{key}")
        return found[3]

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
        refuse_options(options, "memory")
        if not 1 <= number <= self.limits.max_parts:
            raise UnsupportedOperation(f"part numbers are 1..{self.limits.max_parts}")
        if len(body) > self.limits.max_part:
            raise UnsupportedOperation(f"a part holds at most {self.limits.max_part} bytes")
        with self._lock:
            self._upload(bucket, key, upload_id)[number] = bytes(body)
        return hashlib.sha256(bytes(body)).hexdigest()

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
        refuse_options(options, "memory")
        with self._lock:
            stored = self._upload(bucket, key, upload_id)
            numbers = [n for n, _ in parts]
            if not parts or numbers != sorted(set(numbers)):
                raise UnsupportedOperation("parts must be listed once each, in increasing order")
            data = []
            for i, (n, token) in enumerate(parts):
                body = stored.get(n)
                if body is None or hashlib.sha256(body).hexdigest() != token:
                    raise UnsupportedOperation(f"part {n} was not uploaded as listed")
                if i < len(parts) - 1 and len(body) < self.limits.min_part:
                    raise UnsupportedOperation(f"part {n} is smaller than the smallest part")
                data.append(body)
            self._check(bucket, key, if_match, False)
            meta = self._uploads.pop(upload_id)[2]
            return self._store(bucket, key, b"".join(data), meta)

    def abort_multipart(
        self, bucket: str, key: str, upload_id: str, *, options: Mapping[str, Any] | None = None
    ) -> None:
        refuse_options(options, "memory")
        with self._lock:
            self._uploads.pop(upload_id, None)

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
        with self._lock:
            v = self._current(src_bucket, src_key)
            if if_match is not None and v.etag != if_match:
                raise ObjectChanged(f"{src_bucket}/{src_key} changed")
            if len(v.data) > self.limits.max_single:
                raise UnsupportedOperation(f"a copy takes at most {self.limits.max_single} bytes")
            return self._store(
                dst_bucket, dst_key, v.data, v.metadata if metadata is None else metadata
            )

    def list(
        self, bucket: str, prefix: str = "", *, start_after: str | None = None
    ) -> Iterator[StoredObject]:
        with self._lock:
            found = [
                StoredObject(bucket, k, len(vs[-1].data), vs[-1].etag)
                for k, vs in sorted(self._bucket(bucket).items())
                if vs and k.startswith(prefix) and (start_after is None or k > start_after)
            ]
        return iter(found)

    def versions(self, bucket: str, prefix: str = "") -> Iterator[StoredObject]:
        with self._lock:
            found = [
                self._described(bucket, k, v, v.version)
                for k, vs in sorted(self._bucket(bucket).items())
                if k.startswith(prefix)
                for v in vs
            ]
        return iter(found)

    def delete(self, bucket: str, key: str) -> None:
        with self._lock:
            self._bucket(bucket).pop(key, None)

    # -- for tests: what an attacker with write access to the storage can do --
    def tamper(self, bucket: str, key: str, offset: int, xor: int = 1) -> None:
        """Flip bits of one stored byte of the current version in place (its ETag kept)."""
        with self._lock:
            versions = self._bucket(bucket)[key]
            v = versions[-1]
            data = bytearray(v.data)
            data[offset] ^= xor
            versions[-1] = _Version(bytes(data), v.metadata, v.etag, v.version)
