"""HTTP byte ranges (RFC 9110 ``Range: bytes=...``), single ranges only, resolved against an
object's plaintext size."""

from __future__ import annotations

import re

from sealstore.errors import UnsupportedOperation
from sealstore.stream import HEADER_SIZE

__all__ = ["ByteRange", "parse_range", "part_copy_span", "sealed_range"]

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class ByteRange:
    """One HTTP byte range: ``first-last``, ``first-`` or the suffix ``-suffix``."""

    __slots__ = ("first", "last", "suffix", "text")

    def __init__(self, first: int | None, last: int | None, suffix: int | None, text: str) -> None:
        self.first: int | None = first
        self.last: int | None = last
        self.suffix: int | None = suffix
        self.text: str = text

    def resolve(self, size: int) -> tuple[int, int] | tuple[()] | None:
        """Inclusive ``(first, last)`` inside an object of ``size`` bytes; None if the range
        cannot be satisfied (S3 answers 416 InvalidRange then); ``()`` for the whole, empty,
        object."""
        if self.suffix is not None:
            if self.suffix == 0:
                return None
            if size == 0:  # S3 (as moto does) answers a suffix of an empty object with it whole
                return ()
            return max(0, size - self.suffix), size - 1
        first = self.first
        if first is None:  # (parse_range gives a first byte or a suffix)
            raise UnsupportedOperation(f"the range {self.text!r} has neither a start nor a suffix")
        if first >= size:
            return None
        last = size - 1 if self.last is None else min(self.last, size - 1)
        return first, last


def parse_range(text: str) -> ByteRange:
    """Parse a single-range ``Range`` value; UnsupportedOperation for multiple or odd ranges."""
    m = _RANGE.match(text or "")
    if not m or (not m.group(1) and not m.group(2)):
        raise UnsupportedOperation(
            f"Range {text!r}: an encrypted client supports one range of the form "
            "bytes=FIRST-LAST, bytes=FIRST- or bytes=-SUFFIX"
        )
    a, b = m.group(1), m.group(2)
    if not a:
        return ByteRange(None, None, int(b), text)
    first, last = int(a), (int(b) if b else None)
    if last is not None and last < first:
        raise UnsupportedOperation(f"Range {text!r}: the last byte is before the first")
    return ByteRange(first, last, None, text)


def part_copy_span(text: str | None, size: int, part_size: int) -> tuple[int, int]:
    """The inclusive plaintext span ``(first, last)`` a part copied from a source of ``size``
    plaintext bytes takes: the single range ``text`` (S3's ``CopySourceRange``), or the whole
    source without one (``(0, -1)`` for an empty source).  UnsupportedOperation, before
    anything is read or sent, for a range outside the source or a span above ``part_size``
    (the upload's plaintext part size)."""
    first, last = 0, size - 1
    if text:
        span = parse_range(text).resolve(size)
        if not span:
            raise UnsupportedOperation(
                f"CopySourceRange {text!r} is not inside the source's {size} bytes"
            )
        first, last = span
    if last - first + 1 > part_size:
        raise UnsupportedOperation(
            f"UploadPartCopy of {last - first + 1} bytes is more than the upload's part "
            f"size {part_size}"
        )
    return first, last


def sealed_range(rng: ByteRange, segment_size: int, tag_size: int) -> str:
    """The ``Range`` of the stored bytes that hold the plaintext range ``rng`` of an object with
    segments of ``segment_size`` plaintext bytes and ``tag_size``-byte tags (a guess of the
    layout is enough: the answer's metadata confirms it).  From byte 0 the header comes along;
    a suffix takes whole segments from the end."""
    step = segment_size + tag_size
    if rng.suffix is not None:
        if rng.suffix == 0:
            return "bytes=-0"
        return f"bytes=-{(rng.suffix // segment_size + 2) * step}"
    first = rng.first or 0
    i0 = first // segment_size
    start = 0 if i0 == 0 else HEADER_SIZE + i0 * step  # from 0: the header comes along
    if rng.last is None:
        return f"bytes={start}-"
    return f"bytes={start}-{HEADER_SIZE + (rng.last // segment_size + 1) * step - 1}"
