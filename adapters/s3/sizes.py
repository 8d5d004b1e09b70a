"""An object's plaintext size from one HEAD (sealstore metadata and the stored size), without
downloading it and without a key: the header names the segment and tag sizes, and those with the
stored size give the plaintext size (docs/FORMAT.md O1, O3)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from sealstore.errors import MalformedObject, NotSealedObject
from sealstore.stream import (
    HEADER_SIZE,
    ObjectHeader,
    parse_object_header,
)
from sealstore.stream import plaintext_size as _from_stored

from ..objects import metadata as M
from .body import read_exactly

__all__ = ["plaintext_size", "size_of"]


def size_of(head: dict[str, Any], fetch_header: Callable[[], bytes]) -> tuple[int, ObjectHeader]:
    """``(plaintext size, header)`` of the object a raw HeadObject response describes.

    ``fetch_header()`` returns the object's first bytes, and is called only when the metadata
    lacks the header copy.  NotSealedObject for an object sealstore did not write;
    MalformedObject when the metadata's plaintext length disagrees with the stored size."""
    meta = head.get("Metadata")
    stored = head["ContentLength"]
    from_meta = M.header_from_metadata(meta)
    if from_meta is not None:
        header = from_meta[0]
    elif stored < len(b"SSOB"):
        raise NotSealedObject("the object is too short to be sealed")
    else:
        header = parse_object_header(fetch_header())
    n = _from_stored(stored, header.segment_size, header.tag_size)
    expected = M.stored_length(meta)
    if expected is not None and expected != n:
        raise MalformedObject(f"object metadata says {expected} bytes, its size says {n}")
    return n, header


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
