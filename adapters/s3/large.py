"""Objects above S3's single-request limit: multipart copy.

``CopyObject`` takes at most 5 GiB.  Rotation puts an object's lost metadata back with a copy
onto itself (``S3Store.copy``), and a copy of an unbound object by a client that does not bind
copies sealed bytes server-side (``copying.py``; other copies are re-sealed); above that size
these go through a multipart copy instead, with the same guarantees (re-sealing above it is the
engine's multipart upload, ``objects/engine.py``):

* :func:`copy_multipart` copies an object's sealed bytes as they are, in consecutive ranges
  (``UploadPartCopy`` on the raw client), so the copy is byte for byte the source, each range
  conditional on the source's ETag.  Metadata, which a multipart copy does not carry over, is
  given by the caller.

Either way a failure aborts the upload: nothing is left half-written.
"""

from __future__ import annotations

from typing import Any

from .transfer import MAX_PARTS, MIN_PART

__all__ = ["MAX_SINGLE_REQUEST", "copy_multipart"]

MAX_SINGLE_REQUEST = 5 << 30  # PutObject body, CopyObject source
COPY_PART = 1 << 30  # sealed bytes per UploadPartCopy (server-side, nothing held)


def copy_multipart(
    raw: Any,
    source: dict[str, Any],
    bucket: str,
    key: str,
    size: int,
    *,
    metadata: dict[str, str],
    extra: dict[str, Any],
    source_if_match: str | None,
    if_match: str | None = None,
) -> None:
    """Copy the ``size`` sealed bytes of ``source`` ({"Bucket", "Key"[, "VersionId"]}) to
    ``bucket/key`` unchanged, with ``metadata``; ``raw`` is the unsealing client."""
    part = max(COPY_PART, MIN_PART, -(-size // MAX_PARTS))
    upload = raw.create_multipart_upload(Bucket=bucket, Key=key, Metadata=metadata, **extra)
    upload_id, parts = upload["UploadId"], []
    try:
        for number, first in enumerate(range(0, size, part), 1):
            resp = raw.upload_part_copy(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, CopySource=source,
                CopySourceRange=f"bytes={first}-{min(first + part, size) - 1}",
                CopySourceIfMatch=source_if_match,
            )  # fmt: skip
            parts.append({"PartNumber": number, "ETag": resp["CopyPartResult"]["ETag"]})
        done = {} if if_match is None else {"IfMatch": if_match}
        raw.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **done
        )  # fmt: skip
    except BaseException:
        _abort(raw, bucket, key, upload_id)
        raise


def _abort(client: Any, bucket: str, key: str, upload_id: str) -> None:
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except Exception:  # noqa: BLE001, S110 - the original error is the one to report
        pass
