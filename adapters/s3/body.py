"""Response-side pieces: HTTP ``Range`` parsing and small stream wrappers for response bodies."""

from __future__ import annotations

import re

from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from sealstore.errors import UnsupportedOperation

__all__ = [
    "ByteRange",
    "OpenedBody",
    "Prepended",
    "Window",
    "invalid_range",
    "parse_range",
    "streaming_body",
]

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class ByteRange:
    """One HTTP byte range: ``first-last``, ``first-`` or the suffix ``-suffix``."""

    __slots__ = ("first", "last", "suffix", "text")

    def __init__(
        self, first: int | None, last: int | None, suffix: int | None, text: str
    ) -> None:
        self.first, self.last, self.suffix, self.text = first, last, suffix, text

    def resolve(self, size: int) -> tuple[int, int] | None:
        """Inclusive ``(first, last)`` inside an object of ``size`` bytes; None if the range
        cannot be satisfied (S3 answers 416 InvalidRange then); ``()`` for the whole, empty,
        object."""
        if self.suffix is not None:
            if self.suffix == 0:
                return None
            if (
                size == 0
            ):  # S3 (as moto does) answers a suffix of an empty object with it whole
                return ()
            return max(0, size - self.suffix), size - 1
        if self.first >= size:
            return None
        last = size - 1 if self.last is None else min(self.last, size - 1)
        return self.first, last


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


def invalid_range(text: str, size: int, operation: str = "GetObject") -> ClientError:
    """The error S3 raises for an unsatisfiable range, with the plaintext size."""
    return ClientError(
        {
            "Error": {
                "Code": "InvalidRange",
                "Message": "The requested range is not satisfiable",
                "RangeRequested": text,
                "ActualObjectSize": str(size),
            },
            "ResponseMetadata": {"HTTPStatusCode": 416},
        },
        operation,
    )


class Window:
    """Read ``count`` bytes of ``raw`` after dropping its first ``skip`` bytes."""

    def __init__(self, raw, skip: int, count: int) -> None:
        self._raw = raw
        self._skip = skip
        self._left = count

    def read(self, amt: int = -1) -> bytes:
        while self._skip:
            dropped = self._raw.read(min(self._skip, 1 << 20))
            if not dropped:
                return b""
            self._skip -= len(dropped)
        if self._left <= 0:
            return b""
        amt = self._left if amt is None or amt < 0 else min(amt, self._left)
        chunk = self._raw.read(amt)
        self._left -= len(chunk)
        return chunk

    def close(self) -> None:
        self._raw.close()


class Prepended:
    """``head`` followed by the rest of ``raw`` (for bodies whose start was already read)."""

    def __init__(self, head: bytes, raw) -> None:
        self._head = memoryview(head)
        self._raw = raw

    def read(self, amt: int = -1) -> bytes:
        if self._head:
            n = len(self._head) if amt is None or amt < 0 else min(amt, len(self._head))
            chunk = bytes(self._head[:n])
            self._head = self._head[n:]
            if amt is None or amt < 0:
                chunk += self._raw.read()
            return chunk
        return self._raw.read(amt if amt is not None and amt >= 0 else None)

    def close(self) -> None:
        self._raw.close()


def read_exactly(raw, n: int) -> bytes:
    """Up to ``n`` bytes from ``raw`` (fewer only at its end)."""
    parts, got = [], 0
    while got < n:
        chunk = raw.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class OpenedBody(StreamingBody):
    """A botocore StreamingBody over opened plaintext (read/iter_chunks/iter_lines, length
    check): ``tell()`` counts the plaintext bytes read, as S3's body counts its bytes, and
    ``set_socket_timeout()`` goes to the sealed response it reads from."""

    def __init__(self, stream, length: int, sealed) -> None:
        super().__init__(stream, length)
        self._sealed = sealed

    def tell(self) -> int:
        return self._amount_read

    def set_socket_timeout(self, timeout) -> None:
        self._sealed.set_socket_timeout(timeout)


def streaming_body(stream, length: int, sealed) -> OpenedBody:
    """The body handed to the caller: ``length`` bytes of ``stream``, read from the response
    body ``sealed``."""
    return OpenedBody(stream, length, sealed)
