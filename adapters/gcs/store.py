"""Google Cloud Storage as a raw :class:`~sealstore.adapters.objects.store.ObjectStore` for the
object engine: google-cloud-storage calls and their errors, translated (404 -> ObjectNotFound,
412 -> ObjectChanged).

``GCSStore(client)`` takes a plain ``google.cloud.storage.Client`` or an encrypted one (its calls
then run inside ``client.sealstore.raw()``: stored bytes, never sealed twice).  The version token
is the object's generation, as text.

A multipart upload is ONE resumable upload session: the engine sends parts in order, one at a
time, so each part is streamed into the session as it comes, in the 256 KiB multiples a session
takes (the rest, under 256 KiB, waits for the next part or the completion, which sends the final
chunk with the total size).  Memory: one part and 256 KiB.

Conditions (``if_match``/``if_none_match``) go to GCS as ``ifGenerationMatch``, which GCS checks
atomically.  An emulator ignores every precondition: for a client pointed at one
(``STORAGE_EMULATOR_HOST``), or with ``check_conditions=True``, each condition is also checked
with a HEAD first (racy, but the emulator offers nothing better).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO

from google.api_core import exceptions as gexc
from sealstore.errors import ObjectChanged, ObjectNotFound
from sealstore.logguard import withheld

from ..objects.location import encode_location, location_domain
from ..objects.store import PartLimits, StoredObject, refuse_options

__all__ = ["GCS_LIMITS", "WRITABLE", "GCSStore", "resource_settings", "store_from_url", "stored_of"]

#: a resumable session takes chunks of 256 KiB multiples; one request (a multipart/related
#: upload, read into memory by the library) is kept at 8 MiB, google-cloud-storage's own limit
CHUNK = 256 << 10
GCS_LIMITS = PartLimits(min_part=CHUNK, max_part=5 << 40, max_parts=10_000, max_single=8 << 20)

_DOMAIN = location_domain("gs")  # b"sealstore/v1/gs-object": the URL scheme names it
#: object resource fields a rewrite repeats and a write may set (``settings``)
WRITABLE = ("cacheControl", "contentDisposition", "contentEncoding", "contentLanguage",
            "contentType", "customTime", "storageClass", "kmsKeyName")  # fmt: skip


def resource_settings(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The WRITABLE fields an object resource (or a blob's changed fields) has."""
    return {k: v for k, v in resource.items() if k in WRITABLE and v}


@contextlib.contextmanager
def _calls(what: str) -> Iterator[None]:
    try:
        yield
    except gexc.NotFound as exc:
        raise ObjectNotFound(f"{what}: not found") from exc
    except gexc.PreconditionFailed as exc:
        raise ObjectChanged(f"{what}: changed meanwhile") from exc


def _status(resp: Any, what: str) -> None:
    if resp.status_code == 404:
        raise ObjectNotFound(f"{what}: not found")
    if resp.status_code == 412:
        raise ObjectChanged(f"{what}: changed meanwhile")
    if resp.status_code >= 400:
        raise gexc.from_http_response(resp)  # type: ignore[no-untyped-call]


def _generation(token: str | None) -> int | None:
    """The generation a version token names (a token that is no generation matches nothing)."""
    if token is None:
        return None
    if not (token.isascii() and token.isdigit()):
        raise ObjectChanged("the object is not at the version asked for")
    return int(token)


def _status_without_url(status: int, what: str) -> None:
    if status == 404:
        raise ObjectNotFound(f"{what}: the upload session is gone")
    if status == 412:
        raise ObjectChanged(f"{what}: changed meanwhile")
    message = f"{what}: the resumable upload session answered {status}"
    raise gexc.from_http_status(status, message)  # type: ignore[no-untyped-call]


def stored_of(blob: Any, version: str | None = None) -> StoredObject:
    """The StoredObject a loaded blob describes (its stored size, not ``blob.size``)."""
    meta = {str(k): str(v) for k, v in (blob.metadata or {}).items() if v is not None}
    size = int(blob._properties.get("size") or 0)
    return StoredObject(
        blob.bucket.name, blob.name, size, str(blob.generation), meta, version,
        raw=dict(blob._properties),
    )  # fmt: skip


class _Body:
    """A streamed media response (stored bytes), closed with its connection."""

    def __init__(self, resp: Any) -> None:
        self._resp = resp

    def read(self, amt: int | None = -1) -> bytes:
        data: bytes = self._resp.raw.read(None if amt is None or amt < 0 else amt)
        return data

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        chunk = self.read(len(view))
        view[: len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        self._resp.close()


#: what the log records other libraries make while a session URL is used say instead
#: (sealstore.logguard): urllib3 logs each request's path, and a session's holds its upload_id
_SESSION = "a sealstore GCS resumable upload (its URL is a capability)"


class _Session:
    """One resumable upload session: its URL (a capability: kept here, never in a message or
    a log record), the bytes sent so far and the tail still waiting for a whole chunk."""

    __slots__ = ("offset", "pending", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self.offset = 0
        self.pending = bytearray()


class GCSStore:
    """The object-store protocol over a ``google.cloud.storage.Client``."""

    scheme = "gs"
    limits = GCS_LIMITS
    #: one resumable session: parts in increasing order, one at a time
    parts_in_any_order = False
    #: one object's request failed (a rotation records it and goes on)
    client_errors: tuple[type[BaseException], ...] = (gexc.GoogleAPICallError,)

    def __init__(
        self, client: Any, *, sealing: Any = None, check_conditions: bool | None = None
    ) -> None:
        self.client = client
        if check_conditions is None:
            check_conditions = bool(getattr(client, "_is_emulator_set", False))
        self.check_conditions = check_conditions
        self._sealing = sealing if sealing is not None else getattr(client, "sealstore", None)
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<GCSStore project={self.client.project!r}>"

    def _raw(self) -> contextlib.AbstractContextManager[Any]:
        if self._sealing is not None:
            return self._sealing.raw()  # type: ignore[no-any-return]
        return contextlib.nullcontext(self.client)

    def location(self, bucket: str, key: str) -> bytes:
        return encode_location(_DOMAIN, bucket, key)

    def settings(self, obj: StoredObject) -> dict[str, Any]:
        """What a rewrite of ``obj`` repeats: its content headers and storage class."""
        resource = obj.raw if isinstance(obj.raw, dict) else self.head(obj.bucket, obj.key).raw
        return resource_settings(resource)

    def _check(
        self, bucket: str, key: str, if_match: str | None, if_none_match: bool, what: str
    ) -> None:
        """The HEAD check of a condition on an emulator (see the module docstring)."""
        if not self.check_conditions or (if_match is None and not if_none_match):
            return
        try:
            current: str | None = self.head(bucket, key).etag
        except ObjectNotFound:
            current = None
        if (if_none_match and current is not None) or (
            if_match is not None and current != if_match
        ):
            raise ObjectChanged(f"{what} {bucket}/{key}: changed meanwhile")

    @staticmethod
    def _generation(if_match: str | None, if_none_match: bool) -> int | None:
        return 0 if if_none_match else _generation(if_match)

    def head(
        self,
        bucket: str,
        key: str,
        *,
        version: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> StoredObject:
        refuse_options(options, "GCS")
        generation = int(version) if version else None
        with _calls(f"head {bucket}/{key}"):
            blob = self.client.bucket(bucket).get_blob(key, generation=generation)
        if blob is None:
            raise ObjectNotFound(f"head {bucket}/{key}: not found")
        return stored_of(blob, version)

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
        refuse_options(options, "GCS")
        blob = self.client.bucket(bucket).blob(key, generation=int(version) if version else None)
        url = blob._get_download_url(self.client, if_generation_match=_generation(if_match))
        self._check(bucket, key, if_match, False, "get")  # before: one request at a time
        headers = {"accept-encoding": "identity"}
        if first or last is not None:
            headers["range"] = f"bytes={first}-{'' if last is None else last}"
        with self._raw():
            resp = self.client._http.request("GET", url, headers=headers, stream=True)
        if resp.status_code == 416:
            resp.close()
            import io

            return io.BytesIO(b"")  # at or past the end: nothing, as the protocol says
        try:
            _status(resp, f"get {bucket}/{key}")
            if if_match is not None and resp.headers.get("x-goog-generation", if_match) != if_match:
                raise ObjectChanged(f"get {bucket}/{key}: changed meanwhile")
        except BaseException:
            resp.close()
            raise
        return _Body(resp)  # type: ignore[return-value]

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
        settings: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        import io

        refuse_options(options, "GCS")
        if isinstance(body, (bytes, bytearray, memoryview)):
            body = io.BytesIO(bytes(body))
        self._check(bucket, key, if_match, if_none_match, "put")
        blob = self.client.bucket(bucket).blob(key)
        props = resource_settings(settings or {})
        for name, value in props.items():  # as changed fields: the library sends those
            blob._patch_property(name, value)
        blob.metadata = dict(metadata or {})
        with _calls(f"put {bucket}/{key}"), self._raw():
            blob.upload_from_file(
                body, size=length, content_type=props.get("contentType"),
                if_generation_match=self._generation(if_match, if_none_match),
            )  # fmt: skip
        return str(blob.generation)

    # ---- multipart: one resumable session ------------------------------------------------------

    def create_multipart(
        self,
        bucket: str,
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        refuse_options(options, "GCS")
        blob = self.client.bucket(bucket).blob(key)
        props = resource_settings(settings or {})
        for name, value in props.items():  # as changed fields: the library sends those
            blob._patch_property(name, value)
        blob.metadata = dict(metadata or {})
        with _calls(f"resumable upload {bucket}/{key}"), self._raw(), withheld(_SESSION):
            url = blob.create_resumable_upload_session(content_type=props.get("contentType"))
        upload_id = uuid.uuid4().hex
        with self._lock:
            self._sessions[upload_id] = _Session(url)
        return upload_id

    def _session(self, upload_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(upload_id)
        if session is None:
            raise ObjectNotFound("no such resumable upload in this store")
        return session

    def _send(self, session: _Session, data: bytes, total: int | None, what: str) -> Any:
        end = session.offset + len(data) - 1
        span = f"bytes {session.offset}-{end}" if data else "bytes *"
        headers = {"content-range": f"{span}/{'*' if total is None else total}"}
        with self._raw(), withheld(_SESSION):  # urllib3 logs the URL
            resp = self.client._http.request("PUT", session.url, data=data, headers=headers)
        status = resp.status_code
        if status in (404, 412) or status >= 400:  # no URL in the error: it is a capability
            _status_without_url(status, what)
        if total is None and status != 308:
            raise ObjectChanged(f"{what}: the upload session did not take the chunk ({status})")
        session.offset += len(data)
        return resp

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
        refuse_options(options, "GCS")
        session = self._session(upload_id)
        data = bytes(session.pending) + bytes(body) if session.pending else bytes(body)
        n = len(data) // CHUNK * CHUNK
        if n:
            self._send(session, data if n == len(data) else data[:n], None, f"upload {key}")
        session.pending = bytearray(data[n:])
        return str(number)

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
        refuse_options(options, "GCS")
        session = self._session(upload_id)
        self._check(bucket, key, if_match, False, "complete")
        total = session.offset + len(session.pending)
        resp = self._send(session, bytes(session.pending), total, f"upload {bucket}/{key}")
        with self._lock:
            self._sessions.pop(upload_id, None)
        return str(resp.json()["generation"])

    def abort_multipart(
        self, bucket: str, key: str, upload_id: str, *, options: Mapping[str, Any] | None = None
    ) -> None:
        refuse_options(options, "GCS")
        with self._lock:
            session = self._sessions.pop(upload_id, None)
        if session is None:
            return
        with self._raw(), withheld(_SESSION):
            try:  # GCS cancels a session on DELETE (499); the emulator lets it expire
                self.client._http.request("DELETE", session.url).close()
            except Exception:  # noqa: BLE001, S110 - best effort: an unfinished session is no object
                pass

    # ---- the rest ---------------------------------------------------------------------------------

    def copy(
        self,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> str:
        self._check(src_bucket, src_key, if_match, False, "copy")
        source = self.client.bucket(src_bucket)
        with _calls(f"copy {src_bucket}/{src_key}"), self._raw():
            new = source.copy_blob(
                source.blob(src_key), self.client.bucket(dst_bucket), dst_key,
                if_source_generation_match=_generation(if_match),
            )  # fmt: skip
            if metadata is not None:  # GCS merges a metadata patch: drop the old names
                new.metadata = {**{k: None for k in new.metadata or {}}, **metadata}
            for name, value in resource_settings(settings or {}).items():
                new._patch_property(name, value)
            if new._changes:
                new.patch()
        return str(new.generation)

    def list(
        self, bucket: str, prefix: str = "", *, start_after: str | None = None
    ) -> Iterator[StoredObject]:
        # start_offset is inclusive (and an emulator may ignore it): the names up to and
        # including start_after are skipped here too
        with _calls(f"list {bucket}/{prefix}"):
            blobs = self.client.list_blobs(bucket, prefix=prefix or None, start_offset=start_after)
            for blob in blobs:
                if start_after is not None and blob.name <= start_after:
                    continue
                yield StoredObject(bucket, blob.name, int(blob._properties.get("size") or 0),
                                   str(blob.generation))  # fmt: skip

    def versions(self, bucket: str, prefix: str = "") -> Iterator[StoredObject]:
        """Every generation (noncurrent ones of a versioned bucket too); the live generation
        has ``version`` None, as S3's current ``null`` version."""
        with _calls(f"list {bucket}/{prefix}"):
            for blob in self.client.list_blobs(bucket, prefix=prefix or None, versions=True):
                version = None if blob.time_deleted is None else str(blob.generation)
                size = int(blob._properties.get("size") or 0)
                yield StoredObject(bucket, blob.name, size, str(blob.generation), {}, version)

    def delete(self, bucket: str, key: str) -> None:
        with contextlib.suppress(gexc.NotFound):
            self.client.bucket(bucket).delete_blob(key)


def store_from_url(
    url: Any, *, endpoint_url: str | None = None, region: str | None = None
) -> GCSStore:
    """The store for a ``gs://`` URL (``sealstore.adapters.objects.stores``): a client from the
    environment (Application Default Credentials, ``STORAGE_EMULATOR_HOST``), at
    ``endpoint_url`` when given; ``region`` does not apply (buckets know their location)."""
    from google.cloud import storage

    options = {"api_endpoint": endpoint_url} if endpoint_url else None
    return GCSStore(storage.Client(client_options=options))
