"""botocore event handlers that seal objects on the way up and open them on the way down.

One :class:`S3Sealing` per client holds the keyring and the settings; :meth:`S3Sealing.register`
hooks its small handlers into the client's event system, as botocore's own SSE-C handlers do
(``before-parameter-build`` to rewrite request parameters, ``after-call`` to rewrite parsed
responses).  After-call handlers look at the HTTP status first: botocore emits ``after-call``
before it raises for an error response, and an error body is not an object.

Requests the adapter itself sends (the header of an object whose metadata was lost, the extra
last part of a multipart upload, rotation) run inside :meth:`S3Sealing.raw`, which the handlers
skip; the flag is per thread, so other threads keep sealing.

This module holds the client-wide part (settings, registration, the raw switch, key and layout
lookups, presigned URLs refused, copies); the upload handlers are in ``uploads.py``, the
download handlers in ``downloads.py`` (mixins of :class:`S3Sealing`).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from sealstore.errors import UnsealedPath
from sealstore.keyring import Keyring

from ..objects import metadata as M
from ..objects.engine import ObjectSealing, ObjectSettings
from .copying import copy_source as _copy_source
from .copying import reseal_copy, reseal_part_copy
from .downloads import DownloadHandlers
from ..objects.tenancy import ObjectTenancy
from .store import S3Store
from .uploads import SPOOL_MEMORY, UploadHandlers, _Upload

__all__ = ["SPOOL_MEMORY", "S3Sealing"]

_LAYOUT_CACHE = 1024
# operations whose presigned URL would carry or return an object body around the handlers
# (generate_presigned_post signs as PutObject)
_NO_PRESIGN = ("PutObject", "UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload",
               "GetObject")  # fmt: skip


class S3Sealing(UploadHandlers, DownloadHandlers):
    """Sealing settings and state for one boto3 S3 client (see :func:`encrypt_client`)."""

    def __init__(
        self, client: Any, keyring: Keyring, settings: ObjectSettings | None = None
    ) -> None:
        self.client = client
        self.keyring = keyring
        #: the client's settings (``encrypt_client``'s keywords) and the engine made of them
        self.engine: ObjectSealing = ObjectSealing.from_settings(
            keyring, ObjectSettings() if settings is None else settings
        )
        self.settings: ObjectSettings = self.engine.settings
        #: the client's raw side as the engine's store (its calls run inside raw())
        self.store: S3Store = S3Store(client, sealing=self)
        self._local = threading.local()
        self._uploads: dict[str, _Upload] = {}
        self._lock = threading.Lock()
        self._layouts: OrderedDict[tuple[str, str], tuple[int, int]] = (
            OrderedDict()
        )  # (bucket, key) -> (segment, tag)

    @property
    def segment_size(self) -> int:
        return self.settings.segment_size

    @property
    def passthrough(self) -> bool:
        return self.settings.passthrough

    @property
    def allow_retired(self) -> bool:
        return self.settings.allow_retired

    @property
    def context(self) -> bytes:
        return self.settings.context

    @property
    def bind_location(self) -> bool:
        return self.settings.bind_location

    @property
    def tenancy(self) -> ObjectTenancy | None:
        """None: objects are not bound to tenants (``objects/tenancy.py``)."""
        return self.settings.tenancy

    def __repr__(self) -> str:
        return (
            f"<S3Sealing keyring={self.keyring!r} segment_size={self.segment_size} "
            f"passthrough={self.passthrough} bind_location={self.bind_location}>"
        )

    # ---- registration and the raw switch ------------------------------------------------------

    def register(self, events: Any) -> None:
        """Hook the handlers into ``events`` (a client's ``meta.events``)."""
        for op in _NO_PRESIGN:  # registered first: refused before any other handler runs
            events.register(
                f"before-parameter-build.s3.{op}",
                self.refuse_presign,
                unique_id=f"sealstore-presign-{op}",
            )
        events.register(
            "before-sign.s3", self.refuse_presign_method, unique_id="sealstore-presign-sign"
        )
        for event, handler in (
            ("before-parameter-build.s3.PutObject", self.seal_put_object),
            ("before-parameter-build.s3.CreateMultipartUpload", self.start_multipart),
            ("after-call.s3.CreateMultipartUpload", self.remember_multipart),
            ("before-parameter-build.s3.UploadPart", self.seal_part),
            (
                "before-parameter-build.s3.CompleteMultipartUpload",
                self.finish_multipart,
            ),
            ("after-call.s3.CompleteMultipartUpload", self.forget_multipart),
            ("before-parameter-build.s3.AbortMultipartUpload", self.note_upload_id),
            ("after-call.s3.AbortMultipartUpload", self.forget_multipart),
            ("before-parameter-build.s3.UploadPartCopy", self.note_copy),
            ("before-call.s3.UploadPartCopy", self.reseal_part_copy),
            ("before-parameter-build.s3.CopyObject", self.keep_metadata_on_copy),
            ("before-call.s3.CopyObject", self.reseal_copy),
            ("before-parameter-build.s3.GetObject", self.map_range),
            ("after-call.s3.GetObject", self.open_body),
            ("before-parameter-build.s3.HeadObject", self.check_head),
            ("after-call.s3.HeadObject", self.plaintext_length),
        ):
            events.register(event, handler, unique_id=f"sealstore-{event}")

    @property
    def _raw_depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @contextlib.contextmanager
    def raw(self) -> Iterator[Any]:
        """Calls made on this thread inside the block go to S3 untouched (sealed bytes)."""
        self._local.depth = self._raw_depth + 1
        try:
            yield self.client
        finally:
            self._local.depth -= 1

    def _tag_size(self) -> int:
        return int(self.keyring.primary.suite.spec.tag_size_for(self.keyring.tag_size))

    def _remember_layout(self, bucket: str, key: str, header: Any) -> None:
        with self._lock:
            self._layouts[(bucket, key)] = (header.segment_size, header.tag_size)
            self._layouts.move_to_end((bucket, key))
            while len(self._layouts) > _LAYOUT_CACHE:
                self._layouts.popitem(last=False)

    def _layout_guess(self, bucket: str, key: str) -> tuple[int, int]:
        with self._lock:
            return self._layouts.get((bucket, key)) or (
                self.segment_size,
                self._tag_size(),
            )

    @contextlib.contextmanager
    def opening_retired(self) -> Iterator[None]:
        """Objects of retired keys open on this thread inside the block (rotation uses it)."""
        before = getattr(self._local, "retired", False)
        self._local.retired = True
        try:
            yield
        finally:
            self._local.retired = before

    def refuse_presign(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **kwargs: Any
    ) -> None:
        """Presigned requests run without the client: a presigned PUT (or POST, or part) would
        store what is sent as it is, and a presigned GET would return the sealed bytes."""
        if self._raw_depth or not context.get("is_presign_request"):
            return
        what = (
            "would return the sealed bytes to whoever opens it"
            if model.name == "GetObject"
            else "would store what is sent unsealed"
        )
        raise UnsealedPath(
            f"a presigned {model.name} URL from an encrypted client {what}; fetch or store "
            "through the client instead (presign inside client.sealstore.raw() to deliberately "
            "hand out the sealed bytes)"
        )

    def refuse_presign_method(self, request: Any, operation_name: str, **kwargs: Any) -> None:
        """A presigned URL whose method was changed (``HttpMethod="PUT"`` on ``head_object``)
        would upload or download the object around the handlers just the same."""
        context = getattr(request, "context", None) or {}
        if self._raw_depth:
            return
        if "s3-presign-post-policy" in context:
            raise UnsealedPath(
                "generate_presigned_post on an encrypted client would let the form upload "
                "unsealed; upload through the client (or presign inside client.sealstore.raw())"
            )
        if not context.get("is_presign_request"):
            return
        model = self.client.meta.service_model.operation_model(operation_name)
        if operation_name in _NO_PRESIGN or request.method != model.http["method"]:
            raise UnsealedPath(
                f"a presigned {request.method} URL for {operation_name} from an encrypted "
                "client would move the object's body unsealed; presign only operations without "
                "a body, with their own method (or inside client.sealstore.raw())"
            )

    def note_copy(self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        """UploadPartCopy: keep the request for :meth:`reseal_part_copy`."""
        if not self._raw_depth:
            context["sealstore_copy"] = dict(params)

    def reseal_part_copy(self, context: dict[str, Any], **kwargs: Any) -> Any:
        """UploadPartCopy: a server-side copy of sealed bytes would not line up with the
        upload's segments (nor its location): the source range is read through this client
        and sealed as the part, and the answer is the one S3 gives."""
        params = context.get("sealstore_copy")
        if params is None:
            return None
        state = self._upload(params.get("UploadId"))
        return reseal_part_copy(self, params, state.part_size)

    def reseal_copy(self, context: dict[str, Any], **kwargs: Any) -> Any:
        """CopyObject: a server-side copy keeps the source's location binding, so a bound
        source (or any sealed source, when this client binds) is re-sealed to the
        destination; otherwise S3 copies the bytes."""
        params = context.get("sealstore_copy")
        if params is None:
            return None
        return reseal_copy(self, params)

    def keep_metadata_on_copy(
        self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any
    ) -> None:
        """CopyObject: keep the request for :meth:`reseal_copy`; with MetadataDirective=REPLACE
        carry the source's sealstore fields over, so a server-side copy stays readable with
        its metadata (the body alone would open anyway)."""
        if self._raw_depth:
            return
        context["sealstore_copy"] = dict(params)
        if params.get("MetadataDirective") != "REPLACE":
            return
        M.reject_reserved(params.get("Metadata"))
        with self.raw() as client:
            head = client.head_object(**_copy_source(params["CopySource"]))
        fields = M.sealstore_fields(head.get("Metadata"))
        if fields:
            params["Metadata"] = {**(params.get("Metadata") or {}), **fields}
