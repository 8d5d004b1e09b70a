"""Response-side pieces: S3's range error and small stream wrappers for response bodies (the
length-limited reader of a ranged body is the engine's, ``objects.engine.Limited``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from botocore.response import StreamingBody

from ..objects.engine import read_exactly

__all__ = [
    "OpenedBody",
    "read_exactly",
    "Prepended",
    "Resuming",
    "invalid_range",
    "streaming_body",
]


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


log: logging.Logger = logging.getLogger("sealstore.s3")

#: a response body cut short: the connection dropped, timed out or closed mid-body
DROPPED: tuple[type[Exception], ...] = (
    IncompleteReadError,
    ResponseStreamingError,
    ReadTimeoutError,
    ConnectionClosedError,
)


class Resuming:
    """The stored bytes ``first..last`` (inclusive) of one object version, read from ``raw``.

    When the connection drops mid-body (``DROPPED``: the server closed it, it timed out, it
    came short), the rest is asked for again with ``refetch(next, last)``, an If-Match GET of
    the same ETag: an object replaced meanwhile fails with 412 (PreconditionFailed) instead of
    mixing two versions, and every segment is authenticated anyway.  At most ``attempts``
    times per body (s3transfer retries a download the same way); then the error is raised.
    Large bodies read slowly, as a re-seal that uploads each part before reading the next, are
    what servers cut short.
    """

    def __init__(
        self,
        raw: Any,
        first: int,
        last: int,
        refetch: Callable[[int, int], Any] | None,
        attempts: int = 4,
    ) -> None:
        self._raw = raw
        self._next = first
        self._last = last
        self._refetch = refetch
        self._attempts = attempts
        self._timeout: float | None = None
        self.resumed: int = 0

    def read(self, amt: int | None = -1) -> bytes:
        while True:
            try:
                chunk: bytes = self._raw.read(amt if amt is not None and amt >= 0 else None)
            except DROPPED as e:
                self._resume(e)
                continue
            self._next += len(chunk)
            return chunk

    def readinto(self, buf: Any) -> int:
        if not hasattr(self._raw, "readinto"):  # botocore before 1.36 reads only with read()
            chunk = self.read(len(buf))
            buf[: len(chunk)] = chunk
            return len(chunk)
        while True:
            try:
                n: int = self._raw.readinto(buf)
            except DROPPED as e:
                self._resume(e)
                continue
            self._next += n
            return n

    def _resume(self, error: Exception) -> None:
        if self._refetch is None or self.resumed >= self._attempts or self._next > self._last:
            raise error
        self.resumed += 1
        log.info(
            "sealstore: an object's body was cut short (%s); asking again from byte %d "
            "(attempt %d of %d)", type(error).__name__, self._next, self.resumed, self._attempts,
        )  # fmt: skip
        try:
            self._raw.close()
        except Exception:  # the old connection is gone already
            pass
        self._raw = self._refetch(self._next, self._last)
        if self._timeout is not None:
            self._raw.set_socket_timeout(self._timeout)

    def set_socket_timeout(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._raw.set_socket_timeout(timeout)

    def close(self) -> None:
        self._raw.close()


class Prepended:
    """``head`` followed by the rest of ``raw`` (for bodies whose start was already read)."""

    def __init__(self, head: bytes, raw: Any) -> None:
        self._head = memoryview(head)
        self._raw = raw

    def read(self, amt: int | None = -1) -> bytes:
        if self._head:
            n = len(self._head) if amt is None or amt < 0 else min(amt, len(self._head))
            chunk = bytes(self._head[:n])
            self._head = self._head[n:]
            if amt is None or amt < 0:
                chunk += self._raw.read()
            return chunk
        rest: bytes = self._raw.read(amt if amt is not None and amt >= 0 else None)
        return rest

    def close(self) -> None:
        self._raw.close()


class OpenedBody(StreamingBody):  # type: ignore[misc]  # (botocore has no types)
    """A botocore StreamingBody over opened plaintext (read/iter_chunks/iter_lines, length
    check): ``tell()`` counts the plaintext bytes read, as S3's body counts its bytes, and
    ``set_socket_timeout()`` goes to the sealed response it reads from.  ``sealstore_sealed``
    is True for opened (verified) plaintext, False for an object passed through unopened
    (``passthrough=True``: not authenticated)."""

    sealstore_sealed: bool = True

    def __init__(self, stream: Any, length: int, sealed: Any, *, verified: bool = True) -> None:
        super().__init__(stream, length)
        self._sealed = sealed
        self.sealstore_sealed = verified

    def tell(self) -> int:
        return int(self._amount_read)

    def set_socket_timeout(self, timeout: float | None) -> None:
        self._sealed.set_socket_timeout(timeout)


def streaming_body(stream: Any, length: int, sealed: Any, *, verified: bool = True) -> OpenedBody:
    """The body handed to the caller: ``length`` bytes of ``stream``, read from the response
    body ``sealed`` (``verified=False``: an unsealed object passed through)."""
    return OpenedBody(stream, length, sealed, verified=verified)
