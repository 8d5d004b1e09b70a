"""S3 as a raw :class:`~sealstore.adapters.objects.store.ObjectStore` for the object engine:
the boto3 calls and their errors, translated (404 -> ObjectNotFound, 412 -> ObjectChanged).

``S3Store(client)`` takes a plain boto3 S3 client, or an encrypted one (its calls then run inside
``client.sealstore.raw()``: stored bytes, never sealed twice; ``sealing``: that ``S3Sealing``,
for the store it makes before the client carries it).  Locations are the S3 encoding
objects were always bound with (``location.py``), so the engine opens every object the handlers
wrote and the other way round.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO, cast

from botocore.exceptions import ClientError
from sealstore.errors import ObjectChanged, ObjectNotFound

from ..objects.store import PartLimits, StoredObject, Written
from .large import MAX_SINGLE_REQUEST, copy_multipart
from .location import object_location
from .settings import for_copy, object_settings
from .transfer import MAX_PART, MAX_PARTS, MIN_PART

__all__ = ["S3_LIMITS", "S3Store", "store_from_url", "stored_of"]

S3_LIMITS = PartLimits(min_part=MIN_PART, max_part=MAX_PART, max_parts=MAX_PARTS,
                       max_single=MAX_SINGLE_REQUEST)  # fmt: skip

_MISSING = ("NoSuchKey", "NoSuchBucket", "NotFound", "404", "NoSuchUpload", "NoSuchVersion")
_CHANGED = ("PreconditionFailed", "412", "ConditionalRequestConflict")
#: the fields of a write's answer a CopyObject answer repeats (``Written.answer``)
_ANSWER = ("ServerSideEncryption", "SSEKMSKeyId", "BucketKeyEnabled", "SSECustomerAlgorithm",
           "SSECustomerKeyMD5", "Expiration")  # fmt: skip


def _written(resp: Mapping[str, Any], etag: Any) -> Written:
    version = resp.get("VersionId")
    return Written(
        str(etag), version=None if version in (None, "", "null") else str(version),
        answer={k: resp[k] for k in _ANSWER if resp.get(k) not in (None, "null")},
    )  # fmt: skip


def _translated(exc: ClientError, what: str) -> BaseException:
    code = str(exc.response.get("Error", {}).get("Code"))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in _MISSING or status == 404:
        return ObjectNotFound(f"{what}: not found ({code})")
    if code in _CHANGED or status == 412:
        return ObjectChanged(f"{what}: changed meanwhile ({code})")
    return cast(BaseException, exc)


@contextlib.contextmanager
def _calls(what: str) -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        err = _translated(exc, what)
        if err is exc:
            raise
        raise err from exc


def stored_of(bucket: str, key: str, head: Mapping[str, Any], version: str | None) -> StoredObject:
    """The :class:`StoredObject` a HeadObject response ``head`` describes."""
    return StoredObject(
        bucket, key, head["ContentLength"], head["ETag"],
        {str(k).lower(): v for k, v in (head.get("Metadata") or {}).items()}, version, head,
    )  # fmt: skip


class S3Store:
    """The object-store protocol over a boto3 S3 client."""

    scheme = "s3"
    limits = S3_LIMITS
    #: parts may be uploaded in any order, several at a time (``store.py``)
    parts_in_any_order = True
    #: errors of one object's request that a rotation records as that object's failure
    client_errors: tuple[type[BaseException], ...] = (ClientError,)

    def __init__(self, client: Any, *, sealing: Any = None) -> None:
        self.client = client
        self._sealing = getattr(client, "sealstore", None) if sealing is None else sealing

    def __repr__(self) -> str:
        return f"<S3Store endpoint={getattr(self.client.meta, 'endpoint_url', None)!r}>"

    def _raw(self) -> contextlib.AbstractContextManager[Any]:
        if self._sealing is not None:
            return self._sealing.raw()  # type: ignore[no-any-return]
        return contextlib.nullcontext(self.client)

    def location(self, bucket: str, key: str) -> bytes:
        return object_location(bucket, key)

    def head(
        self,
        bucket: str,
        key: str,
        *,
        version: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> StoredObject:
        args = {"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {}),
                **(options or {})}  # fmt: skip
        with _calls(f"HeadObject {bucket}/{key}"), self._raw() as raw:
            head = raw.head_object(**args)
        return stored_of(bucket, key, head, version)

    def settings(self, obj: StoredObject) -> dict[str, Any]:
        """What a rewrite of ``obj`` repeats (``settings.py``: content headers, storage class,
        server-side encryption, object lock, tags, ACL), as request parameters."""
        head = obj.raw if isinstance(obj.raw, dict) else self.head(obj.bucket, obj.key).raw
        with _calls(f"GetObjectTagging/Acl {obj.bucket}/{obj.key}"), self._raw() as raw:
            return object_settings(raw, obj.bucket, obj.key, head)

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
        args: dict[str, Any] = {"Bucket": bucket, "Key": key, **(options or {})}
        if version:
            args["VersionId"] = version
        if if_match is not None:
            args["IfMatch"] = if_match
        if first or last is not None:
            args["Range"] = f"bytes={first}-{'' if last is None else last}"
        try:
            with _calls(f"GetObject {bucket}/{key}"), self._raw() as raw:
                return raw.get_object(**args)["Body"]  # type: ignore[no-any-return]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return io.BytesIO(b"")  # at or past the end: nothing, as the protocol says
            raise

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
        args: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": body, "ContentLength": length,
                                "Metadata": dict(metadata or {}), **(settings or {}),
                                **(options or {})}  # fmt: skip
        if if_match is not None:
            args["IfMatch"] = if_match
        if if_none_match:
            args["IfNoneMatch"] = "*"
        with _calls(f"PutObject {bucket}/{key}"), self._raw() as raw:
            resp = raw.put_object(**args)
        return _written(resp, resp["ETag"])

    def create_multipart(
        self,
        bucket: str,
        key: str,
        *,
        metadata: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        with _calls(f"CreateMultipartUpload {bucket}/{key}"), self._raw() as raw:
            resp = raw.create_multipart_upload(
                Bucket=bucket, Key=key, Metadata=dict(metadata or {}), **(settings or {}),
                **(options or {}),
            )  # fmt: skip
        return str(resp["UploadId"])

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
        with _calls(f"UploadPart {bucket}/{key}"), self._raw() as raw:
            resp = raw.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body,
                **(options or {}),
            )  # fmt: skip
        return str(resp["ETag"])

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
        done = {**(options or {}), **({} if if_match is None else {"IfMatch": if_match})}
        if if_match is not None and self.head(bucket, key, options=options).etag != if_match:
            # S3 checks IfMatch on completion atomically; moto (5.2) ignores it there, so it is
            # checked first as well: an object replaced before this point is never overwritten
            raise ObjectChanged(f"CompleteMultipartUpload {bucket}/{key}: changed meanwhile")
        listed = [{"PartNumber": n, "ETag": e} for n, e in parts]
        with _calls(f"CompleteMultipartUpload {bucket}/{key}"), self._raw() as raw:
            resp = raw.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed},
                **done,
            )  # fmt: skip
        return _written(resp, resp["ETag"])

    def abort_multipart(
        self, bucket: str, key: str, upload_id: str, *, options: Mapping[str, Any] | None = None
    ) -> None:
        try:
            with self._raw() as raw:
                raw.abort_multipart_upload(  # an abort takes no encryption key
                    Bucket=bucket, Key=key, UploadId=upload_id,
                    **{k: v for k, v in (options or {}).items() if not k.startswith("SSECustomer")},
                )  # fmt: skip
        except ClientError as exc:
            if not isinstance(_translated(exc, ""), ObjectNotFound):
                raise

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
        """CopyObject; above ``limits.max_single`` a multipart copy (UploadPartCopy ranges of
        the stored bytes, each conditional on the source's ETag; ``large.py``)."""
        source = self.head(src_bucket, src_key)
        if if_match is not None and source.etag != if_match:
            # S3 checks CopySourceIfMatch itself; moto (5.2) ignores it, so it is checked first
            raise ObjectChanged(f"CopyObject {src_bucket}/{src_key}: changed meanwhile")
        meta = dict(source.metadata if metadata is None else metadata)
        if source.size > self.limits.max_single:
            same = (src_bucket, src_key) == (dst_bucket, dst_key)
            with _calls(f"UploadPartCopy {src_bucket}/{src_key}"), self._raw() as raw:
                copy_multipart(
                    raw, {"Bucket": src_bucket, "Key": src_key}, dst_bucket, dst_key,
                    source.size, metadata=meta, extra=dict(settings or {}),
                    source_if_match=if_match or source.etag,
                    if_match=(if_match or source.etag) if same else None,
                )  # fmt: skip
            return self.head(dst_bucket, dst_key).etag
        args: dict[str, Any] = {
            "Bucket": dst_bucket,
            "Key": dst_key,
            "CopySource": {"Bucket": src_bucket, "Key": src_key},
            "CopySourceIfMatch": if_match or source.etag,
            **for_copy(dict(settings or {})),
        }
        if metadata is not None:
            args["MetadataDirective"] = "REPLACE"
            args["Metadata"] = meta
        with _calls(f"CopyObject {src_bucket}/{src_key}"), self._raw() as raw:
            resp = raw.copy_object(**args)
        return _written(resp, resp["CopyObjectResult"]["ETag"])

    def list(
        self, bucket: str, prefix: str = "", *, start_after: str | None = None
    ) -> Iterator[StoredObject]:
        args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if start_after:
            args["StartAfter"] = start_after
        token = None
        while True:  # one page at a time, each fetched raw (callers work between pages)
            with _calls(f"ListObjectsV2 {bucket}/{prefix}"), self._raw() as raw:
                page = raw.list_objects_v2(
                    **args, **({"ContinuationToken": token} if token else {})
                )
            for item in page.get("Contents", []):
                yield StoredObject(bucket, item["Key"], item["Size"], item["ETag"])
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def versions(self, bucket: str, prefix: str = "") -> Iterator[StoredObject]:
        """Current and noncurrent versions, those behind a delete marker included (delete
        markers hold no body).  Unversioned buckets list each object once, as version
        ``null``: the current ``null`` version is named without a version id (not every S3
        implementation takes ``null``)."""
        with self._raw() as raw:
            paginator = raw.get_paginator("list_object_versions")
        with _calls(f"ListObjectVersions {bucket}/{prefix}"):
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for obj in page.get("Versions", []):
                    version = obj.get("VersionId")
                    if version == "null" and obj.get("IsLatest"):
                        version = None
                    yield StoredObject(bucket, obj["Key"], obj["Size"], obj["ETag"], {}, version)

    def delete(self, bucket: str, key: str) -> None:
        with _calls(f"DeleteObject {bucket}/{key}"), self._raw() as raw:
            raw.delete_object(Bucket=bucket, Key=key)


def store_from_url(
    url: Any, *, endpoint_url: str | None = None, region: str | None = None
) -> S3Store:
    """The store for an ``s3://`` URL (``sealstore.adapters.objects.stores``): a boto3 client
    from the environment's configuration (``AWS_*`` variables, profiles), at ``endpoint_url``
    in ``region`` when given."""
    import boto3

    return S3Store(boto3.client("s3", endpoint_url=endpoint_url, region_name=region))
