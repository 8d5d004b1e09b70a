"""``blob.open()`` on an encrypted client: a seekable reader of verified plaintext, and a writer
that seals what is written as it comes.

The reader opens the object through the engine from the current position (one ranged GET of the
covering segments), reads on sequentially, and opens again only after a seek; every read is
conditional on the generation the first read saw, so a file never mixes two versions.  The writer
hands what is written to a thread that seals it as it comes (``PIPE_CHUNKS`` buffers queued at
most, never a temporary file: plaintext does not touch the disk), a large object as one resumable
session finalized on ``close()`` only: nothing is stored before the whole plaintext is there (the
final segment authenticates the end), and nothing at all when the block raises.
"""

from __future__ import annotations

import io
import queue
import threading
from typing import Any

from google.api_core.exceptions import RequestRangeNotSatisfiable


__all__ = ["SealedReader", "SealedWriter", "open_blob"]

#: buffer of blob.open() files when no chunk_size is given
DEFAULT_CHUNK = 1 << 20


class SealedReader(io.RawIOBase):
    """The plaintext of one blob, seekable (see the module docstring)."""

    def __init__(self, sealing: Any, blob: Any, if_generation_match: Any = None) -> None:
        super().__init__()
        self._sealing = sealing
        self._blob = blob
        self._pos = 0
        self._body: Any = None
        self._generation = if_generation_match
        self._size: int | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _open(self) -> Any:
        if self._body is None:
            if self._size is not None and self._pos >= self._size:
                return None
            body = self._sealing.opened(
                self._blob, self._pos if self._pos else None,
                if_generation_match=self._generation,
            )  # fmt: skip
            self._size = body.size
            self._generation = body.stored.etag  # the next opens read this same generation
            self._body = body
        return self._body

    def readinto(self, b: Any) -> int:
        if self._size is not None and self._pos >= self._size:
            return 0
        try:
            body = self._open()
        except RequestRangeNotSatisfiable:  # a read at or past the end: nothing left
            if not self._pos:
                raise
            return 0
        if body is None:
            return 0
        n = int(body.readinto(b))
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            if self._size is None:
                self._size = self._sealing.engine.size(
                    self._sealing.store, self._blob.bucket.name, self._blob.name
                )
            target = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence!r}")
        if target < 0:
            raise ValueError("negative seek position")
        if target != self._pos:
            self._drop()
            self._pos = target
        return self._pos

    def tell(self) -> int:
        return self._pos

    def _drop(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop()
        super().close()


class _Aborted(Exception):
    """The writer's block raised: the sealing thread stops and stores nothing."""


class _Pipe:
    """Chunks handed from the writer to the sealing thread (at most ``PIPE_CHUNKS`` waiting)."""

    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=PIPE_CHUNKS)
        self._chunk = memoryview(b"")
        self._done = False

    def seekable(self) -> bool:
        return False

    def _fill(self) -> bool:
        """The next chunk into ``_chunk``; False at the end."""
        while not self._chunk and not self._done:
            item = self.queue.get()
            if item is _EOF:
                self._done = True
            elif item is _ABORT:
                raise _Aborted("the writer was closed after an error")
            else:
                self._chunk = memoryview(item)
        return bool(self._chunk)

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while self._fill():
                parts.append(bytes(self._chunk))
                self._chunk = memoryview(b"")
            return b"".join(parts)
        if n == 0 or not self._fill():
            return b""
        out = bytes(self._chunk[:n])  # a short read: the sealing reader reads on
        self._chunk = self._chunk[n:]
        return out


_EOF = object()
_ABORT = object()
#: chunks of plaintext the writer may queue ahead of the sealing thread (each up to the buffer)
PIPE_CHUNKS = 4


class SealedWriter(io.RawIOBase):
    """Seals a blob's plaintext as it is written (see the module docstring)."""

    def __init__(self, sealing: Any, blob: Any, upload: dict[str, Any]) -> None:
        super().__init__()
        sealing.check_upload(blob, upload)  # refused arguments: before anything is written
        self._pipe = _Pipe()
        self._error: BaseException | None = None
        self._failed = False
        self._thread = threading.Thread(
            target=self._seal, args=(sealing, blob, upload), name="sealstore-gcs-writer",
            daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _seal(self, sealing: Any, blob: Any, upload: dict[str, Any]) -> None:
        try:
            sealing.upload(blob, self._pipe, **upload)
        except BaseException as exc:  # noqa: BLE001 - handed to the writer's caller
            self._error = exc

    def writable(self) -> bool:
        return True

    def _put(self, item: Any) -> None:
        while True:
            if not self._thread.is_alive():
                self._raise()
                raise ValueError("the blob writer's sealing thread has stopped")
            try:
                self._pipe.queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def _raise(self) -> None:
        if self._error is not None and not isinstance(self._error, _Aborted):
            raise self._error

    def write(self, b: Any) -> int:
        data = bytes(b)
        if data:
            self._put(data)
        return len(data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._thread.is_alive():
                self._put(_ABORT if self._failed else _EOF)
            self._thread.join()
            if not self._failed:
                self._raise()
        finally:
            super().close()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._failed = exc_type is not None  # a block that raised stores nothing
        self.close()


def open_blob(
    sealing: Any,
    blob: Any,
    mode: str,
    chunk_size: int | None,
    text: dict[str, Any],
    kwargs: dict[str, Any],
) -> Any:
    """What ``blob.open(mode, ...)`` returns on an encrypted client."""
    buffer = chunk_size or DEFAULT_CHUNK
    if mode in ("r", "rt", "rb"):
        unknown = set(kwargs) - {"if_generation_match", "timeout", "retry", "raw_download"}
        if unknown:
            raise ValueError(f"unsupported blob.open() arguments for reading: {sorted(unknown)}")
        raw = SealedReader(sealing, blob, kwargs.get("if_generation_match"))
        reader = io.BufferedReader(raw, buffer_size=buffer)
        return reader if mode == "rb" else io.TextIOWrapper(reader, **text)
    if mode in ("w", "wt", "wb"):
        upload = {k: v for k, v in kwargs.items() if k not in ("timeout", "retry", "checksum")}
        raw_w = SealedWriter(sealing, blob, upload)
        writer = _Buffered(raw_w, buffer_size=buffer)
        return writer if mode == "wb" else _TextWriter(writer, **text)
    raise NotImplementedError(
        "Supported modes strings are 'r', 'rb', 'rt', 'w', 'wb', and 'wt' only."
    )


class _Buffered(io.BufferedWriter):
    """A buffered writer whose ``with`` block stores nothing when it raises."""

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:
            self.raw._failed = True  # type: ignore[attr-defined]
        self.close()


class _TextWriter(io.TextIOWrapper):
    """A text writer whose ``with`` block stores nothing when it raises."""

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:
            self.buffer.raw._failed = True  # type: ignore[attr-defined]
        self.close()
