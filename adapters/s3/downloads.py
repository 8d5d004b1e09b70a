"""The download side of :class:`~sealstore.adapters.s3.handlers.S3Sealing`: GetObject (whole or
ranged, resumed when a body is cut short) and HeadObject, answered in plaintext terms."""

from __future__ import annotations

from typing import Any

import io
import logging

from botocore.exceptions import ClientError
from sealstore.errors import (
    MalformedObject,
    NotSealedObject,
    UnsupportedOperation,
)
from sealstore.stream import HEADER_SIZE, parse_object_header

from ..objects import metadata as M
from ..objects.engine import body_header, opened_span, opened_whole, plan_span, read_exactly
from ..objects.ranges import parse_range
from ..objects.ranges import sealed_range as _sealed_range
from ..objects.sizes import plaintext_of
from .sealing_state import SealingState
from .body import (
    Prepended,
    Resuming,
    invalid_range,
    streaming_body,
)
from .sizes import size_of

__all__ = ["DownloadHandlers"]

log: logging.Logger = logging.getLogger(__name__)


class DownloadHandlers(SealingState):
    """GetObject and HeadObject handlers (a mixin of S3Sealing: it uses its keyring, raw() and layout cache)."""

    def map_range(self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
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
        if self.tenancy is not None:  # no tenant, or two that disagree: refused before the GET
            self.tenancy.tenant_for(params.get("Bucket"), params.get("Key"))
        context["sealstore_get"] = True
        context["sealstore_request"] = _object_args(params)
        text = params.get("Range")
        if not text:
            return
        rng = parse_range(text)
        seg, tag = self._layout_guess(params.get("Bucket"), params.get("Key"))
        context["sealstore_range"] = rng
        params["Range"] = _sealed_range(rng, seg, tag)

    def open_body(
        self,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **kwargs: Any,
    ) -> None:
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
            n, header = size_of(head, lambda: self._fetch_header(request, head.get("ETag"))[1])
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
            header = body_header(head, None if from_meta is None else from_meta[1])
        except BaseException:
            raw.close()
            raise
        if header is None:
            if self.passthrough:
                parsed["Body"] = streaming_body(Prepended(head, raw), size, raw, verified=False)
                self._passed_through(parsed, context)
                return
            raw.close()
            parse_object_header(head)  # raises NotSealedObject, saying why
        request = context.get("sealstore_request", {})
        cipher, n = self._prepare_open(raw, meta, request, header, size)
        body = self._resuming(raw, request, parsed.get("ETag"), HEADER_SIZE, size - 1)
        parsed["Body"] = streaming_body(opened_whole(cipher, body), n, body)
        _describe(parsed, None, n, None)

    def _passed_through(self, parsed: dict[str, Any], context: dict[str, Any]) -> None:
        """Mark a GetObject answer that was not sealed (``passthrough=True``) and say so: its
        bytes are returned as stored, unauthenticated."""
        parsed["SealstoreSealed"] = False
        request = context.get("sealstore_request", {})
        log.warning(
            "GetObject %s/%s: not a sealstore object, returned as stored (passthrough=True): "
            "NOT authenticated, anyone with write access to the bucket could have written it",
            request.get("Bucket"), request.get("Key"),
        )  # fmt: skip

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
            cipher = self.engine.opener(
                self.store, request.get("Bucket"), request.get("Key"), header,
                allow_retired=self.allow_retired or getattr(self._local, "retired", False),
            )  # fmt: skip
        except BaseException:  # WrongLocation, KeyCommitmentMismatch...: nothing will be read
            raw.close()
            raise
        self._remember_layout(request.get("Bucket"), request.get("Key"), header)
        try:
            n = plaintext_of(meta, stored_size, header)
        except MalformedObject:
            raw.close()
            raise
        log.debug(
            "GetObject %s/%s: opening under key %s (%d plaintext bytes)",
            request.get("Bucket"), request.get("Key"), header.key_id_hex, n,
        )  # fmt: skip
        return cipher, n

    def _open_range(self, parsed, context, rng) -> None:
        raw = parsed["Body"]
        meta = parsed.get("Metadata")
        request = context.get("sealstore_request", {})
        start, end, total = _content_range(parsed.get("ContentRange"), parsed.get("ContentLength"))
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
            body = parsed["Body"]
            parsed["Body"] = streaming_body(body, parsed["ContentLength"], body, verified=False)
            self._passed_through(parsed, context)
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
        plan = plan_span(header, span[0], span[1], n)
        if not (start <= plan.start and plan.stop - 1 <= end):  # the layout guess was wrong
            raw.close()
            raw, start, end = (
                self._fetch(request, parsed.get("ETag"), plan.start, plan.stop - 1),
                plan.start,
                plan.stop - 1,
            )
        raw = self._resuming(raw, request, parsed.get("ETag"), start, end)
        reader = opened_span(cipher, raw, plan, skip=plan.start - start)
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

    def check_head(self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        if self._raw_depth:
            return
        if params.get("Range") or params.get("PartNumber") is not None:
            raise UnsupportedOperation(
                "HeadObject with Range or PartNumber is not supported on an encrypted client"
            )
        context["sealstore_head"] = True
        context["sealstore_request"] = _object_args(params)

    def plaintext_length(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **kwargs: Any
    ) -> None:
        """HeadObject: report the plaintext length (from the header copy and the stored size)."""
        if not context.get("sealstore_head") or not 200 <= http_response.status_code < 300:
            return
        request = context.get("sealstore_request", {})
        try:
            n, header = size_of(parsed, lambda: self._fetch_header(request, parsed.get("ETag"))[1])
        except NotSealedObject:
            if self.passthrough:
                parsed["SealstoreSealed"] = False
                return
            raise
        self._remember_layout(request.get("Bucket"), request.get("Key"), header)
        parsed["SealstoreSealed"] = True
        parsed["ContentLength"] = n
        headers = parsed.get("ResponseMetadata", {}).get("HTTPHeaders")
        if headers is not None:
            headers["content-length"] = str(n)


def _describe(parsed, status: int | None, length: int, content_range: str | None) -> None:
    """Give a GetObject response the status, length and range of the plaintext answer, in
    the parsed fields and in the HTTP headers they came from."""
    parsed["SealstoreSealed"] = True  # opened: every byte returned is verified
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
