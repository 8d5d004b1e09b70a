"""An object's header and plaintext size from what a HEAD gives (its sealstore metadata and
stored size), without downloading it and without a key: the header names the segment and tag
sizes, and those with the stored size give the plaintext size (docs/FORMAT.md O1, O3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sealstore.errors import MalformedObject, NotSealedObject
from sealstore.stream import HEADER_SIZE, ObjectHeader, parse_object_header
from sealstore.stream import plaintext_size as _from_stored

from . import metadata as M

__all__ = ["header_of", "plaintext_of", "size_of"]


def header_of(
    meta: Mapping[str, str] | None, stored: int, fetch_header: Callable[[], bytes]
) -> tuple[ObjectHeader, bytes, bool] | None:
    """``(header, its 76 bytes, found in the metadata)`` of a stored object, or None when it is
    not sealed.  ``fetch_header()`` returns the object's first bytes, and is called only when
    the metadata lacks the header copy.  MalformedObject for edited metadata."""
    found = M.header_from_metadata(meta)
    if found is not None:
        return found[0], found[1], True
    if stored < HEADER_SIZE:
        return None
    raw = fetch_header()[:HEADER_SIZE]
    try:
        return parse_object_header(raw), bytes(raw), False
    except NotSealedObject:
        return None


def size_of(
    meta: Mapping[str, str] | None, stored: int, fetch_header: Callable[[], bytes]
) -> tuple[int, ObjectHeader]:
    """``(plaintext size, header)`` of a stored object of ``stored`` bytes with metadata
    ``meta``.  NotSealedObject for an object sealstore did not write; MalformedObject when the
    metadata's plaintext length disagrees with the stored size."""
    found = M.header_from_metadata(meta)
    if found is not None:
        header = found[0]
    elif stored < len(b"SSOB"):
        raise NotSealedObject("the object is too short to be sealed")
    else:
        header = parse_object_header(fetch_header())
    return plaintext_of(meta, stored, header), header


def plaintext_of(meta: Mapping[str, str] | None, stored: int, header: ObjectHeader) -> int:
    """The plaintext size of a stored object of ``stored`` bytes that ``header`` heads, with
    metadata ``meta``; MalformedObject when the metadata's plaintext length disagrees."""
    n = _from_stored(stored, header.segment_size, header.tag_size)
    expected = M.stored_length(meta)
    if expected is not None and expected != n:
        raise MalformedObject(f"object metadata says {expected} bytes, its size says {n}")
    return n
