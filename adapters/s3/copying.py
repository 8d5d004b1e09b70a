"""Copies through an encrypted client: re-sealed to the destination, which they are bound to.

A bound object's key depends on its bucket and key (``location.py``), so S3's server-side
``CopyObject``/``UploadPartCopy`` would leave a destination that does not open there.  Through
an encrypted client, a copy instead reads the source's plaintext through the client (verified,
segment by segment) and seals it to the destination:

* up to :data:`SINGLE_COPY` plaintext bytes, one GET and one PUT (the plaintext in memory);
* above, a multipart upload whose parts (:data:`COPY_PART` plaintext bytes, rounded to whole
  segments) are ranged GETs sealed and sent by :data:`COPY_WORKERS` threads, so memory stays at
  a few parts whatever the size;
* every GET is conditional on the source ETag read first, so a source changed during the copy
  fails the copy instead of mixing two versions; a failure aborts the upload.

Only an unbound source copied by a client that does not bind (``bind_location=False``), a bound
object copied onto itself (same bucket and key), or an object that is not sealed, is still
copied by S3 byte for byte (above 5 GiB as a multipart
copy of the sealed bytes).  Metadata and headers follow CopyObject's rules: with
``MetadataDirective=COPY`` (the default) the source's user metadata and content headers, with
``REPLACE`` the request's; tags follow ``TaggingDirective`` the same way; every other
destination setting (storage class, SSE, ACL, object lock, ...) is the request's, as for S3.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any
from urllib.parse import unquote, urlencode

from botocore.awsrequest import AWSResponse
from sealstore.errors import NotSealedObject, UnsupportedOperation
from sealstore.stream import HEADER_SIZE

from ..objects import metadata as M
from ..objects.engine import copy_in_parts, must_reseal
from ..objects.ranges import part_copy_span
from . import large
from .body import read_exactly
from .sizes import size_of
from .transfer import part_size

__all__ = ["COPY_PART", "COPY_WORKERS", "SINGLE_COPY", "copy_source", "reseal_copy",
           "reseal_part_copy"]  # fmt: skip

log: logging.Logger = logging.getLogger(__name__)

#: Plaintext bytes up to which a copy is one GET and one PUT.
SINGLE_COPY = 16 << 20
#: Plaintext bytes per part of a larger copy (each held in memory by one worker).
COPY_PART = 16 << 20
COPY_WORKERS = 4

# CopyObject parameters that describe the source or the copy itself, not the destination
_SOURCE_CONDITIONS = {"CopySourceIfMatch": "IfMatch", "CopySourceIfNoneMatch": "IfNoneMatch",
                      "CopySourceIfModifiedSince": "IfModifiedSince",
                      "CopySourceIfUnmodifiedSince": "IfUnmodifiedSince"}  # fmt: skip
_SOURCE_SSE = {"CopySourceSSECustomerAlgorithm": "SSECustomerAlgorithm",
               "CopySourceSSECustomerKey": "SSECustomerKey",
               "CopySourceSSECustomerKeyMD5": "SSECustomerKeyMD5"}  # fmt: skip
_NOT_DESTINATION = {"Bucket", "Key", "Body", "Metadata", "MetadataDirective", "Tagging",
                    "TaggingDirective", "ContentLength", "ContentMD5"}  # fmt: skip


def copy_source(source: Any) -> dict[str, Any]:
    """``{"Bucket", "Key"[, "VersionId"]}`` from a CopySource dict or ``bucket/key?versionId=``."""
    if isinstance(source, dict):
        return {k: v for k, v in source.items() if k in ("Bucket", "Key", "VersionId")}
    text = str(source).lstrip("/")
    text, _, query = text.partition("?")
    bucket, _, key = text.partition("/")
    out = {"Bucket": unquote(bucket), "Key": unquote(key)}
    if query.startswith("versionId="):
        out["VersionId"] = unquote(query[len("versionId=") :])
    return out


def _source_args(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(arguments naming and reading the source, its caller's conditions)."""
    args = copy_source(params["CopySource"])
    for name, target in _SOURCE_SSE.items():
        if params.get(name):
            args[target] = params[name]
    if params.get("ExpectedSourceBucketOwner"):
        args["ExpectedBucketOwner"] = params["ExpectedSourceBucketOwner"]
    if params.get("RequestPayer"):
        args["RequestPayer"] = params["RequestPayer"]
    conditions = {t: params[n] for n, t in _SOURCE_CONDITIONS.items() if params.get(n)}
    return args, conditions


def _source(sealing: Any, params: dict[str, Any]) -> Any:
    """(source arguments, HEAD of the source, its header and plaintext size, or None, None when
    it is not sealed)."""
    args, conditions = _source_args(params)
    with sealing.raw() as raw:
        head = raw.head_object(**args, **conditions)

    def fetch_header() -> bytes:
        with sealing.raw() as raw:
            body = raw.get_object(Range=f"bytes=0-{HEADER_SIZE - 1}", IfMatch=head["ETag"], **args)[
                "Body"
            ]
        try:
            return read_exactly(body, HEADER_SIZE)
        finally:
            body.close()

    try:
        n, header = size_of(head, fetch_header)
    except NotSealedObject:
        return args, head, None, None
    return args, head, header, n


def _response(parsed: dict[str, Any], status: int = 200) -> Any:
    meta = parsed.setdefault("ResponseMetadata", {})
    meta.update({"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0})
    return AWSResponse("", status, {}, None), parsed


def reseal_copy(sealing: Any, params: dict[str, Any]) -> Any:
    """Answer a CopyObject by re-sealing (``(http, parsed)`` for botocore), or None to let S3
    copy the bytes (a source that is not sealed, unbound with binding off, or bound and copied
    onto itself)."""
    args, head, header, n = _source(sealing, params)
    same_place = (args["Bucket"], args["Key"]) == (params["Bucket"], params["Key"])
    if not must_reseal(header, same_place=same_place, bind_location=sealing.bind_location,
                       tenanted=sealing.tenancy is not None):  # fmt: skip
        if header is not None and head["ContentLength"] > large.MAX_SINGLE_REQUEST:
            return _byte_copy_large(sealing, params, args, head)
        return None
    meta, extra = _destination(sealing, params, args, head)
    bucket, key = params["Bucket"], params["Key"]
    log.debug(
        "CopyObject %s/%s -> %s/%s: re-sealed through the client (%d plaintext bytes)",
        args["Bucket"], args["Key"], bucket, key, n,
    )  # fmt: skip
    if n <= SINGLE_COPY:
        put = _copy_whole(sealing, args, head, bucket, key, meta, extra, n)
    else:
        put = _copy_parts(sealing, args, head, bucket, key, meta, extra, n)
    return _response(_copy_result(sealing, head, bucket, key, put))


def _destination(
    sealing: Any, params: dict[str, Any], args: dict[str, Any], head: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(user metadata, other PutObject arguments) of the destination, by CopyObject's rules."""
    put_members = sealing.client.meta.service_model.operation_model("PutObject").input_shape.members
    extra = {k: v for k, v in params.items()
             if k in put_members and k not in _NOT_DESTINATION
             and (k == "ChecksumAlgorithm" or not k.startswith("Checksum"))}  # fmt: skip
    if params.get("MetadataDirective", "COPY") == "REPLACE":
        meta = dict(params.get("Metadata") or {})
        M.reject_reserved(meta)
    else:
        meta = M.split_user_metadata(head.get("Metadata"))
        extra = {k: v for k, v in extra.items() if k not in M.KEPT_HEADERS}
        extra.update(M.kept_headers(head))
    if params.get("TaggingDirective", "COPY") == "REPLACE":
        if params.get("Tagging"):
            extra["Tagging"] = params["Tagging"]
    else:
        tag_args = {k: v for k, v in args.items() if k in ("Bucket", "Key", "VersionId",
                                                             "ExpectedBucketOwner")}  # fmt: skip
        with sealing.raw() as raw:
            tags = raw.get_object_tagging(**tag_args).get("TagSet") or []
        if tags:
            extra["Tagging"] = urlencode([(t["Key"], t["Value"]) for t in tags])
    return meta, extra


def _read(
    sealing: Any,
    args: dict[str, Any],
    head: dict[str, Any],
    first: int | None = None,
    last: int | None = None,
) -> bytes:
    rng = {} if first is None else {"Range": f"bytes={first}-{last}"}
    body = sealing.client.get_object(IfMatch=head["ETag"], **args, **rng)["Body"]
    try:
        data: bytes = body.read()
        return data
    finally:
        body.close()


def _copy_whole(
    sealing: Any,
    args: dict[str, Any],
    head: dict[str, Any],
    bucket: str,
    key: str,
    meta: dict[str, str],
    extra: dict[str, Any],
    n: int,
) -> dict[str, Any]:
    data = _read(sealing, args, head) if n else b""
    if len(data) != n:
        raise UnsupportedOperation(f"the copy source gave {len(data)} of its {n} bytes")
    put: dict[str, Any] = sealing.client.put_object(
        Bucket=bucket, Key=key, Body=data, Metadata=meta, **extra
    )
    return put


def _copy_parts(
    sealing: Any,
    args: dict[str, Any],
    head: dict[str, Any],
    bucket: str,
    key: str,
    meta: dict[str, str],
    extra: dict[str, Any],
    n: int,
) -> dict[str, Any]:
    client = sealing.client
    size = part_size(n, COPY_PART, sealing.segment_size)
    create_members = client.meta.service_model.operation_model(
        "CreateMultipartUpload"
    ).input_shape.members
    done = {k: extra.pop(k) for k in ("IfMatch", "IfNoneMatch") if k in extra}
    sse_c = {k: v for k, v in extra.items() if k.startswith("SSECustomer")}
    unsupported = sorted(k for k in extra if k not in create_members or k == "ChecksumAlgorithm")
    if unsupported:
        raise UnsupportedOperation(
            f"a copy above {SINGLE_COPY} bytes is a multipart upload, which takes no "
            f"{', '.join(unsupported)}"
        )
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, Metadata={**meta, M.PART_SIZE: str(size), M.LENGTH: str(n)},
        **extra,
    )  # fmt: skip
    upload_id = upload["UploadId"]

    def send(number: int, data: bytes) -> str:  # sealed by this client's handlers
        resp = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                  PartNumber=number, Body=data, **sse_c)  # fmt: skip
        return str(resp["ETag"])

    try:
        parts = copy_in_parts(
            n, size, lambda first, last: _read(sealing, args, head, first, last), send,
            workers=COPY_WORKERS,
        )  # fmt: skip
        listed = [{"PartNumber": number, "ETag": etag} for number, etag in parts]
        result: dict[str, Any] = client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}, **done
        )  # fmt: skip
        return result
    except BaseException:
        try:
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception:  # noqa: BLE001, S110 - the original error is the one to report
            pass
        raise


def _copy_result(
    sealing: Any, head: dict[str, Any], bucket: str, key: str, put: dict[str, Any]
) -> dict[str, Any]:
    target = {"Bucket": bucket, "Key": key}
    if put.get("VersionId") not in (None, "", "null"):  # "null": an unversioned object
        target["VersionId"] = put["VersionId"]
    with sealing.raw() as raw:
        modified = raw.head_object(**target).get("LastModified")
    out = {"CopyObjectResult": {"ETag": put["ETag"], "LastModified": modified}}
    for name in ("VersionId", "ServerSideEncryption", "SSEKMSKeyId", "BucketKeyEnabled",
                 "SSECustomerAlgorithm", "SSECustomerKeyMD5", "Expiration"):  # fmt: skip
        if put.get(name) not in (None, "null"):
            out[name] = put[name]
    if head.get("VersionId"):
        out["CopySourceVersionId"] = head["VersionId"]
    return out


def _byte_copy_large(
    sealing: Any, params: dict[str, Any], args: dict[str, Any], head: dict[str, Any]
) -> Any:
    """An unbound sealed object above 5 GiB with binding off: a multipart copy of its bytes."""
    extra = {k: v for k, v in params.items()
             if k not in ("Bucket", "Key", "Metadata", "MetadataDirective", "ExpectedSourceBucketOwner")
             and not k.startswith("CopySource")}  # fmt: skip
    if params.get("MetadataDirective", "COPY") == "REPLACE":
        meta = dict(params.get("Metadata") or {})
        M.reject_reserved(meta)
    else:
        meta = M.split_user_metadata(head.get("Metadata"))
        extra = {**extra, **M.kept_headers(head)}
    meta = {**meta, **M.sealstore_fields(head.get("Metadata"))}
    with sealing.raw() as raw:
        allowed = raw.meta.service_model.operation_model(
            "CreateMultipartUpload"
        ).input_shape.members
        unsupported = sorted(k for k in extra if k not in allowed)
        if unsupported:
            raise UnsupportedOperation(
                "copying a sealed object above 5 GiB is a multipart copy, which takes no "
                f"{', '.join(unsupported)}"
            )
        large.copy_multipart(
            raw, copy_source(params["CopySource"]), params["Bucket"], params["Key"],
            head["ContentLength"], metadata=meta, extra=extra, source_if_match=head["ETag"],
        )  # fmt: skip
        modified = raw.head_object(Bucket=params["Bucket"], Key=params["Key"])
    return _response({"CopyObjectResult": {"ETag": modified["ETag"],
                                           "LastModified": modified.get("LastModified")}})  # fmt: skip


def reseal_part_copy(sealing: Any, params: dict[str, Any], part_size_: int) -> Any:
    """Answer an UploadPartCopy: the source's plaintext range (``CopySourceRange`` in
    plaintext bytes, or the whole object) read through the client and sent as the part."""
    args, head, header, n = _source(sealing, params)
    if header is None and not sealing.passthrough:
        raise NotSealedObject("the UploadPartCopy source is not a sealstore object")
    if header is None:
        log.warning(
            "UploadPartCopy %s/%s -> %s/%s: the source is not a sealstore object; its stored "
            "bytes are sealed into the part (passthrough=True): they were NOT authenticated",
            args["Bucket"], args["Key"], params["Bucket"], params["Key"],
        )  # fmt: skip
    total = head["ContentLength"] if header is None else n
    first, last = part_copy_span(params.get("CopySourceRange"), total, part_size_)
    data = _read(sealing, args, head, first, last) if total else b""
    sse_c = {k: params[k] for k in ("SSECustomerAlgorithm", "SSECustomerKey",
                                    "SSECustomerKeyMD5", "RequestPayer",
                                    "ExpectedBucketOwner") if params.get(k)}  # fmt: skip
    resp = sealing.client.upload_part(
        Bucket=params["Bucket"], Key=params["Key"], UploadId=params["UploadId"],
        PartNumber=params["PartNumber"], Body=data, **sse_c,
    )  # fmt: skip
    now = datetime.datetime.now(datetime.timezone.utc)
    out = {"CopyPartResult": {"ETag": resp["ETag"], "LastModified": now}}
    if head.get("VersionId"):
        out["CopySourceVersionId"] = head["VersionId"]
    return _response(out)
