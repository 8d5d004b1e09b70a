"""Objects above S3's single-request limits: multipart re-seal and multipart copy.

``PutObject`` and ``CopyObject`` take at most 5 GiB.  Rotation re-seals an object in place (or
puts its lost metadata back with a copy onto itself), and a copy of an unbound object by a client
that does not bind copies sealed bytes server-side (``copying.py``; other copies are re-sealed);
above that size these go through a multipart upload instead, with the same guarantees:

* :func:`put_multipart` seals a plaintext stream through the encrypted client's multipart
  handlers, one part in memory at a time, reads the source to its end (so its final segment is
  authenticated) before completing, and completes only ``IfMatch`` the ETag the caller read:
  a concurrent writer is never overwritten.
* :func:`copy_multipart` copies an object's sealed bytes as they are, in consecutive ranges
  (``UploadPartCopy`` on the raw client), so the copy is byte for byte the source, each range
  conditional on the source's ETag.  Metadata, which a multipart copy does not carry over, is
  given by the caller.

Either way a failure aborts the upload: nothing is left half-written.
"""

from __future__ import annotations

from typing import Any

from sealstore.errors import TruncatedObject

from ..objects import metadata as M
from .body import read_exactly
from .transfer import MAX_PARTS, MIN_PART, part_size

__all__ = ["MAX_SINGLE_REQUEST", "copy_multipart", "needs_multipart", "put_multipart"]

MAX_SINGLE_REQUEST = 5 << 30  # PutObject body, CopyObject source
RESEAL_PART = 64 << 20  # plaintext per part when re-sealing (held in memory)
COPY_PART = 1 << 30  # sealed bytes per UploadPartCopy (server-side, nothing held)


def needs_multipart(plaintext_length: int) -> bool:
    """Whether sealing ``plaintext_length`` bytes may exceed one PutObject (the sealed size is at
    most 1/1024 larger than the plaintext for any segment size sealstore accepts, plus the
    header)."""
    return plaintext_length + plaintext_length // 1024 + 4096 > MAX_SINGLE_REQUEST


def put_multipart(
    client: Any,
    sealing: Any,
    bucket: str,
    key: str,
    body: Any,
    length: int,
    *,
    metadata: dict[str, str],
    extra: dict[str, Any],
    if_match: str | None,
) -> None:
    """Seal ``length`` plaintext bytes read from ``body`` over ``bucket/key``, completing only
    if the object's ETag is still ``if_match``."""
    size = part_size(length, RESEAL_PART, sealing.segment_size)
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, Metadata={**metadata, M.PART_SIZE: str(size), M.LENGTH: str(length)},
        **extra,
    )  # fmt: skip
    upload_id, parts = upload["UploadId"], []
    try:
        for number, offset in enumerate(range(0, length, size), 1):
            want = min(size, length - offset)
            data = read_exactly(body, want)
            if len(data) != want:
                raise TruncatedObject(
                    f"the source ended after {offset + len(data)} of {length} bytes"
                )
            resp = client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data
            )
            parts.append({"PartNumber": number, "ETag": resp["ETag"]})
        if body.read(1):  # past the declared length; reading to the end checks the final segment
            raise TruncatedObject(f"the source holds more than its declared {length} bytes")
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, IfMatch=if_match
        )  # fmt: skip
    except BaseException:
        _abort(client, bucket, key, upload_id)
        raise


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
