"""What a sealing reader reads from: bytes-like objects (without a copy), file objects and
iterables of chunks, with their length when it can be known."""

from __future__ import annotations

import io
from typing import Any

from .header import BATCH_BYTES


class _Input:
    """Fill caller buffers from bytes-like data, a binary file object or an iterable of chunks."""

    __slots__ = ("_file", "_it", "_pending", "_pos", "_readinto", "_view")

    def __init__(self, src: Any) -> None:
        self._view: memoryview | None = None
        self._file: Any = None
        self._readinto: Any = None
        self._it: Any = None
        self._pos = 0
        self._pending = memoryview(b"")
        if isinstance(src, (bytes, bytearray, memoryview)):
            self._view = memoryview(src).cast("B")
        elif hasattr(src, "readinto") and not isinstance(src, io.TextIOBase):
            self._file = src
            self._readinto = src.readinto
        elif hasattr(src, "read"):
            self._file = src
        elif isinstance(src, str):
            raise TypeError("the source must be bytes, not str (encode it first)")
        else:
            try:
                self._view = memoryview(src).cast("B")
            except TypeError:
                try:
                    self._it = iter(src)
                except TypeError:
                    raise TypeError(
                        "the source must be bytes-like, a binary file object or an iterable of "
                        f"bytes, not {type(src).__name__}"
                    ) from None

    @property
    def seekable(self) -> bool:
        if self._view is not None:
            return True
        f = self._file
        if f is None:
            return False
        try:
            return bool(f.seekable())
        except AttributeError:  # e.g. s3transfer's ReadFileChunk: seek/tell without seekable()
            return hasattr(f, "seek") and hasattr(f, "tell")
        except ValueError:
            return False

    def remaining(self) -> int | None:
        """Bytes left from the current position, if that can be known without reading."""
        if self._view is not None:
            return len(self._view) - self._pos
        f = self._file
        if f is not None and self.seekable:
            pos = f.tell()
            f.seek(0, io.SEEK_END)
            end = f.tell()  # not seek()'s return value: some file-likes return None
            f.seek(pos)
            return int(end - pos)
        return None

    def tell(self) -> int:
        if self._view is not None:
            return self._pos
        return int(self._seekable_file().tell())

    def seek(self, pos: int) -> None:
        if self._view is not None:
            self._pos = pos
        else:
            self._seekable_file().seek(pos)

    def _seekable_file(self) -> Any:
        if self._file is None:  # an iterable of chunks
            raise io.UnsupportedOperation("an iterable source has no position")
        return self._file

    def fill(self, buf: memoryview) -> int:
        """Fill ``buf`` completely unless the source ends first; returns the bytes written."""
        want = len(buf)
        n: int | None
        if self._view is not None:
            n = min(want, len(self._view) - self._pos)
            buf[:n] = self._view[self._pos : self._pos + n]
            self._pos += n
            return n
        got = 0
        if self._it is not None:
            while got < want:
                if not self._pending:
                    try:
                        chunk = next(self._it)
                    except StopIteration:
                        break
                    if isinstance(chunk, str):
                        raise TypeError("the iterable yielded str; it must yield bytes")
                    self._pending = memoryview(chunk).cast("B")
                n = min(want - got, len(self._pending))
                buf[got : got + n] = self._pending[:n]
                self._pending = self._pending[n:]
                got += n
            return got
        while got < want:
            if self._readinto is not None:
                n = self._readinto(buf[got:])
            else:
                chunk = self._file.read(want - got)
                if isinstance(chunk, str):
                    raise TypeError("the file object returned str; open it in binary mode")
                n = len(chunk) if chunk is not None else None
                if n:
                    buf[got : got + n] = chunk
            if n is None:
                raise BlockingIOError("non-blocking sources are not supported")
            if n == 0:
                break
            got += n
        return got

    def take(self, n: int) -> memoryview | None:
        """Up to ``n`` bytes without a copy (bytes-like sources only; None otherwise)."""
        if self._view is None:
            return None
        view = self._view[self._pos : self._pos + n]
        self._pos += len(view)
        return view

    def close(self) -> None:
        close = getattr(self._file, "close", None)
        if close is not None:
            close()


def source_length(source: Any) -> int | None:
    """Bytes ``source`` holds from its current position, if known without reading it."""
    try:
        return len(source)
    except TypeError:
        pass
    try:
        return _Input(source).remaining()
    except (TypeError, OSError, ValueError):
        return None


def _batch_segments(segment_size: int) -> int:
    return max(1, BATCH_BYTES // segment_size)
