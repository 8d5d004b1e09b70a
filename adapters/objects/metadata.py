"""The ``x-amz-meta-sealstore-*`` fields of a sealed object, and their checks.

The body alone is enough to open an object (its header names everything); the metadata repeats
what a reader wants before it fetches the body: the plaintext length (``head_object`` reports it),
the segment layout (a ranged read computes which bytes to fetch) and a copy of the header (the
object key can be derived, and its commitment checked, before the first body byte arrives).
Every field is checked against the header or the stored size, so an edited field raises.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from sealstore.errors import MalformedObject, NotSealedObject, UnsupportedOperation
from sealstore.stream import ObjectHeader, parse_object_header

__all__ = [
    "HEADER",
    "KEY_ID",
    "LENGTH",
    "PART_SIZE",
    "PREFIX",
    "SEGMENT_SIZE",
    "SUITE",
    "VERSION",
    "declared_length",
    "header_from_metadata",
    "object_metadata",
    "split_user_metadata",
]

PREFIX = "sealstore-"
VERSION = "sealstore-version"
SUITE = "sealstore-suite"
KEY_ID = "sealstore-key-id"
SEGMENT_SIZE = "sealstore-segment-size"
LENGTH = "sealstore-length"
HEADER = "sealstore-header"
#: A request-only hint (never stored): the plaintext part size of a multipart upload.
PART_SIZE = "sealstore-part-size"

_STORED = (VERSION, SUITE, KEY_ID, SEGMENT_SIZE, LENGTH, HEADER)
# standard headers a rewrite or a multipart copy must carry over itself (CopyObject keeps them)
KEPT_HEADERS = ("CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage",
                "ContentType", "Expires")  # fmt: skip


def kept_headers(head: Mapping[str, Any]) -> dict[str, Any]:
    """The KEPT_HEADERS a HeadObject response has, as request parameters."""
    return {k: head[k] for k in KEPT_HEADERS if head.get(k)}


def object_metadata(header: ObjectHeader, length: int | None) -> dict[str, str]:
    """The metadata fields stored with an object (``length`` may be unknown for streams)."""
    meta = {
        VERSION: str(header.version),
        SUITE: str(header.suite),
        KEY_ID: header.key_id_hex,
        SEGMENT_SIZE: str(header.segment_size),
        HEADER: base64.b64encode(header.pack()).decode("ascii"),
    }
    if length is not None:
        meta[LENGTH] = str(length)
    return meta


def _lower(meta: Mapping[str, str] | None) -> dict[str, str]:
    """``meta`` with lower-case names, as strings; a field whose value is None (a GCS metadata
    patch's removal, which a store may hand back as it is) is absent."""
    return {str(k).lower(): str(v) for k, v in (meta or {}).items() if v is not None}


def header_from_metadata(meta: Mapping[str, str] | None) -> tuple[ObjectHeader, bytes] | None:
    """The header copy in ``meta`` (parsed, and its raw bytes), or None when ``meta`` has no
    sealstore fields.  MalformedObject if a field is missing, malformed or disagrees."""
    meta = _lower(meta)
    if not any(k.startswith(PREFIX) for k in meta):
        return None
    try:
        raw = base64.b64decode(meta[HEADER].encode("ascii"), validate=True)
        header = parse_object_header(raw)
    except KeyError:
        raise MalformedObject(f"object metadata lacks {HEADER}") from None
    except (binascii.Error, UnicodeEncodeError, NotSealedObject) as exc:
        raise MalformedObject(
            f"object metadata {HEADER} is not a sealstore header ({exc})"
        ) from None
    if header.pack() != raw:  # a prefix parses; the copy must be the header exactly
        raise MalformedObject(f"object metadata {HEADER} has bytes after the header")
    expected = object_metadata(header, None)
    for name in (VERSION, SUITE, KEY_ID, SEGMENT_SIZE):
        if meta.get(name) != expected[name]:
            raise MalformedObject(f"object metadata {name} disagrees with the stored header")
    return header, raw


def stored_length(meta: Mapping[str, str] | None) -> int | None:
    """The plaintext length recorded in ``meta``, if any (MalformedObject if not a number)."""
    value = _lower(meta).get(LENGTH)
    if value is None:
        return None
    # ASCII digits only (str.isdigit also takes superscripts int() refuses), and a length that
    # fits the 64-bit sizes S3 can store
    if not (value.isascii() and value.isdigit()) or len(value) > 20:
        raise MalformedObject(f"object metadata {LENGTH} is not a length")
    return int(value)


def declared_length(meta: dict[str, str]) -> int | None:
    """Pop the caller's plaintext length declaration from request metadata (``meta`` is edited)."""
    value = meta.pop(LENGTH, None)
    if value is None:
        return None
    try:
        length = int(value)
    except (TypeError, ValueError):
        length = -1
    if length < 0:
        raise UnsupportedOperation(f"Metadata[{LENGTH!r}] must be the plaintext length in bytes")
    return length


def split_user_metadata(meta: Mapping[str, str] | None) -> dict[str, str]:
    """``meta`` without sealstore fields."""
    return {k: v for k, v in (meta or {}).items() if not str(k).lower().startswith(PREFIX)}


def sealstore_fields(meta: Mapping[str, str] | None) -> dict[str, str]:
    """Only the stored sealstore fields of ``meta``."""
    return {k: v for k, v in _lower(meta).items() if k in _STORED}


def reject_reserved(meta: Mapping[str, str] | None) -> None:
    """Refuse caller metadata that would forge sealstore fields."""
    for k in meta or {}:
        if str(k).lower().startswith(PREFIX):
            raise UnsupportedOperation(
                f"metadata key {k!r} is reserved for sealstore (only {LENGTH!r} and "
                f"{PART_SIZE!r} may be passed, as declarations)"
            )
