"""Part planning: how a sealed object is cut into the parts of a multipart upload.

The sealed stream (header, then segments) is cut into consecutive parts; a store concatenates
them, so a part boundary needs no alignment with segments, and the object is byte for byte what
one request would have stored.  Parts are planned in plaintext (whole segments, so every part but
the first holds the same number of segments, and the first adds the header) and checked against
the store's :class:`~sealstore.adapters.objects.store.PartLimits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sealstore.errors import UnsupportedOperation

from .store import PartLimits

__all__ = [
    "check_parts_tile",
    "needs_multipart",
    "part_ends_object",
    "part_size",
    "sealed_part_size",
]


def part_size(length: int | None, wanted: int, segment_size: int, limits: PartLimits) -> int:
    """Plaintext bytes per part: ``wanted`` rounded up to whole segments, at least the store's
    smallest part, few enough parts for ``length`` (when known)."""
    size = max(wanted, limits.min_part)
    if length is not None:
        size = max(size, -(-length // limits.max_parts))
    size = -(-size // segment_size) * segment_size
    if size > limits.max_part:
        raise UnsupportedOperation(
            f"the object is too large for {limits.max_parts:,} parts of at most "
            f"{limits.max_part:,} bytes"
        )
    return size


def sealed_part_size(plaintext_part: int, segment_size: int, tag_size: int) -> int:
    """Stored bytes of a part of ``plaintext_part`` plaintext bytes (whole segments; the first
    part adds the 76-byte header)."""
    return plaintext_part // segment_size * (segment_size + tag_size)


def needs_multipart(plaintext_length: int, limits: PartLimits) -> bool:
    """Whether sealing ``plaintext_length`` bytes may exceed one request of the store (the
    sealed size is at most 1/1024 larger than the plaintext for any segment size sealstore
    accepts, plus the header)."""
    return plaintext_length + plaintext_length // 1024 + 4096 > limits.max_single


def part_ends_object(number: int, size: int, part_size: int, length: int | None) -> bool:
    """Whether part ``number`` (1-based) of ``size`` plaintext bytes, in an upload whose parts
    hold ``part_size`` bytes (the last fewer) and whose plaintext ``length`` was declared (None:
    unknown), ends the object, so its final segment is sealed as final.  UnsupportedOperation,
    before the part is sealed, when it does not fit the part size or the declared length."""
    offset = (number - 1) * part_size
    if size > part_size:
        raise UnsupportedOperation(
            f"part {number} holds {size} bytes, more than the part size {part_size}"
        )
    if length is None:
        return size < part_size
    if offset + size > length or (size < part_size and offset + size != length):
        raise UnsupportedOperation(
            f"part {number} ({size} bytes at {offset}) does not fit the declared length {length}"
        )
    return offset + size == length


def check_parts_tile(
    numbers: Iterable[int], finals: Mapping[int, bool], plain: Mapping[int, int]
) -> tuple[list[int], int]:
    """``(numbers of the parts that ended the object, plaintext bytes in all)`` of a multipart
    upload completed with the parts ``numbers``, of which ``finals`` (part -> it ended the
    object) and ``plain`` (part -> its plaintext bytes) say what was sealed.
    UnsupportedOperation unless parts 1..N were all sealed and only the last may end the
    object."""
    numbers = sorted(numbers)
    count = len(numbers)
    if numbers != list(range(1, count + 1)):
        raise UnsupportedOperation(
            "an encrypted multipart upload needs parts numbered 1..N without gaps"
        )
    missing = [k for k in numbers if k not in finals]
    if missing:
        raise UnsupportedOperation(f"parts {missing} were not sealed by this client")
    ended = sorted(k for k, f in finals.items() if f)
    if ended and ended != [count]:
        raise UnsupportedOperation(
            f"part {ended[0]} ended the object but part {count} is the last; "
            "only the last part may be shorter than the part size"
        )
    return ended, sum(plain.get(k, 0) for k in numbers)
