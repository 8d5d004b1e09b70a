"""HTTP byte ranges (RFC 9110 ``Range: bytes=...``), single ranges only, resolved against an
object's plaintext size."""

from __future__ import annotations

import re

from sealstore.errors import UnsupportedOperation

__all__ = ["ByteRange", "parse_range"]

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
