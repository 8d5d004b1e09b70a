"""Opening: :class:`OpeningReader` turns a sealed stream (or a run of its segments, for ranged
reads) back into plaintext that was verified before it is released."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any
from collections.abc import Iterator

from ..errors import (
    InvalidTag,
    TruncatedObject,
)
from .header import BATCH_BYTES, HEADER_SIZE, parse_object_header
from .object_key import ObjectCipher
from .sources import _batch_segments, _Input

if TYPE_CHECKING:
    from ..keyring import Keyring


class OpeningReader(io.RawIOBase):
    """A readable file object of the plaintext of sealed segments read from ``source``.

    Plaintext is released one batch at a time, only after every segment in the batch verified.
    A stream that ends without its final segment raises TruncatedObject; a bad segment raises
    InvalidTag with ``.index``.

    ``first_index``: index of the first segment in ``source``; ``final``: the run ends with the
    object's final segment (a whole object always does); ``segments``: how many segments the run
    holds, when known (ranged reads); ``skip``/``length``: plaintext bytes to drop at the start
    and to return at most.  ``close_source``: close ``source`` when this reader is closed.

    ``readinto`` a buffer that holds a whole batch opens straight into it (the native call
    wipes it if a tag fails, before returning), and bytes-like sources are opened in place.
    """

    def __init__(
        self,
        cipher: ObjectCipher,
        source: Any,
        *,
        first_index: int = 0,
        final: bool = True,
        segments: int | None = None,
        skip: int = 0,
        length: int | None = None,
        close_source: bool = True,
    ) -> None:
        super().__init__()
        self._c = cipher
        self._src = _Input(source)
        self._close_source = close_source
        self._next = first_index
        self._final = final
        self._left = segments  # segments still expected, if known
        self._skip = skip
        self._limit = length
        seg, tag = cipher.segment_size, cipher.tag_size
        self._seg, self._step, self._tag = seg, seg + tag, tag
        self._k = _batch_segments(seg)
        # allocated on first use (bytes sources and large reads skip them)
        self._ct_buf: bytearray | None = None
        self._pt_buf: bytearray | None = None
        self._out = memoryview(b"")
        self._done = False
        self._delivered = 0

    @property
    def _ct(self) -> bytearray:
        if self._ct_buf is None:
            self._ct_buf = bytearray(self._k * self._step)
        return self._ct_buf

    @property
    def _pt(self) -> bytearray:
        if self._pt_buf is None:
            self._pt_buf = bytearray(self._k * self._seg)
        return self._pt_buf

    def readable(self) -> bool:
        return True

    def _truncated(self) -> TruncatedObject:
        exc = TruncatedObject("the sealed stream ended before its final segment")
        exc.index = self._next
        return exc

    def _next_batch(self, dst: memoryview | None = None) -> memoryview | None:
        """Open the next batch into ``dst`` (or the internal buffer); None at the end."""
        if self._done:
            return None
        k = self._k if self._left is None else min(self._k, self._left)
        if k == 0:
            self._done = True
            return None
        want = k * self._step
        ct = self._src.take(want)
        if ct is None:
            ct = memoryview(self._ct)[:want]
            ct = ct[: self._src.fill(ct)]
        got = len(ct)
        last_known = self._left is not None and k == self._left
        if got == want and not last_known:
            final = False  # a full batch: full-size segments are never the final one
        elif last_known and not self._final:
            if got != want:
                raise self._truncated()
            final = False
        else:  # the source ended (or this is the known last batch of a final run)
            if not self._final:
                if got % self._step or got == 0:
                    raise self._truncated()
                final = False
            elif got % self._step < self._tag:
                if got % self._step == 0:
                    self._next += got // self._step
                self._done = True
                raise self._truncated()
            else:
                final = True
        out = memoryview(self._pt) if dst is None else dst
        try:
            n = self._c.open_into(out, ct, self._next, final)
        except InvalidTag:
            self._done = True
            raise
        nseg = got // self._step + (1 if final else 0)
        self._next += nseg
        if self._left is not None:
            self._left -= nseg
        if final or self._left == 0:
            self._done = True
        return out[:n]

    def _direct_ok(self, room: int) -> bool:
        # a whole batch of plaintext fits and none of it is to be dropped or held back
        need = self._k * self._seg
        return (
            room >= need
            and not self._skip
            and (self._limit is None or self._limit - self._delivered >= need)
        )

    def readinto(self, b: Any) -> int:
        dst = memoryview(b).cast("B")
        done = 0
        while done < len(dst):
            if not self._out:
                if self._limit is not None and self._delivered >= self._limit:
                    break
                if self._direct_ok(len(dst) - done):
                    view = self._next_batch(dst[done:])
                    if view is None:
                        break
                    done += len(view)
                    self._delivered += len(view)
                    if not self._direct_ok(len(dst) - done):
                        break  # a short read keeps the caller's buffer aligned with batches
                    continue
                if not self._fill():
                    break
                continue
            n = min(len(dst) - done, len(self._out))
            dst[done : done + n] = self._out[:n]
            self._out = self._out[n:]
            self._delivered += n
            done += n
        return done

    def _fill(self) -> bool:
        view = self._next_batch()
        if view is None:
            return False
        if self._skip:
            drop = min(self._skip, len(view))
            view = view[drop:]
            self._skip -= drop
        if self._limit is not None:
            view = view[: self._limit - self._delivered]
        self._out = view
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while chunk := self.read(1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        while not self._out:
            if self._limit is not None and self._delivered >= self._limit:
                return b""
            if not self._fill():
                return b""
        n = min(size, len(self._out))
        chunk = bytes(self._out[:n])
        self._out = self._out[n:]
        self._delivered += n
        return chunk

    def close(self) -> None:
        if not self.closed:
            self._out = memoryview(b"")
            if self._pt_buf is not None:
                self._pt_buf[:] = bytes(len(self._pt_buf))
            if self._close_source:
                self._src.close()
        super().close()


def open_stream(
    source: Any,
    keyring: Keyring,
    *,
    context: bytes = b"",
    location: bytes | None = None,
    allow_retired: bool = False,
) -> Iterator[bytes]:
    """Yield the verified plaintext of a whole sealed object read from ``source``."""
    src = _Input(source)
    head = bytearray(HEADER_SIZE)
    got = src.fill(memoryview(head))
    cipher = ObjectCipher.from_header(
        keyring,
        parse_object_header(memoryview(head)[:got]),
        context=context,
        location=location,
        allow_retired=allow_retired,
    )
    reader = OpeningReader(cipher, _Rest(src), close_source=False)
    while True:
        chunk = reader.read(BATCH_BYTES)
        if not chunk:
            return
        yield chunk


class _Rest:
    """A file-like view of an :class:`_Input` that already consumed the header."""

    def __init__(self, src: _Input) -> None:
        self._src = src

    def readinto(self, b: Any) -> int:
        return self._src.fill(memoryview(b).cast("B"))

    def close(self) -> None:
        self._src.close()
