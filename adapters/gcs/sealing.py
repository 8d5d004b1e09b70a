"""What an encrypted client does instead of moving bytes: one :class:`GCSSealing` per client holds
the engine (``ObjectSealing``) and the raw store (``GCSStore``), and each method here is the
sealed version of one door of google-cloud-storage (``doors.py`` routes the library's methods to
them).

Requests the adapter itself sends run inside :meth:`GCSSealing.raw`, which the doors and the
transport guard let through; the flag is per thread, so other threads keep sealing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from google.api_core import exceptions as gexc
from sealstore.errors import (
    ObjectChanged,
    ObjectNotFound,
    RangeNotSatisfiable,
    UnsupportedOperation,
)
from sealstore.keyring import Keyring
from sealstore.stream import source_length

from ..objects import metadata as M
from ..objects.engine import ObjectSealing, ObjectSettings
from ..objects.store import StoredObject
from .store import WRITABLE, GCSStore, resource_settings, stored_of

__all__ = ["COPY_CHUNK", "GCS_PART", "GCSSealing"]

#: plaintext bytes per part of a large upload (one part in memory, streamed into the session)
GCS_PART = 8 << 20
#: bytes moved per read when a download is written to the caller's file
COPY_CHUNK = 1 << 20


def _token(generation: Any) -> str | None:
    return None if generation is None else str(int(generation))


@contextlib.contextmanager
def library_errors() -> Iterator[None]:
    """The store's conditions and absences as the library raises them (a caller of the
    library catches ``google.api_core.exceptions.PreconditionFailed`` and ``NotFound``)."""
    try:
        yield
    except ObjectChanged as exc:
        raise gexc.PreconditionFailed(str(exc)) from exc  # type: ignore[no-untyped-call]
    except ObjectNotFound as exc:
        raise gexc.NotFound(str(exc)) from exc  # type: ignore[no-untyped-call]


def _no_csek(blob: Any, what: str) -> None:
    """A customer-supplied encryption key would be dropped by the sealed paths' own requests:
    refused rather than silently not applied."""
    if getattr(blob, "_encryption_key", None) is not None:
        raise UnsupportedOperation(
            f"{what} on an encrypted client does not support customer-supplied encryption keys "
            "(Blob(encryption_key=...)); the object is sealed client-side already"
        )


def _only(what: str, **conditions: Any) -> None:
    """Refuse the preconditions the sealed path does not implement (rather than ignore them)."""
    given = sorted(k for k, v in conditions.items() if v is not None)
    if given:
        raise UnsupportedOperation(
            f"{what} on an encrypted client supports if_generation_match (and, for copies, "
            f"if_source_generation_match) only, not {', '.join(given)}"
        )


class _Prefix:
    """The next ``size`` bytes of a file (a source longer than the upload's ``size``)."""

    def __init__(self, raw: Any, size: int) -> None:
        self._raw = raw
        self._left = size

    def read(self, n: int | None = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data: bytes = self._raw.read(n) if n else b""
        self._left -= len(data)
        return data


class GCSSealing:
    """Sealing settings and state for one ``google.cloud.storage.Client`` (see
    :func:`sealstore.adapters.gcs.encrypt_client`)."""

    def __init__(
        self,
        client: Any,
        keyring: Keyring,
        settings: ObjectSettings | None = None,
        *,
        part_size: int = GCS_PART,
    ) -> None:
        self.engine: ObjectSealing = ObjectSealing.from_settings(
            keyring, ObjectSettings() if settings is None else settings, part_size=part_size
        )
        self.client = client
        self._local = threading.local()
        self.store: GCSStore = GCSStore(client, sealing=self)

    def __repr__(self) -> str:
        return f"<GCSSealing {self.engine!r}>"

    # ---- the raw switch ---------------------------------------------------------------------

    @property
    def in_raw(self) -> bool:
        return bool(getattr(self._local, "depth", 0))

    @contextlib.contextmanager
    def raw(self) -> Iterator[Any]:
        """Calls made on this thread inside the block go to GCS untouched (sealed bytes)."""
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield self.client
        finally:
            self._local.depth -= 1

    # ---- uploads ----------------------------------------------------------------------------

    def upload(
        self,
        blob: Any,
        file_obj: Any,
        *,
        rewind: bool = False,
        size: int | None = None,
        content_type: str | None = None,
        if_generation_match: Any = None,
        **ignored: Any,
    ) -> None:
        """``upload_from_string/file/filename``: seal ``size`` bytes of ``file_obj`` (or all of
        it) into the blob, one request up to 8 MiB sealed, else one resumable session streamed
        a part at a time; then load the new object's properties into ``blob``."""
        self.check_upload(blob, ignored)
        if rewind:
            file_obj.seek(0)
        # what the library would send: the fields changed on the blob, and the content type
        props = {k: blob._properties[k] for k in blob._changes if k in WRITABLE}
        props["contentType"] = blob._get_content_type(
            content_type, filename=getattr(file_obj, "name", None)
        )
        if size is not None and source_length(file_obj) != size:
            file_obj = _Prefix(file_obj, size)  # the library reads ``size`` bytes, no more
        none_match = if_generation_match is not None and int(if_generation_match) == 0
        with library_errors():
            generation = self.engine.seal(
                self.store, blob.bucket.name, blob.name, file_obj, length=size, settings=props,
                metadata=blob.metadata if "metadata" in blob._changes else None,
                if_none_match=none_match,
                if_match=None if none_match else _token(if_generation_match),
            )  # fmt: skip
        self._load(blob, generation)

    def check_upload(self, blob: Any, arguments: dict[str, Any]) -> None:
        """Refuse what an upload cannot honour, before anything is read or sent."""
        _only(
            "upload",
            if_generation_not_match=arguments.get("if_generation_not_match"),
            if_metageneration_match=arguments.get("if_metageneration_match"),
            if_metageneration_not_match=arguments.get("if_metageneration_not_match"),
            predefined_acl=arguments.get("predefined_acl"),
        )
        _no_csek(blob, "upload")

    def _load(self, blob: Any, generation: str) -> None:
        loaded = blob.bucket.get_blob(blob.name, generation=int(generation))
        if loaded is not None:
            blob._set_properties(loaded._properties)

    # ---- downloads --------------------------------------------------------------------------

    def opened(
        self,
        blob: Any,
        start: int | None = None,
        end: int | None = None,
        *,
        if_generation_match: Any = None,
        head: StoredObject | None = None,
    ) -> Any:
        """The verified plaintext of ``blob`` (bytes ``start..end`` inclusive, as the library's
        ``start``/``end``; a negative ``start`` is a suffix), as a stream.  Sets
        ``blob.sealstore_sealed``: False when ``passthrough`` returned an object sealstore did
        not write (unauthenticated bytes), True otherwise."""
        _no_csek(blob, "download")
        first, last, suffix = start, end, None
        if start is not None and start < 0:
            first, suffix = None, -start
        elif start is None and end is not None:
            first = 0
        try:
            with library_errors():
                opened = self.engine.open(
                    self.store, blob.bucket.name, blob.name, first=first, last=last,
                    suffix=suffix, version=_token(blob.generation),
                    if_match=_token(if_generation_match), head=head,
                )  # fmt: skip
            blob.sealstore_sealed = opened.sealed
            return opened
        except RangeNotSatisfiable as exc:
            # what the library raises for GCS's 416, with the plaintext size
            raise gexc.RequestRangeNotSatisfiable(  # type: ignore[no-untyped-call]
                f"the range is not satisfiable (the object has {exc.size} bytes)"
            ) from None

    def download(
        self,
        blob: Any,
        file_obj: Any,
        *,
        start: int | None = None,
        end: int | None = None,
        if_generation_match: Any = None,
        **ignored: Any,
    ) -> None:
        """``download_as_bytes/to_file/to_filename``: the verified plaintext into ``file_obj``,
        a chunk at a time (``raw_download`` and ``checksum`` do not apply: every byte is
        authenticated, the stored checksums cover the sealed bytes)."""
        _only(
            "download",
            if_generation_not_match=ignored.get("if_generation_not_match"),
            if_metageneration_match=ignored.get("if_metageneration_match"),
            if_metageneration_not_match=ignored.get("if_metageneration_not_match"),
            if_etag_match=ignored.get("if_etag_match"),
            if_etag_not_match=ignored.get("if_etag_not_match"),
        )
        with self.opened(blob, start, end, if_generation_match=if_generation_match) as body:
            while chunk := body.read(COPY_CHUNK):
                file_obj.write(chunk)

    # ---- copies -----------------------------------------------------------------------------

    def copy(
        self,
        source: Any,
        dst_bucket: str,
        dst_name: str,
        *,
        metadata: dict[str, str] | None = None,
        properties: dict[str, Any] | None = None,
        source_generation: Any = None,
        if_generation_match: Any = None,
        if_source_generation_match: Any = None,
    ) -> Any:
        """Re-seal ``source`` (a blob) as ``dst_bucket/dst_name``: read through the engine
        (verified, bound to where it is) and sealed for the destination, with the source's
        metadata and content headers unless given.  Returns the new object's blob."""
        _no_csek(source, "copy")
        bucket = source.bucket
        loaded = bucket.get_blob(source.name, generation=source_generation or source.generation)
        if loaded is None:
            raise gexc.NotFound(f"no object {bucket.name}/{source.name}")  # type: ignore[no-untyped-call]
        head = stored_of(loaded, _token(source_generation))
        want = _token(if_source_generation_match)
        if want is not None and want != head.etag:
            raise gexc.PreconditionFailed(  # type: ignore[no-untyped-call]
                f"{bucket.name}/{source.name} is not the generation asked for"
            )
        user = M.split_user_metadata(head.metadata) if metadata is None else metadata
        props = resource_settings(loaded._properties if properties is None else properties)
        none_match = if_generation_match is not None and int(if_generation_match) == 0
        with self.opened(loaded, head=head) as body, library_errors():
            generation = self.engine.seal(
                self.store, dst_bucket, dst_name, body, length=body.length, metadata=user,
                settings=props,
                if_none_match=none_match,
                if_match=None if none_match else _token(if_generation_match),
            )  # fmt: skip
        new = self.client.bucket(dst_bucket).blob(dst_name)
        self._load(new, generation)
        return new

    # ---- sizes ------------------------------------------------------------------------------

    def plaintext_size(self, blob: Any) -> int | None:
        """The plaintext size of a loaded blob from its properties (sealstore metadata and the
        stored size), None when they do not say it (not loaded, not sealed)."""
        stored = blob._properties.get("size")
        found = M.header_from_metadata(blob.metadata)
        if stored is None or found is None:
            return None
        from sealstore.stream import plaintext_size

        header = found[0]
        n = plaintext_size(int(stored), header.segment_size, header.tag_size)
        expected = M.stored_length(blob.metadata)
        if expected is not None and expected != n:
            from sealstore.errors import MalformedObject

            raise MalformedObject(f"object metadata says {expected} bytes, its size says {n}")
        return n
