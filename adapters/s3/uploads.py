"""The upload side of :class:`~sealstore.adapters.s3.handlers.S3Sealing`: PutObject and the
multipart calls, sealed in the calling (worker) thread; a part number sent again must carry the
same bytes (docs/S3.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import logging
import os
import threading

from botocore.exceptions import ParamValidationError
from sealstore.errors import (
    UnsupportedOperation,
)
from sealstore.segment_log import SegmentLog
from sealstore.stream import source_length

from ..objects import metadata as M
from ..objects.engine import SPOOL_MEMORY, read_exactly, sealed_body, sealed_part, spooled
from ..objects.parts import check_parts_tile, part_ends_object
from .sealing_state import SealingState

if TYPE_CHECKING:
    from sealstore.stream import ObjectCipher

__all__ = ["SPOOL_MEMORY", "UploadHandlers"]

log: logging.Logger = logging.getLogger(__name__)

#: Sealed bodies of unknown length are spooled; this much stays in memory, the rest on disk.
_CHECKSUM_PARAMS = ("ChecksumAlgorithm", "ChecksumType")


class _Upload:
    """State of one multipart upload: its object key, part size, which parts went up and what
    was sealed under each segment nonce (a part sent again must hold the same bytes)."""

    __slots__ = ("cipher", "finals", "length", "lock", "log", "part_size", "pid", "plain")

    def __init__(self, cipher: ObjectCipher, part_size: int, length: int | None) -> None:
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


class UploadHandlers(SealingState):
    """PutObject and multipart handlers (a mixin of S3Sealing: it uses its keyring, raw() and locks)."""

    def seal_put_object(self, params: dict[str, Any], **kwargs: Any) -> None:
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
            raise UnsupportedOperation("ContentLength and Metadata sealstore-length disagree")
        length = declared if declared is not None else given
        body = params.get("Body", b"")
        if isinstance(body, str):
            body = body.encode("utf-8")
        cipher = self.engine.new_cipher(self.store, params.get("Bucket"), params.get("Key"))
        out, size = sealed_body(cipher, body, length)
        if length is None:
            length = cipher.plaintext_size(size)
        _forward_transfer_signals(out, body)
        params["Body"] = out
        params["ContentLength"] = size
        params["Metadata"] = {**meta, **M.object_metadata(cipher.header, length)}
        log.debug(
            "PutObject %s/%s: sealed under key %s (%d plaintext, %d stored bytes)",
            params.get("Bucket"), params.get("Key"), cipher.header.key_id_hex, length, size,
        )  # fmt: skip

    def start_multipart(
        self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any
    ) -> None:
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
        cipher = self.engine.new_cipher(self.store, params.get("Bucket"), params.get("Key"))
        context["sealstore_upload"] = _Upload(cipher, part_size, length)
        params["Metadata"] = {**meta, **M.object_metadata(cipher.header, length)}
        log.debug(
            "CreateMultipartUpload %s/%s: sealing under key %s, parts of %d bytes",
            params.get("Bucket"), params.get("Key"), cipher.header.key_id_hex, part_size,
        )  # fmt: skip

    def remember_multipart(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **kwargs: Any
    ) -> None:
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

    def seal_part(self, params: dict[str, Any], **kwargs: Any) -> None:
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
        final = part_ends_object(number, size, state.part_size, state.length)
        reader: Any = sealed_part(
            state.cipher, body, size, number, state.part_size, final=final, log=state.log
        )
        with state.lock:
            again = number in state.finals
        if again and reader.seekable():
            _check_resent(reader)
        if not reader.seekable():
            reader, sealed = spooled(reader, SPOOL_MEMORY)
        else:
            sealed = len(reader)
        with state.lock:
            state.finals[number] = final
            state.plain[number] = size
        _forward_transfer_signals(reader, body)
        params["Body"] = reader
        params["ContentLength"] = sealed

    def finish_multipart(
        self, params: dict[str, Any], context: dict[str, Any], **kwargs: Any
    ) -> None:
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
        with state.lock:
            finals, plain = check_parts_tile(
                (int(p["PartNumber"]) for p in parts), dict(state.finals), dict(state.plain)
            )
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
        body = sealed_part(
            state.cipher, b"", 0, count + 1, state.part_size, final=True, log=state.log
        ).read()
        # the upload's SSE-C key and request extras: S3 refuses a part of an SSE-C upload without
        extra = {k: params[k] for k in ("SSECustomerAlgorithm", "SSECustomerKey",
                                        "SSECustomerKeyMD5", "RequestPayer",
                                        "ExpectedBucketOwner") if params.get(k)}  # fmt: skip
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
    def note_upload_id(params: dict[str, Any], context: dict[str, Any], **kwargs: Any) -> None:
        """botocore's before-call handler: keeps the upload id for :meth:`forget_multipart`."""
        context["sealstore_upload_id"] = params.get("UploadId")

    def forget_multipart(
        self,
        http_response: Any,
        params: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not 200 <= http_response.status_code < 300:
            return
        upload_id = (context or {}).get("sealstore_upload_id")
        if upload_id is not None:
            with self._lock:
                self._uploads.pop(upload_id, None)


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


def _refuse_no_body(params) -> None:
    """``Body=None``: botocore's own validation error (plain boto3 raises it too), raised here
    because sealing would otherwise see no body, and with validation off nothing would be
    sealed."""
    if "Body" in params and params["Body"] is None:
        raise ParamValidationError(
            report="Invalid type for parameter Body, value: None, type: <class 'NoneType'>, "
            "valid types: <class 'bytes'>, <class 'bytearray'>, file-like object"
        )


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
