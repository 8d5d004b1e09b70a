"""``blob.open()`` on an encrypted client: a seekable reader of verified plaintext, and a writer
that seals what is written when it is closed.

The reader opens the object through the engine from the current position (one ranged GET of the
covering segments), reads on sequentially, and opens again only after a seek; every read is
conditional on the generation the first read saw, so a file never mixes two versions.  The writer
keeps what is written in a spooled temporary file (8 MiB in memory, the rest on disk) and seals it
on ``close()``: nothing is stored before the whole plaintext is there (the final segment
authenticates the end), and nothing at all when the block raises.
"""

from __future__ import annotations

import io
import tempfile
from typing import Any

from google.api_core.exceptions import RequestRangeNotSatisfiable

from ..objects.engine import SPOOL_MEMORY

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


class SealedWriter(io.RawIOBase):
    """Collects a blob's plaintext and seals it on ``close()`` (see the module docstring)."""

    def __init__(self, sealing: Any, blob: Any, upload: dict[str, Any]) -> None:
        super().__init__()
        self._sealing = sealing
        self._blob = blob
        self._upload = upload
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        self._failed = False

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return int(self._spool.write(b))

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._failed:
                size = self._spool.tell()
                self._spool.seek(0)
                self._sealing.upload(self._blob, self._spool, size=size, **self._upload)
        finally:
            self._spool.close()
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
