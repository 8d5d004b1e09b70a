"""botocore event handlers that seal objects on the way up and open them on the way down.

One :class:`S3Sealing` per client holds the keyring and the settings; :meth:`S3Sealing.register`
hooks its small handlers into the client's event system, as botocore's own SSE-C handlers do
(``before-parameter-build`` to rewrite request parameters, ``after-call`` to rewrite parsed
responses).  After-call handlers look at the HTTP status first: botocore emits ``after-call``
before it raises for an error response, and an error body is not an object.

Requests the adapter itself sends (the header of an object whose metadata was lost, the extra
last part of a multipart upload, rotation) run inside :meth:`S3Sealing.raw`, which the handlers
skip; the flag is per thread, so other threads keep sealing.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
from collections import OrderedDict

from botocore.exceptions import ClientError, ParamValidationError

from sealstore.errors import (
    MalformedObject,
    NotSealedObject,
    UnsealedPath,
    UnsupportedOperation,
)
from sealstore.segment_log import SegmentLog
from sealstore.stream import (
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    ObjectCipher,
    OpeningReader,
    SealingReader,
    parse_object_header,
    plaintext_size,
    plan_range,
    source_length,
)

from . import metadata as M
from .copying import copy_source as _copy_source
from .copying import reseal_copy, reseal_part_copy
from .location import object_location
from .body import (
    Prepended,
    Resuming,
    Window,
    invalid_range,
    parse_range,
    read_exactly,
    streaming_body,
)
from .sizes import size_of

__all__ = ["SPOOL_MEMORY", "S3Sealing"]

#: Sealed bodies of unknown length are spooled; this much stays in memory, the rest on disk.
SPOOL_MEMORY = 8 << 20
_CHECKSUM_PARAMS = ("ChecksumAlgorithm", "ChecksumType")
_LAYOUT_CACHE = 1024
# operations whose presigned URL would carry or return an object body around the handlers
# (generate_presigned_post signs as PutObject)
_NO_PRESIGN = ("PutObject", "UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload",
               "GetObject")  # fmt: skip


def _user_checksums(params) -> list[str]:
    return [
        k
        for k in params
        if (k.startswith("Checksum") and k not in _CHECKSUM_PARAMS) or k == "ContentMD5"
    ]


def _refuse_checksums(params, op: str) -> None:
    found = _user_checksums(params)
    if found:
        raise UnsupportedOperation(
            f"{op}: {', '.join(found)} would describe the plaintext, but S3 stores the sealed "
            "bytes; leave them out (botocore computes checksums of what is sent, e.g. with "
            "ChecksumAlgorithm)"
        )


class _Upload:
    """State of one multipart upload: its object key, part size, which parts went up and what
    was sealed under each segment nonce (a part sent again must hold the same bytes)."""

    __slots__ = ("cipher", "finals", "length", "lock", "log", "part_size", "pid", "plain")

    def __init__(
        self, cipher: ObjectCipher, part_size: int, length: int | None
    ) -> None:
        self.cipher = cipher
        self.part_size = part_size
        self.length = length
        self.finals: dict[int, bool] = {}
        self.plain: dict[int, int] = {}
        self.lock = threading.Lock()
        self.log = SegmentLog()
        self.pid = os.getpid()  # a forked copy of this state must not seal: its log is a copy

    def check_process(self) -> None:
        if self.pid != os.getpid():
            raise UnsupportedOperation(
                "this multipart upload was started in another process (this one was forked "
                "from it); only that process knows what was sealed under the upload's nonces, "
                "so its parts and completion must be sent from there"
            )


class S3Sealing:
    """Sealing settings and state for one boto3 S3 client (see :func:`encrypt_client`)."""

    def __init__(
        self,
        client,
        keyring,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        passthrough: bool = False,
        allow_retired: bool = False,
        context=b"",
        bind_location: bool = True,
    ) -> None:
        ObjectCipher.create(
            keyring, segment_size=segment_size
        )  # validates the settings early
        self.client = client
        self.keyring = keyring
        self.segment_size = segment_size
        self.passthrough = passthrough
        self.allow_retired = allow_retired
        self.context = context
        self.bind_location = bool(bind_location)
        self._local = threading.local()
        self._uploads: dict[str, _Upload] = {}
        self._lock = threading.Lock()
        self._layouts: OrderedDict = OrderedDict()  # (bucket, key) -> (segment, tag)

    def __repr__(self) -> str:
        return (
            f"<S3Sealing keyring={self.keyring!r} segment_size={self.segment_size} "
            f"passthrough={self.passthrough} bind_location={self.bind_location}>"
        )

    # ---- registration and the raw switch ------------------------------------------------------

    def register(self, events) -> None:
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
    def raw(self):
        """Calls made on this thread inside the block go to S3 untouched (sealed bytes)."""
        self._local.depth = self._raw_depth + 1
        try:
            yield self.client
        finally:
            self._local.depth -= 1

    def _tag_size(self) -> int:
        return self.keyring.primary.suite.spec.tag_size_for(self.keyring.tag_size)

    def _remember_layout(self, bucket, key, header) -> None:
        with self._lock:
            self._layouts[(bucket, key)] = (header.segment_size, header.tag_size)
            self._layouts.move_to_end((bucket, key))
            while len(self._layouts) > _LAYOUT_CACHE:
                self._layouts.popitem(last=False)

    def _layout_guess(self, bucket, key) -> tuple[int, int]:
        with self._lock:
            return self._layouts.get((bucket, key)) or (
                self.segment_size,
                self._tag_size(),
            )

    @contextlib.contextmanager
    def opening_retired(self):
        """Objects of retired keys open on this thread inside the block (rotation uses it)."""
        before = getattr(self._local, "retired", False)
        self._local.retired = True
        try:
            yield
        finally:
            self._local.retired = before

    def location(self, bucket, key) -> bytes | None:
        """What a new object at ``bucket/key`` is bound to (None with ``bind_location`` off)."""
        return object_location(bucket, key) if self.bind_location else None

    def _opener(self, header, request) -> ObjectCipher:
        allow = self.allow_retired or getattr(self._local, "retired", False)
        return ObjectCipher.from_header(
            self.keyring,
            header,
            context=self.context,
            location=object_location(request.get("Bucket"), request.get("Key")),
            allow_retired=allow,
        )

    def refuse_presign(self, params, model, context, **kwargs):
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

    def refuse_presign_method(self, request, operation_name, **kwargs):
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

    # ---- uploads ------------------------------------------------------------------------------

    def seal_put_object(self, params, **kwargs):
        """PutObject: replace the body by its sealed stream and add the object metadata.

        Bytes and seekable files stream (and can be re-read for signing and retries); other
        file objects and iterables are sealed into a spooled temporary file first, because a
        request body must have a length and be re-readable.
        """
        if self._raw_depth:
            return
        _refuse_no_body(params)
        _refuse_checksums(params, "PutObject")
        meta = dict(params.get("Metadata") or {})
        declared = M.declared_length(meta)
        meta.pop(M.PART_SIZE, None)
        M.reject_reserved(meta)
        given = params.pop("ContentLength", None)
        if declared is not None and given is not None and declared != given:
            raise UnsupportedOperation(
                "ContentLength and Metadata sealstore-length disagree"
            )
        length = declared if declared is not None else given
        body = params.get("Body", b"")
        if isinstance(body, str):
            body = body.encode("utf-8")
        cipher = ObjectCipher.create(
            self.keyring,
            segment_size=self.segment_size,
            context=self.context,
            location=self.location(params.get("Bucket"), params.get("Key")),
        )
        reader = SealingReader(cipher, body, length)
        if reader.seekable():
            out, size = reader, len(reader)
        else:
            out, size = self._spool(reader)
        if length is None:
            length = cipher.plaintext_size(size)
        _forward_transfer_signals(out, body)
        params["Body"] = out
        params["ContentLength"] = size
        params["Metadata"] = {**meta, **M.object_metadata(cipher.header, length)}

    @staticmethod
    def _spool(reader: SealingReader):
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        buf = bytearray(2 << 20)
        view = memoryview(buf)
        while n := reader.readinto(view):
            spool.write(view[:n])
        size = spool.tell()
        spool.seek(0)
        return spool, size

    def start_multipart(self, params, context, **kwargs):
        """CreateMultipartUpload: draw the object key; the part size comes as a request hint."""
        if self._raw_depth:
            return
        _refuse_checksums(params, "CreateMultipartUpload")
        meta = dict(params.get("Metadata") or {})
        length = M.declared_length(meta)
        hint = meta.pop(M.PART_SIZE, None)
        M.reject_reserved(meta)
        seg = self.segment_size
        try:
            part_size = int(hint)
        except (TypeError, ValueError):
            part_size = 0
        if part_size <= 0 or part_size % seg:
            raise UnsupportedOperation(
                "a multipart upload through an encrypted client needs its part size: use "
                "upload_file/upload_fileobj, or pass Metadata={'sealstore-part-size': str(P)} "
                f"with P a multiple of the segment size ({seg}) and send every part but the "
                "last with exactly P bytes"
            )
        cipher = ObjectCipher.create(
            self.keyring,
            segment_size=seg,
            context=self.context,
            location=self.location(params.get("Bucket"), params.get("Key")),
        )
        context["sealstore_upload"] = _Upload(cipher, part_size, length)
        params["Metadata"] = {**meta, **M.object_metadata(cipher.header, length)}

    def remember_multipart(self, http_response, parsed, context, **kwargs):
        state = context.get("sealstore_upload")
        if state is None or not 200 <= http_response.status_code < 300:
            return
        with self._lock:
            self._uploads[parsed["UploadId"]] = state

    def _upload(self, upload_id) -> _Upload:
        with self._lock:
            state = self._uploads.get(upload_id)
        if state is None:
            raise UnsupportedOperation(
                f"upload {upload_id!r} was not started by this encrypted client (or this "
                "process), so its parts cannot be sealed; start it here"
            )
        state.check_process()
        return state

    def seal_part(self, params, **kwargs):
        """UploadPart: seal the part as segments at its offset, in this (worker) thread.

        Part ``k`` holds plaintext ``(k-1)*P ..``; part 1 carries the header; a part shorter
        than ``P`` (or reaching the declared length) ends with the final segment.
        """
        if self._raw_depth:
            return
        _refuse_no_body(params)
        _refuse_checksums(params, "UploadPart")
        state = self._upload(params.get("UploadId"))
        number = int(params["PartNumber"])
        body, size = _part_body(params, state.part_size)
        final = _part_is_final(state, number, size)
        reader = SealingReader(
            state.cipher,
            body,
            size,
            first_index=(number - 1) * state.part_size // state.cipher.segment_size,
            final=final,
            header=number == 1,
            log=state.log,
        )
        with state.lock:
            again = number in state.finals
        if again and reader.seekable():
            _check_resent(reader)
        if not reader.seekable():
            reader, sealed = self._spool(reader)
        else:
            sealed = len(reader)
        with state.lock:
            state.finals[number] = final
            state.plain[number] = size
        _forward_transfer_signals(reader, body)
        params["Body"] = reader
        params["ContentLength"] = sealed

    def finish_multipart(self, params, context, **kwargs):
        """CompleteMultipartUpload: check the parts tile the object and that the last one ends
        with the final segment; if every part was full, upload one more part holding only the
        final (empty) segment."""
        if self._raw_depth:
            return
        context["sealstore_upload_id"] = params.get("UploadId")
        with self._lock:
            state = self._uploads.get(params.get("UploadId"))
        if state is None:
            return
        state.check_process()
        _refuse_checksums(
            {k: v for k, v in params.items() if k != "MpuObjectSize"},
            "CompleteMultipartUpload",
        )
        parts = list((params.get("MultipartUpload") or {}).get("Parts") or [])
        finals, plain = _check_parts_tile(state, parts)
        if not finals:
            parts.append(self._upload_final_part(params, state, parts))
            params["MultipartUpload"] = {
                **(params.get("MultipartUpload") or {}),
                "Parts": parts,
            }
        if "MpuObjectSize" in params:
            params["MpuObjectSize"] = state.cipher.sealed_size(plain)

    def _upload_final_part(self, params, state: _Upload, parts: list) -> dict:
        """Upload part N+1, only the final (empty) segment, after N full parts; its entry for
        the completion's part list."""
        count = len(parts)
        cipher = state.cipher
        first = count * state.part_size // cipher.segment_size
        body = SealingReader(
            cipher, b"", 0, first_index=first, header=count == 0, log=state.log
        ).read()
        extra = {}
        algorithms = {k[len("Checksum") :] for p in parts for k in p if k.startswith("Checksum")}
        if algorithms:
            extra["ChecksumAlgorithm"] = sorted(algorithms)[0]
        with self.raw() as client:
            resp = client.upload_part(
                Bucket=params["Bucket"],
                Key=params["Key"],
                UploadId=params["UploadId"],
                PartNumber=count + 1,
                Body=body,
                **extra,
            )
        entry = {"PartNumber": count + 1, "ETag": resp["ETag"]}
        # list the checksum the other parts list and no other: botocore sends a CRC32 by
        # default, and an upload created without a checksum refuses a part listed with one
        name = extra.get("ChecksumAlgorithm")
        if name and f"Checksum{name}" in resp:
            entry[f"Checksum{name}"] = resp[f"Checksum{name}"]
        return entry

    @staticmethod
    def note_upload_id(params, context, **kwargs):
        context["sealstore_upload_id"] = params.get("UploadId")

    def forget_multipart(self, http_response, params=None, context=None, **kwargs):
        if not 200 <= http_response.status_code < 300:
            return
        upload_id = (context or {}).get("sealstore_upload_id")
        if upload_id is not None:
            with self._lock:
                self._uploads.pop(upload_id, None)

    def note_copy(self, params, context, **kwargs):
        """UploadPartCopy: keep the request for :meth:`reseal_part_copy`."""
        if not self._raw_depth:
            context["sealstore_copy"] = dict(params)

    def reseal_part_copy(self, context, **kwargs):
        """UploadPartCopy: a server-side copy of sealed bytes would not line up with the
        upload's segments (nor its location): the source range is read through this client
        and sealed as the part, and the answer is the one S3 gives."""
        params = context.get("sealstore_copy")
        if params is None:
            return None
        state = self._upload(params.get("UploadId"))
        return reseal_part_copy(self, params, state.part_size)

    def reseal_copy(self, context, **kwargs):
        """CopyObject: a server-side copy keeps the source's location binding, so a bound
        source (or any sealed source, when this client binds) is re-sealed to the
        destination; otherwise S3 copies the bytes."""
        params = context.get("sealstore_copy")
        if params is None:
            return None
        return reseal_copy(self, params)

    def keep_metadata_on_copy(self, params, context, **kwargs):
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

    # ---- downloads ----------------------------------------------------------------------------

    def map_range(self, params, context, **kwargs):
        """GetObject: turn a plaintext ``Range`` into the sealed bytes of its segments.

        The layout (segment and tag size) is the last one seen for this object or the client's
        own; the response's metadata confirms it, and a wrong guess costs one more request.
        """
        if self._raw_depth:
            return
        if params.get("PartNumber") is not None:
            raise UnsupportedOperation(
                "PartNumber reads sealed parts; use a plaintext Range on an encrypted client"
            )
        context["sealstore_get"] = True
        context["sealstore_request"] = _object_args(params)
        text = params.get("Range")
        if not text:
            return
        rng = parse_range(text)
        seg, tag = self._layout_guess(params.get("Bucket"), params.get("Key"))
        context["sealstore_range"] = rng
        params["Range"] = _sealed_range(rng, seg, tag)

    def open_body(self, http_response, parsed, model, context, **kwargs):
        """GetObject: replace the sealed body by a stream of verified plaintext."""
        if not context.get("sealstore_get"):
            return
        rng = context.get("sealstore_range")
        if http_response.status_code == 416 and rng is not None:
            self._plaintext_416(http_response, parsed, context, rng)
            return
        if not 200 <= http_response.status_code < 300:
            return
        if rng is None:
            self._open_whole(parsed, context)
        else:  # a 200 to a ranged request (range ignored) is a range from 0 to the end
            self._open_range(parsed, context, rng)

    def _plaintext_416(self, http_response, parsed, context, rng) -> None:
        """S3 refused the sealed range: state the refusal in the caller's terms, the range
        asked for and the plaintext size (one HEAD), as S3 states it for a plain object.

        A range the plaintext does satisfy was mapped with a wrong layout guess (an object with
        larger segments than this client's, not seen before): it is fetched again with the
        object's own layout and answered."""
        error = parsed.get("Error")
        if not isinstance(error, dict):
            return
        error["RangeRequested"] = rng.text
        request = context.get("sealstore_request", {})
        try:
            with self.raw() as client:
                head = client.head_object(**request)
        except ClientError:  # the 416 is what to report, without the sealed size
            error.pop("ActualObjectSize", None)
            return
        try:
            n, header = size_of(
                head, lambda: self._fetch_header(request, head.get("ETag"))[1]
            )
        except NotSealedObject:
            if not self.passthrough:
                raise
            error["ActualObjectSize"] = str(head["ContentLength"])
            return
        self._remember_layout(request.get("Bucket"), request.get("Key"), header)
        error["ActualObjectSize"] = str(n)
        if rng.resolve(n) is None:
            return
        text = _sealed_range(rng, header.segment_size, header.tag_size)
        resp = self._get_raw(request, head.get("ETag"), text)
        parsed.clear()
        parsed.update(resp)
        http_response.status_code = resp["ResponseMetadata"]["HTTPStatusCode"]
        self._open_range(parsed, context, rng)

    def _open_whole(self, parsed, context) -> None:
        raw = parsed["Body"]
        size = parsed.get("ContentLength")
        meta = parsed.get("Metadata")
        from_meta = M.header_from_metadata(meta)
        head = read_exactly(raw, HEADER_SIZE)
        try:
            header = parse_object_header(head)
        except NotSealedObject:
            if from_meta is None and self.passthrough:
                parsed["Body"] = streaming_body(Prepended(head, raw), size, raw)
                return
            raw.close()
            if from_meta is not None:
                raise MalformedObject(
                    "the object's metadata says sealed but its body is not"
                ) from None
            raise
        if from_meta is not None and from_meta[1] != head:
            raw.close()
            raise MalformedObject(
                "the object's metadata header differs from its body header"
            )
        request = context.get("sealstore_request", {})
        cipher, n = self._prepare_open(raw, meta, request, header, size)
        body = self._resuming(raw, request, parsed.get("ETag"), HEADER_SIZE, size - 1)
        parsed["Body"] = streaming_body(OpeningReader(cipher, body), n, body)
        _describe(parsed, None, n, None)

    def _resuming(self, raw, request, etag, first: int, last: int) -> Resuming:
        """``raw`` (the stored bytes ``first..last``), asked for again from where it stopped
        if the connection drops: an If-Match GET, so only while the ETag is known."""
        if not etag:
            return Resuming(raw, first, last, None)
        return Resuming(raw, first, last, lambda a, b: self._fetch(request, etag, a, b))

    def _prepare_open(self, raw, meta, request, header, stored_size):
        """(opening cipher, plaintext size) of an object with this header and stored size;
        MalformedObject (and ``raw`` closed) if the metadata's plaintext length disagrees."""
        try:
            cipher = self._opener(header, request)
        except BaseException:  # WrongLocation, KeyCommitmentMismatch...: nothing will be read
            raw.close()
            raise
        self._remember_layout(request.get("Bucket"), request.get("Key"), header)
        n = plaintext_size(stored_size, header.segment_size, header.tag_size)
        expected = M.stored_length(meta)
        if expected is not None and expected != n:
            raw.close()
            raise MalformedObject(
                f"object metadata says {expected} bytes, its size says {n}"
            )
        return cipher, n

    def _open_range(self, parsed, context, rng) -> None:
        raw = parsed["Body"]
        meta = parsed.get("Metadata")
        request = context.get("sealstore_request", {})
        start, end, total = _content_range(
            parsed.get("ContentRange"), parsed.get("ContentLength")
        )
        from_meta = M.header_from_metadata(meta)
        try:
            if from_meta is not None:
                header, head = from_meta
            elif start == 0 and end + 1 >= HEADER_SIZE:
                head = read_exactly(raw, HEADER_SIZE)
                start = HEADER_SIZE
                header = parse_object_header(head)
            else:  # no metadata and the range skips the header: fetch it on its own
                header, head = self._fetch_header(request, parsed.get("ETag"))
        except NotSealedObject:
            raw.close()
            if not self.passthrough:
                raise
            # not sealed, passthrough on: ask again for the caller's own range
            resp = self._get_raw(request, parsed.get("ETag"), rng.text)
            for k in ("Body", "ContentLength", "ContentRange"):
                if k in resp:
                    parsed[k] = resp[k]
            return
        cipher, n = self._prepare_open(raw, meta, request, header, total)
        span = rng.resolve(n)
        if span is None:
            raw.close()
            raise invalid_range(rng.text, n)
        if span == ():
            raw.close()
            parsed["Body"] = streaming_body(io.BytesIO(b""), 0, raw)
            _describe(parsed, 200, 0, None)  # S3 answers it whole, not as a range
            return
        plan = plan_range(span[0], span[1], n, header.segment_size, header.tag_size)
        if not (
            start <= plan.start and plan.stop - 1 <= end
        ):  # the layout guess was wrong
            raw.close()
            raw, start, end = (
                self._fetch(request, parsed.get("ETag"), plan.start, plan.stop - 1),
                plan.start,
                plan.stop - 1,
            )
        raw = self._resuming(raw, request, parsed.get("ETag"), start, end)
        reader = OpeningReader(
            cipher,
            Window(raw, plan.start - start, plan.stop - plan.start),
            first_index=plan.first_segment,
            final=plan.final,
            segments=plan.segments,
            skip=plan.skip,
            length=plan.length,
        )
        parsed["Body"] = streaming_body(reader, plan.length, raw)
        _describe(parsed, 206, plan.length, f"bytes {span[0]}-{span[1]}/{n}")

    def _fetch(self, request, etag, first: int, last: int):
        return self._get_raw(request, etag, f"bytes={first}-{last}")["Body"]

    def _get_raw(self, request, etag, text: str) -> dict:
        args = dict(request)
        if etag:
            args["IfMatch"] = etag
        with self.raw() as client:
            return client.get_object(Range=text, **args)

    def _fetch_header(self, request, etag):
        body = self._fetch(request, etag, 0, HEADER_SIZE - 1)
        try:
            head = read_exactly(body, HEADER_SIZE)
        finally:
            body.close()
        return parse_object_header(head), head

    def check_head(self, params, context, **kwargs):
        if self._raw_depth:
            return
        if params.get("Range") or params.get("PartNumber") is not None:
            raise UnsupportedOperation(
                "HeadObject with Range or PartNumber is not supported on an encrypted client"
            )
        context["sealstore_head"] = True
        context["sealstore_request"] = _object_args(params)

    def plaintext_length(self, http_response, parsed, context, **kwargs):
        """HeadObject: report the plaintext length (from the header copy and the stored size)."""
        if (
            not context.get("sealstore_head")
            or not 200 <= http_response.status_code < 300
        ):
            return
        request = context.get("sealstore_request", {})
        try:
            n, header = size_of(
                parsed, lambda: self._fetch_header(request, parsed.get("ETag"))[1]
            )
        except NotSealedObject:
            if self.passthrough:
                return
            raise
        self._remember_layout(request.get("Bucket"), request.get("Key"), header)
        parsed["ContentLength"] = n
        headers = parsed.get("ResponseMetadata", {}).get("HTTPHeaders")
        if headers is not None:
            headers["content-length"] = str(n)


def _describe(parsed, status: int | None, length: int, content_range: str | None) -> None:
    """Give a GetObject response the status, length and range of the plaintext answer, in
    the parsed fields and in the HTTP headers they came from."""
    meta = parsed.setdefault("ResponseMetadata", {})
    headers = meta.setdefault("HTTPHeaders", {})
    if status is not None:
        meta["HTTPStatusCode"] = status
    parsed["ContentLength"] = length
    headers["content-length"] = str(length)
    if content_range is None:
        parsed.pop("ContentRange", None)
        headers.pop("content-range", None)
    else:
        parsed["ContentRange"] = content_range
        headers["content-range"] = content_range


def _part_body(params, part_size: int):
    """(body, plaintext size) of an UploadPart: a str is UTF-8, a stream of unknown size is
    held (at most one part and a byte, so an oversized part is caught)."""
    body = params.get("Body", b"")
    if isinstance(body, str):
        body = body.encode("utf-8")
    size = params.pop("ContentLength", None)
    if size is None:
        size = source_length(body)
    if size is None:
        body = read_exactly(body, part_size + 1)
        size = len(body)
    return body, size


def _part_is_final(state, number: int, size: int) -> bool:
    """Whether part ``number`` of ``size`` bytes ends the object; UnsupportedOperation if it
    does not fit the part size or the declared length."""
    p = state.part_size
    offset = (number - 1) * p
    if size > p:
        raise UnsupportedOperation(f"part {number} holds {size} bytes, more than the part size {p}")
    if state.length is None:
        return size < p
    if offset + size > state.length or (size < p and offset + size != state.length):
        raise UnsupportedOperation(
            f"part {number} ({size} bytes at {offset}) does not fit the declared "
            f"length {state.length}"
        )
    return offset + size == state.length


def _check_parts_tile(state, parts: list) -> tuple[list[int], int]:
    """(numbers of the parts that ended the object, plaintext bytes in all) of a completion's
    part list; UnsupportedOperation unless parts 1..N were all sealed here and only the last
    may end the object."""
    numbers = sorted(int(p["PartNumber"]) for p in parts)
    count = len(numbers)
    if numbers != list(range(1, count + 1)):
        raise UnsupportedOperation(
            "an encrypted multipart upload needs parts numbered 1..N without gaps"
        )
    with state.lock:
        finals = sorted(k for k, f in state.finals.items() if f)
        plain = sum(state.plain.get(k, 0) for k in numbers)
        missing = [k for k in numbers if k not in state.finals]
    if missing:
        raise UnsupportedOperation(f"parts {missing} were not sealed by this client")
    if finals and finals != [count]:
        raise UnsupportedOperation(
            f"part {finals[0]} ended the object but part {count} is the last; "
            "only the last part may be shorter than the part size"
        )
    return finals, plain


def _refuse_no_body(params) -> None:
    """``Body=None``: botocore's own validation error (plain boto3 raises it too), raised here
    because sealing would otherwise see no body, and with validation off nothing would be
    sealed."""
    if "Body" in params and params["Body"] is None:
        raise ParamValidationError(
            report="Invalid type for parameter Body, value: None, type: <class 'NoneType'>, "
            "valid types: <class 'bytes'>, <class 'bytearray'>, file-like object"
        )


def _object_args(params) -> dict:
    return {
        k: params[k]
        for k in (
            "Bucket",
            "Key",
            "VersionId",
            "SSECustomerAlgorithm",
            "SSECustomerKey",
            "RequestPayer",
            "ExpectedBucketOwner",
        )
        if params.get(k)
    }


def _sealed_range(rng, seg: int, tag: int) -> str:
    step = seg + tag
    if rng.suffix is not None:
        if rng.suffix == 0:
            return "bytes=-0"
        return f"bytes=-{(rng.suffix // seg + 2) * step}"
    i0 = rng.first // seg
    start = 0 if i0 == 0 else HEADER_SIZE + i0 * step  # from 0: the header comes along
    if rng.last is None:
        return f"bytes={start}-"
    return f"bytes={start}-{HEADER_SIZE + (rng.last // seg + 1) * step - 1}"


def _content_range(value, length) -> tuple[int, int, int]:
    """``(first, last, total)`` from ``Content-Range: bytes first-last/total``."""
    try:
        unit, _, rest = value.partition(" ")
        span, _, total = rest.partition("/")
        first, _, last = span.partition("-")
        return int(first), int(last), int(total)
    except (AttributeError, ValueError):
        if length is None:
            raise MalformedObject(f"unexpected Content-Range {value!r}") from None
        return 0, length - 1, length


def _check_resent(reader) -> None:
    """Seal a part sent before once locally, sending nothing: NonceReuseRefused now if its
    bytes differ from what was sealed under its nonces, rather than in the middle of the
    request."""
    scratch = memoryview(bytearray(4 << 20))
    while reader.readinto(scratch):
        pass
    reader.seek(0)


def _forward_transfer_signals(reader, body) -> None:
    """s3transfer pauses progress callbacks while botocore signs a body; pass that through."""
    for name in ("signal_transferring", "signal_not_transferring"):
        method = getattr(body, name, None)
        if method is not None:
            setattr(reader, name, method)
