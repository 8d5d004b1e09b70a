"""An object's plaintext size from one HEAD (sealstore metadata and the stored size), without
downloading it and without a key (the arithmetic is the engine's: ``objects/sizes.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from sealstore.stream import HEADER_SIZE, ObjectHeader

from ..objects import sizes as _sizes
from .body import read_exactly

__all__ = ["plaintext_size", "size_of"]


def size_of(head: dict[str, Any], fetch_header: Callable[[], bytes]) -> tuple[int, ObjectHeader]:
    """``(plaintext size, header)`` of the object a raw HeadObject response describes.

    ``fetch_header()`` returns the object's first bytes, and is called only when the metadata
    lacks the header copy.  NotSealedObject for an object sealstore did not write;
    MalformedObject when the metadata's plaintext length disagrees with the stored size."""
    return _sizes.size_of(head.get("Metadata"), head["ContentLength"], fetch_header)


def plaintext_size(client: Any, **object_args: Any) -> int:
    """Plaintext bytes of the object ``object_args`` names (``Bucket``, ``Key``, optionally
    ``VersionId``, SSE-C parameters...), with one HEAD (a 76-byte ranged GET more when the
    object's metadata was lost).  ``client`` is a plain or an encrypted boto3 S3 client."""
    sealing = getattr(client, "sealstore", None)
    scope = sealing.raw() if sealing is not None else contextlib.nullcontext(client)
    with scope as raw:
        head = raw.head_object(**object_args)

        def fetch_header() -> bytes:
            body = raw.get_object(
                **object_args, Range=f"bytes=0-{HEADER_SIZE - 1}", IfMatch=head["ETag"]
            )["Body"]
            try:
                return read_exactly(body, HEADER_SIZE)
            finally:
                body.close()

        return size_of(head, fetch_header)[0]
