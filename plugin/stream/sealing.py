"""Sealing: :class:`SealingReader` turns plaintext into the sealed stream, one batch of segments
per native call."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    NonceReuseRefused,
    SourceChanged,
)
from ..segment_log import SegmentLog
from .header import BATCH_BYTES, DEFAULT_SEGMENT_SIZE, MAX_SEGMENTS
from .object_key import ObjectCipher
from .sources import _batch_segments, _Input

if TYPE_CHECKING:
    from cryptography.utils import Buffer

    from ..keyring import Keyring


class SealingReader(io.RawIOBase):
    """A readable, binary file object whose content is the sealed form of ``source``.

    ``source`` is bytes-like, a binary file object or an iterable of bytes.  With ``length``
    (plaintext bytes from the current position; found by itself for bytes and seekable files)
    and a seekable source, the reader knows its size (``len()``) and can seek: a re-read seals
    the same segments again and raises SourceChanged, before returning anything, if a segment's
    tag differs (the source changed), so no nonce ever covers two plaintexts.  Otherwise it reads
    sequentially and finds the end by itself.

    ``first_index``/``final``/``header`` produce a part of an object: segments from
    ``first_index`` on, ending with the final segment or not, with or without the header.
    ``log``, a :class:`~sealstore.segment_log.SegmentLog` shared by every reader of one object
    key (the parts of a multipart upload), extends the re-read check across readers: segments
    sealed before from other bytes raise NonceReuseRefused before anything is returned.

    Bytes-like sources are sealed in place, and ``readinto`` a buffer that holds a whole batch
    seals straight into it, so the layer adds no copy to the cipher's own pass.
    """

    def __init__(
        self,
        cipher: ObjectCipher,
        source: Any,
        length: int | None = None,
        *,
        first_index: int = 0,
        final: bool = True,
        header: bool = True,
        log: SegmentLog | None = None,
    ) -> None:
        super().__init__()
        self._c = cipher
        self._log = log
        self._src = _Input(source)
        self._first = first_index
        self._final = final
        self._head = cipher.header_bytes if header else b""
        seg, tag = cipher.segment_size, cipher.tag_size
        self._seg, self._step, self._tag = seg, seg + tag, tag
        self._k = _batch_segments(seg)
        self._pos = 0
        self._base = 0
        known = self._src.remaining()
        if length is None:
            length = known
        elif known is not None and known != length:
            raise SourceChanged(f"the source holds {known} bytes, not the declared {length}")
        self._random = length is not None and self._src.seekable
        if self._random:
            self._base = self._src.tell()
        self._length = length
        self._size: int | None
        self._batches: int | None
        if length is not None:
            nseg = length // seg + (1 if final else 0)
            self._size = len(self._head) + cipher.segments_size(length, final)
            self._batches = -(-nseg // self._k)
            if first_index + nseg > MAX_SEGMENTS:
                raise ValueError("too many segments for one object; use a larger segment size")
        else:
            self._size = None
            self._batches = None
        self._tags: dict[int, bytes] = {}
        # allocated on first use: a caller's buffer often serves instead
        self._pt_buf: bytearray | None = None
        self._ct_buf: bytearray | None = None
        self._cur = -1  # batch whose ciphertext is in _ct (random mode)
        self._cur_len = 0
        self._off = 0  # sequential: read offset in the current batch
        self._next = 0  # sequential: next batch to seal
        self._seq_done = False  # sequential: the last batch was sealed
        self._consumed = 0  # sequential: plaintext bytes read

    @property
    def _pt(self) -> bytearray:
        if self._pt_buf is None:
            self._pt_buf = bytearray(self._k * self._seg)
        return self._pt_buf

    @property
    def _ct(self) -> bytearray:
        if self._ct_buf is None:
            self._ct_buf = bytearray(self._k * self._step + self._tag)
        return self._ct_buf

    @property
    def _ct_size(self) -> int:
        return self._k * self._step + self._tag

    # -- io plumbing --
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._random

    def __len__(self) -> int:
        if self._size is None:
            raise TypeError("the sealed size is unknown until the source ends (no length given)")
        return self._size

    @property
    def size(self) -> int | None:
        """Total bytes this reader produces, when known."""
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            if self._size is None:
                raise io.UnsupportedOperation("cannot seek from the end of an unknown size")
            offset += self._size
        if offset < 0:
            raise ValueError("negative seek position")
        if not self._random and offset != self._pos:
            raise io.UnsupportedOperation("this sealing reader only reads forward")
        self._pos = offset
        if self._random:
            # Keep the source in step and read it again rather than from the cached batch:
            # sources that report progress (s3transfer's) see exactly what is sent, and a
            # changed source is caught by the tag comparison.
            batch = max(0, offset - len(self._head)) // (self._k * self._step)
            self._src.seek(self._base + min(batch * self._k * self._seg, self._known_length))
            self._cur = -1
        return offset

    @property
    def _known_batches(self) -> int:
        """The number of batches (random mode, where the length is known)."""
        if self._batches is None:
            raise io.UnsupportedOperation("the source's length is unknown")
        return self._batches

    @property
    def _known_length(self) -> int:
        """The plaintext length (random mode, where it is known)."""
        if self._length is None:
            raise io.UnsupportedOperation("the source's length is unknown")
        return self._length

    def readinto(self, b: Buffer) -> int:  # type: ignore[override]  # (typeshed: memoryview)
        out = memoryview(b).cast("B")
        done = 0
        while done < len(out):
            at_header = self._pos < len(self._head)
            n = self._read_some(out[done:])
            done += n
            # Short reads at the header's end and at batch ends keep the caller's buffer
            # aligned with batches, so the next call can seal straight into it.
            if n == 0 or at_header or (self._at_batch_end() and len(out) - done < self._ct_size):
                break
        return done

    def _at_batch_end(self) -> bool:
        if self._random:
            return (self._pos - len(self._head)) % (self._k * self._step) == 0
        return self._off >= self._cur_len

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            if self._size is None:
                chunks = []
                while chunk := self.read(1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks)
            size = max(0, self._size - self._pos)
        buf = bytearray(size)
        view = memoryview(buf)
        n = 0
        while n < size and (k := self.readinto(view[n:])):
            n += k
        view.release()
        del buf[n:]
        return bytes(buf)

    # -- the work --
    def _read_some(self, out: memoryview) -> int:
        hl = len(self._head)
        if self._pos < hl:
            n = min(len(out), hl - self._pos)
            out[:n] = self._head[self._pos : self._pos + n]
            self._pos += n
            return n
        if self._random:
            span = self._k * self._step
            batch, off = divmod(self._pos - hl, span)
            if batch >= self._known_batches:
                return 0
            if batch != self._cur:
                room = min(span, len(self) - hl - batch * span)
                if off == 0 and len(out) >= room:  # seal straight into the caller's buffer
                    n = self._load_random(batch, out)
                    self._pos += n
                    return n
                self._cur_len = self._load_random(batch, memoryview(self._ct))
                self._cur = batch
        else:
            if self._off >= self._cur_len:
                if self._seq_done:
                    return 0
                if len(out) >= self._ct_size:  # a whole batch fits: no copy
                    n = self._load_next(out)
                    self._cur_len = self._off = n
                    self._pos += n
                    return n
                self._cur_len = self._load_next(memoryview(self._ct))
                self._off = 0
            off = self._off
        n = min(len(out), self._cur_len - off)
        if n <= 0:
            return 0
        out[:n] = memoryview(self._ct)[off : off + n]
        self._pos += n
        self._off = off + n
        return n

    def _seal(self, batch: int, pt: memoryview, final: bool, dst: memoryview) -> int:
        first = self._first + batch * self._k
        written = self._c.seal_into(dst, pt, first, final)
        if not self._random and self._log is None:
            return written
        seg, step, tag = self._seg, self._step, self._tag
        tags = b"".join(dst[i * step + seg : i * step + step] for i in range(len(pt) // seg))
        if final:
            tags += dst[written - tag : written]
        if self._random:
            old = self._tags.get(batch)
            if old is not None and old != tags:
                dst[:written] = bytes(written)
                raise SourceChanged(
                    "the source changed between two reads of the same bytes; stopped before "
                    "sending anything sealed from the changed data"
                )
            self._tags[batch] = tags
        if self._log is not None and not self._log.record(first, final, tags):
            dst[:written] = bytes(written)
            raise NonceReuseRefused(
                f"segments from {first} on were already sealed under this object key from "
                "other bytes (a part sent again with different data?); sealing these would "
                "reuse their nonces, so nothing sealed from them was sent"
            )
        return written

    def _plain(self, n: int) -> memoryview:
        view = self._src.take(n)
        if view is None:
            view = memoryview(self._pt)[:n]
            view = view[: self._src.fill(view)]
        return view

    def _load_random(self, batch: int, dst: memoryview) -> int:
        seg, k = self._seg, self._k
        start = batch * k * seg
        n = min(k * seg, self._known_length - start)
        self._src.seek(self._base + start)
        pt = self._plain(n)
        if len(pt) != n:
            raise SourceChanged(f"the source ended after {start + len(pt)} of {self._length} bytes")
        return self._seal(batch, pt, self._final and batch == self._known_batches - 1, dst)

    def _load_next(self, dst: memoryview) -> int:
        want = self._k * self._seg
        if self._length is not None:
            want = min(want, self._length - self._consumed)
        pt = self._plain(want)
        got = len(pt)
        self._consumed += got
        if self._length is not None:
            if got < want:
                raise SourceChanged(
                    f"the source ended after {self._consumed} of {self._length} declared bytes"
                )
            last = self._consumed == self._length
            if last and self._src.fill(memoryview(bytearray(1))):
                raise SourceChanged(f"the source holds more than the {self._length} declared bytes")
        else:
            last = got < want
        if last:
            self._seq_done = True
            if not self._final:
                if got % self._seg:
                    raise ValueError("a non-final run of segments must hold whole segments")
                if got == 0:
                    return 0
        batch = self._next
        self._next += 1
        n = self._seal(batch, pt, self._final and last, dst)
        if self._size is None and last:
            self._size = self._pos + n
        return n


def seal_stream(
    source: Any,
    keyring: Keyring,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    context: bytes = b"",
    location: bytes | None = None,
) -> Iterator[bytes]:
    """Yield a new sealed object (header, then batches of segments) made from ``source``;
    bound to ``location`` when it is given (see :meth:`ObjectCipher.create`)."""
    cipher = ObjectCipher.create(
        keyring, segment_size=segment_size, context=context, location=location
    )
    reader = SealingReader(cipher, source)
    while True:
        chunk = reader.read(BATCH_BYTES)
        if not chunk:
            return
        yield chunk
