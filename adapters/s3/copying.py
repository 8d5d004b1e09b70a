"""Copies through an encrypted client: re-sealed to the destination, which they are bound to.

A bound object's key depends on its bucket and key (``location.py``), so S3's server-side
``CopyObject``/``UploadPartCopy`` would leave a destination that does not open there.  Through
an encrypted client, a copy is instead the object engine's (``ObjectSealing.copy``: the source's
plaintext read verified and sealed to the destination, in one request up to
``engine.SINGLE_COPY`` plaintext bytes, above in parts sent by a few threads; every read
conditional on the source's ETag, a failure aborting the upload), and a part copy the engine's
``open`` of the range, sealed into the part by this client's UploadPart.  This module keeps the
S3 request and answer shapes: the source's HEAD under the caller's conditions, the destination's
metadata, tags and settings by CopyObject's rules, the per-request extras (SSE-C keys,
``RequestPayer``, ``ExpectedBucketOwner``) passed to the engine as the store's ``options``.

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

from ..objects import metadata as M
from ..objects.engine import SINGLE_COPY, copy_takes_parts, must_reseal
from ..objects.ranges import part_copy_span
from ..objects.store import StoredObject, Written
from . import large
from .store import stored_of

__all__ = ["copy_source", "reseal_copy", "reseal_part_copy"]

log: logging.Logger = logging.getLogger(__name__)

# CopyObject parameters that describe the source or the copy itself, not the destination
_SOURCE_CONDITIONS = {"CopySourceIfMatch": "IfMatch", "CopySourceIfNoneMatch": "IfNoneMatch",
                      "CopySourceIfModifiedSince": "IfModifiedSince",
                      "CopySourceIfUnmodifiedSince": "IfUnmodifiedSince"}  # fmt: skip
_SOURCE_SSE = {"CopySourceSSECustomerAlgorithm": "SSECustomerAlgorithm",
               "CopySourceSSECustomerKey": "SSECustomerKey",
               "CopySourceSSECustomerKeyMD5": "SSECustomerKeyMD5"}  # fmt: skip
#: a request's extras every request of the write repeats (the store's ``options``)
_PER_REQUEST = ("SSECustomerAlgorithm", "SSECustomerKey", "SSECustomerKeyMD5", "RequestPayer",
                "ExpectedBucketOwner")  # fmt: skip
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


def _options(args: dict[str, Any]) -> dict[str, Any]:
    """The store's ``options`` of a request reading the source ``args`` names."""
    return {k: v for k, v in args.items() if k not in ("Bucket", "Key", "VersionId")}


def _source(sealing: Any, params: dict[str, Any]) -> Any:
    """(source arguments, the source as its HEAD under the caller's conditions saw it, its
    header and plaintext size, or None, None when it is not sealed)."""
    args, conditions = _source_args(params)
    with sealing.raw() as raw:
        head = raw.head_object(**args, **conditions)
    obj = stored_of(args["Bucket"], args["Key"], head, args.get("VersionId"))
    found = sealing.engine.header(sealing.store, obj, options=_options(args))
    if found is None:
        return args, obj, None, None
    return args, obj, found[0], sealing.engine.plaintext_size(obj, found[0])


def _response(parsed: dict[str, Any], status: int = 200) -> Any:
    meta = parsed.setdefault("ResponseMetadata", {})
    meta.update({"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0})
    return AWSResponse("", status, {}, None), parsed


def reseal_copy(sealing: Any, params: dict[str, Any]) -> Any:
    """Answer a CopyObject by re-sealing (``(http, parsed)`` for botocore), or None to let S3
    copy the bytes (a source that is not sealed, unbound with binding off, or bound and copied
    onto itself)."""
    args, obj, header, n = _source(sealing, params)
    head = obj.raw
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
    options = {k: extra.pop(k) for k in _PER_REQUEST if k in extra}
    if_match, if_none_match = extra.pop("IfMatch", None), extra.pop("IfNoneMatch", None)
    if copy_takes_parts(n, sealing.store):
        create = sealing.client.meta.service_model.operation_model("CreateMultipartUpload")
        members = create.input_shape.members
        unsupported = sorted(k for k in extra if k not in members or k == "ChecksumAlgorithm")
        if unsupported:
            raise UnsupportedOperation(
                f"a copy above {SINGLE_COPY} bytes is a multipart upload, which takes no "
                f"{', '.join(unsupported)}"
            )
    written = sealing.engine.copy(
        sealing.store, args["Bucket"], args["Key"], bucket, key, head=obj, metadata=meta,
        settings=extra, options=options, source_options=_options(args), if_match=if_match,
        if_none_match=if_none_match is not None,
    )  # fmt: skip
    return _response(_copy_result(sealing, head, bucket, key, written, options))


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


def _copy_result(
    sealing: Any,
    head: dict[str, Any],
    bucket: str,
    key: str,
    written: Written,
    options: dict[str, Any],
) -> dict[str, Any]:
    target = {"Bucket": bucket, "Key": key, **options}
    if written.version is not None:
        target["VersionId"] = written.version
    with sealing.raw() as raw:
        modified = raw.head_object(**target).get("LastModified")
    out: dict[str, Any] = {"CopyObjectResult": {"ETag": written.etag, "LastModified": modified}}
    if written.version is not None:
        out["VersionId"] = written.version
    out.update(written.answer)
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
    args, obj, header, n = _source(sealing, params)
    head = obj.raw
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
    data = _read(sealing, args, obj, first, last) if total else b""
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


def _read(sealing: Any, args: dict[str, Any], obj: StoredObject, first: int, last: int) -> bytes:
    """Plaintext bytes ``first..last`` of the source (verified; passed through as stored when
    it is not sealed and the client passes such objects through)."""
    opened = sealing.engine.open(sealing.store, obj.bucket, obj.key, first=first, last=last,
                                 head=obj, options=_options(args))  # fmt: skip
    try:
        data: bytes = opened.read()
    finally:
        opened.close()
    if len(data) != last - first + 1:
        raise UnsupportedOperation(f"the copy source gave {len(data)} of bytes {first}-{last}")
    return data
