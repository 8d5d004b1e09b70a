"""The sealed object format: a header, then the body sealed in fixed-size segments.

An object is ``header || segment_0 || ... || segment_{k}`` (specified byte by byte in
``docs/FORMAT.md``, section "Objects")::

    offset  size  field
    0       4     magic      "SSOB"
    4       1     version    0x01
    5       1     suite      as in sealed values (0x01 AEGIS-128L ... 0x10 AES-256-GCM)
    6       1     flags      bit0: 256-bit tag (AEGIS only); bit1: bound to a location;
                             other bits reserved, 0
    7       1     seg_log2   plaintext segment size = 2**seg_log2, 10..24
    8       4     key_id     keyring key, big-endian
    12      32    salt       random per object (bound objects: 24 random bytes || location check)
    44      32    commit     key commitment (third HKDF output below)

One HKDF-SHA256 over the keyring key's root material, with ``salt`` as salt and
``"sealstore/v1/object" || header[0:12] || SHA-256(context)`` as info, gives the object key, the
nonce prefix (11 bytes for AEGIS, 7 for AES-GCM) and the 32-byte commitment.  Every plaintext
segment is ``segment_size`` bytes except the last, which is shorter (possibly empty), so an object
of ``n`` bytes has ``n // segment_size + 1`` segments.  Segment ``i`` is sealed with nonce
``prefix || BE32(i) || final`` and the 76 header bytes as associated data: truncation,
reordering, duplication, extension and any header edit fail.

:class:`ObjectCipher` is the per-object key; :class:`SealingReader` turns plaintext (bytes, a file
object or an iterable of chunks) into the sealed stream, :class:`OpeningReader` turns a sealed
stream (or a run of its segments, for ranged reads) back into plaintext that was verified before it
is released.  Both work in batches of segments, one native call per batch (GIL released), so memory
stays at a few segments per stream.  Nothing here knows about S3.
"""

from __future__ import annotations

import hmac
import io
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import (
    InvalidTag,
    KeyCommitmentMismatch,
    KeyNotUsable,
    MalformedObject,
    NonceReuseRefused,
    NotSealedObject,
    SourceChanged,
    TruncatedObject,
    WrongLocation,
)
from .format import Suite, _tag_flag_problem, context_digest
from .keyring import make_cipher
from .segment_log import SegmentLog

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_SEGMENT_SIZE",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_SEGMENT_SIZE",
    "MIN_SEGMENT_SIZE",
    "VERSION",
    "ObjectCipher",
    "ObjectHeader",
    "OpeningReader",
    "RangePlan",
    "SealingReader",
    "open_stream",
    "parse_object_header",
    "plaintext_size",
    "plan_range",
    "seal_stream",
    "sealed_size",
    "source_length",
]

MAGIC = b"SSOB"
VERSION = 0x01
HEADER_SIZE = 76
FLAG_TAG256 = 0x01
FLAG_LOCATION = 0x02
_KNOWN_FLAGS = FLAG_TAG256 | FLAG_LOCATION
MIN_SEGMENT_LOG2 = 10
MAX_SEGMENT_LOG2 = 24
MIN_SEGMENT_SIZE = 1 << MIN_SEGMENT_LOG2
MAX_SEGMENT_SIZE = 1 << MAX_SEGMENT_LOG2
#: Default plaintext segment size (see docs/FORMAT.md for the measurements behind it).
DEFAULT_SEGMENT_SIZE = 256 << 10
#: Plaintext bytes handed to the native segment loop per call (at least one segment).
BATCH_BYTES = 2 << 20
MAX_SEGMENTS = 1 << 32

_FIXED = struct.Struct(">4sBBBBI32s32s")
_INFO = b"sealstore/v1/object"
_BOUND_INFO = b"sealstore/v1/object-bound"
_CHECK_INFO = b"sealstore/v1/object-location"
_COMMIT_SIZE = 32
_SEGMENT_NONCE_TAIL = 5  # a segment nonce ends with BE32(segment index) || final flag
_CHECK_SIZE = 8  # location check: the last bytes of the salt of a bound object


def _segment_log2(segment_size: int) -> int:
    if (
        not isinstance(segment_size, int)
        or isinstance(segment_size, bool)
        or segment_size < MIN_SEGMENT_SIZE
        or segment_size > MAX_SEGMENT_SIZE
        or segment_size & (segment_size - 1)
    ):
        raise ValueError(
            f"segment_size must be a power of two from {MIN_SEGMENT_SIZE} to {MAX_SEGMENT_SIZE}, "
            f"not {segment_size!r}"
        )
    return segment_size.bit_length() - 1


class ObjectHeader(NamedTuple):
    """The parsed 76-byte object header (not trusted until its commitment checks)."""

    version: int
    suite: Suite
    flags: int
    seg_log2: int
    key_id: int
    salt: bytes
    commit: bytes

    @property
    def segment_size(self) -> int:
        return 1 << self.seg_log2

    @property
    def tag_size(self) -> int:
        return 32 if self.flags & FLAG_TAG256 else 16

    @property
    def key_id_hex(self) -> str:
        return f"{self.key_id:08x}"

    @property
    def bound(self) -> bool:
        """The object is bound to the location it was sealed for (flag bit 1)."""
        return bool(self.flags & FLAG_LOCATION)

    def pack(self) -> bytes:
        return _FIXED.pack(
            MAGIC,
            self.version,
            self.suite,
            self.flags,
            self.seg_log2,
            self.key_id,
            self.salt,
            self.commit,
        )

    def sealed_size(self, n: int) -> int:
        """Bytes of the whole object (header included) for ``n`` plaintext bytes."""
        return sealed_size(n, self.segment_size, self.tag_size)

    def plaintext_size(self, sealed: int) -> int:
        """Plaintext bytes of a whole object of ``sealed`` bytes (TruncatedObject if impossible)."""
        return plaintext_size(sealed, self.segment_size, self.tag_size)


def parse_object_header(data) -> ObjectHeader:
    """Parse and validate the first 76 bytes of ``data``.

    NotSealedObject if the magic is missing (fewer than 4 bytes, or other bytes); MalformedObject
    for a short header or a version, suite, flag or segment size this version does not define.
    """
    view = memoryview(data).cast("B")
    if len(view) < len(MAGIC) or view[: len(MAGIC)] != MAGIC:
        raise NotSealedObject("data does not start with a sealstore object header")
    if len(view) < HEADER_SIZE:
        raise MalformedObject(
            f"object header truncated: {len(view)} of {HEADER_SIZE} bytes"
        )
    _, version, suite_id, flags, seg_log2, key_id, salt, commit = _FIXED.unpack_from(
        view
    )
    if version != VERSION:
        raise MalformedObject(
            f"unsupported object format version 0x{version:02x} (expected 0x01)"
        )
    try:
        suite = Suite(suite_id)
    except ValueError:
        raise MalformedObject(f"unknown suite id 0x{suite_id:02x}") from None
    if flags & ~_KNOWN_FLAGS:
        raise MalformedObject(f"reserved object flag bits set (flags 0x{flags:02x})")
    tag_size = 32 if flags & FLAG_TAG256 else 16
    if tag_size not in suite.spec.tag_sizes:
        raise MalformedObject(f"{suite} objects {_tag_flag_problem(tag_size)}")
    if not MIN_SEGMENT_LOG2 <= seg_log2 <= MAX_SEGMENT_LOG2:
        raise MalformedObject(f"segment size 2**{seg_log2} out of range")
    return ObjectHeader(version, suite, flags, seg_log2, key_id, salt, commit)


# ---- size arithmetic ---------------------------------------------------------------------------


def sealed_size(n: int, segment_size: int, tag_size: int) -> int:
    """Bytes of a sealed object (header included) holding ``n`` plaintext bytes."""
    if n < 0:
        raise ValueError("plaintext size must be >= 0")
    return HEADER_SIZE + n + (n // segment_size + 1) * tag_size


def plaintext_size(sealed: int, segment_size: int, tag_size: int) -> int:
    """Inverse of :func:`sealed_size`; TruncatedObject when no plaintext size gives ``sealed``."""
    body = sealed - HEADER_SIZE
    full, rest = divmod(body, segment_size + tag_size) if body >= 0 else (0, -1)
    if rest < tag_size:
        exc = TruncatedObject(
            f"a sealed object cannot be {sealed} bytes long (truncated or extended)"
        )
        exc.index = max(full, 0)
        raise exc
    return full * segment_size + rest - tag_size


class RangePlan(NamedTuple):
    """Which segments and sealed bytes serve the plaintext bytes ``first..last`` (inclusive)."""

    first_segment: int
    last_segment: int
    final: bool  #: the last segment is the object's final one
    start: int  #: offset of the first sealed segment in the object
    stop: int  #: offset one past the last sealed segment
    skip: int  #: plaintext bytes to drop from the first segment
    length: int  #: plaintext bytes to return

    @property
    def segments(self) -> int:
        return self.last_segment - self.first_segment + 1


def plan_range(
    first: int, last: int | None, size: int, segment_size: int, tag_size: int
) -> RangePlan:
    """Map plaintext bytes ``first..last`` (inclusive, ``last`` clipped to the end, None = to the
    end) of an object of ``size`` plaintext bytes to its covering segments."""
    if not 0 <= first < size:
        raise ValueError(f"range start {first} is not inside an object of {size} bytes")
    last = size - 1 if last is None or last >= size else last
    if last < first:
        raise ValueError(f"range end {last} is before its start {first}")
    step = segment_size + tag_size
    i0, i1 = first // segment_size, last // segment_size
    final_index = size // segment_size
    final = i1 == final_index
    start = HEADER_SIZE + i0 * step
    stop = (
        HEADER_SIZE
        + i1 * step
        + (size - i1 * segment_size + tag_size if final else step)
    )
    return RangePlan(
        i0, i1, final, start, stop, first - i0 * segment_size, last - first + 1
    )


# ---- the per-object key ------------------------------------------------------------------------


def _usable_key(keyring, key_id: int, allow_retired: bool):
    key = keyring.get(key_id)  # UnknownKeyId
    state = str(key.state)
    if state == "destroyed":
        raise KeyNotUsable(f"key {key.id_hex} is destroyed")
    if state == "retired" and not (allow_retired or keyring.allow_retired):
        raise KeyNotUsable(
            f"key {key.id_hex} is retired; pass allow_retired=True to open its objects"
        )
    return key


def _key_and_prefix_sizes(suite: Suite) -> tuple[int, int]:
    """Object key bytes and segment-nonce prefix bytes of ``suite`` (the nonce less the index
    and final flag)."""
    nonce_size = suite.spec.nonce_size
    return suite.spec.key_size, nonce_size - _SEGMENT_NONCE_TAIL


def _derive(
    material: bytes, header_head: bytes, salt: bytes, suite: Suite, context
) -> tuple:
    key_len, prefix_len = _key_and_prefix_sizes(suite)
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=key_len + prefix_len + _COMMIT_SIZE,
        salt=salt,
        info=_INFO + header_head + context_digest(context),
    ).derive(material)
    return (
        okm[:key_len],
        okm[key_len : key_len + prefix_len],
        okm[key_len + prefix_len :],
    )


def _location_check(
    material: bytes, header_head: bytes, random_salt: bytes, context, location
) -> bytes:
    """The keyed location check a bound object stores at the end of its salt."""
    return HKDF(
        algorithm=hashes.SHA256(),
        length=_CHECK_SIZE,
        salt=random_salt,
        info=_CHECK_INFO + header_head + context_digest(context) + context_digest(location),
    ).derive(material)


def _derive_bound(
    material: bytes, header_head: bytes, salt: bytes, suite: Suite, context, location
) -> tuple:
    """Object key and nonce prefix of a bound object (they depend on the location)."""
    key_len, prefix_len = _key_and_prefix_sizes(suite)
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=key_len + prefix_len,
        salt=salt,
        info=_BOUND_INFO + header_head + context_digest(context) + context_digest(location),
    ).derive(material)
    return okm[:key_len], okm[key_len:]


def _location_matches(material, head, salt, context, location) -> bool:
    """Whether a bound object's stored location check is the one of ``location``.  Returns
    instead of raising, so no key material is in the locals of a frame that raises."""
    random_salt, stored = salt[: 32 - _CHECK_SIZE], salt[32 - _CHECK_SIZE :]
    return hmac.compare_digest(_location_check(material, head, random_salt, context, location), stored)


_NO_LOCATION = ("the object is bound to the location it was sealed for, and no location was given "
                "to open it")
_OTHER_LOCATION = ("the object was sealed for another location (moved or copied by a tool other "
                   "than sealstore?); it opens only where it was written")


class ObjectCipher:
    """The derived key of one object and its segment loop.

    ``ObjectCipher.create(keyring)`` starts a new object under the primary key (fresh salt);
    ``ObjectCipher.from_header(keyring, header)`` re-derives the key of an existing object and
    checks its commitment before anything is decrypted (UnknownKeyId, KeyNotUsable,
    MalformedObject or KeyCommitmentMismatch).  Safe to share between threads.
    """

    __slots__ = (
        "_cipher",
        "_prefix",
        "header",
        "header_bytes",
        "segment_size",
        "tag_size",
    )

    def __init__(self, header: ObjectHeader, cipher, prefix: bytes) -> None:
        self.header = header
        self.header_bytes = header.pack()
        self.segment_size = header.segment_size
        self.tag_size = header.tag_size
        self._cipher = cipher
        self._prefix = prefix

    @classmethod
    def create(
        cls,
        keyring,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        context=b"",
        location=None,
    ) -> ObjectCipher:
        """``location``: bytes naming where the object will live (None: not bound)."""
        seg_log2 = _segment_log2(segment_size)
        key = keyring.primary
        suite = key.suite
        tag_size = suite.spec.tag_size_for(keyring.tag_size)
        flags = (FLAG_TAG256 if tag_size == 32 else 0) | (
            0 if location is None else FLAG_LOCATION
        )
        salt = os.urandom(32)
        head = _FIXED.pack(
            MAGIC, VERSION, suite, flags, seg_log2, key.key_id, salt, b""
        )[:12]
        material = key.reveal_material()
        if location is not None:
            random_salt = salt[: 32 - _CHECK_SIZE]
            salt = random_salt + _location_check(
                material, head, random_salt, context, location
            )
        okey, prefix, commit = _derive(material, head, salt, suite, context)
        if location is not None:
            okey, prefix = _derive_bound(material, head, salt, suite, context, location)
        header = ObjectHeader(VERSION, suite, flags, seg_log2, key.key_id, salt, commit)
        return cls(header, make_cipher(suite, okey, tag_size), prefix)

    @classmethod
    def from_header(
        cls, keyring, header, *, context=b"", location=None, allow_retired: bool = False
    ) -> ObjectCipher:
        """``location``: where the object is read from; it must be the one a bound object was
        sealed for (WrongLocation otherwise) and is ignored for objects that are not bound."""
        h = header if isinstance(header, ObjectHeader) else parse_object_header(header)
        key = _usable_key(keyring, h.key_id, allow_retired)
        if key.suite.spec.family != h.suite.spec.family:
            raise MalformedObject(
                f"object names suite {h.suite} but key {key.id_hex} is a {key.suite} key"
            )
        keyring.check_tag_size(h.suite, h.tag_size, h.key_id)  # ShortTagRefused
        material, head = key.reveal_material(), h.pack()[:12]
        okey, prefix, commit = _derive(material, head, h.salt, h.suite, context)
        if not hmac.compare_digest(commit, h.commit):
            # no key material, derived key or expected commitment in the locals of a frame that
            # raises: error reporters record them
            del okey, prefix, commit, material
            raise KeyCommitmentMismatch(
                f"object header does not match key {key.id_hex} (edited header, another key "
                "with this id, or a different context)"
            )
        if h.bound:
            if location is None or not _location_matches(material, head, h.salt, context, location):
                del okey, prefix, commit, material
                raise WrongLocation(_NO_LOCATION if location is None else _OTHER_LOCATION)
            okey, prefix = _derive_bound(material, head, h.salt, h.suite, context, location)
        return cls(h, make_cipher(h.suite, okey, h.tag_size), prefix)

    def __repr__(self) -> str:
        h = self.header
        return (
            f"<ObjectCipher suite={h.suite} key_id={h.key_id_hex} segment_size={self.segment_size} "
            f"tag_size={self.tag_size}>"
        )

    def __reduce__(self):
        raise TypeError("ObjectCipher objects hold a key and cannot be pickled")

    @property
    def kernel(self) -> str:
        return self._cipher.kernel

    def sealed_size(self, n: int) -> int:
        return sealed_size(n, self.segment_size, self.tag_size)

    def plaintext_size(self, sealed: int) -> int:
        return plaintext_size(sealed, self.segment_size, self.tag_size)

    def segments_size(self, n: int, final: bool) -> int:
        """Sealed bytes of ``n`` plaintext bytes sealed as a run of segments (no header)."""
        seg = self.segment_size
        if not final and n % seg:
            raise ValueError(
                f"a non-final run must hold whole segments of {seg} bytes, not {n}"
            )
        return n + (n // seg + (1 if final else 0)) * self.tag_size

    def seal_into(self, out, data, first_index: int, final: bool) -> int:
        """Seal ``data`` as segments ``first_index, ...`` into ``out`` (one native call)."""
        return self._cipher.seal_segments_into(
            out,
            data,
            self.segment_size,
            self._prefix,
            first_index,
            final,
            self.header_bytes,
        )

    def open_into(self, out, data, first_index: int, final: bool) -> int:
        """Open sealed segments ``first_index, ...`` into ``out``; InvalidTag has ``.index``."""
        return self._cipher.open_segments_into(
            out,
            data,
            self.segment_size,
            self._prefix,
            first_index,
            final,
            self.header_bytes,
        )

    def seal(self, data, first_index: int = 0, final: bool = True) -> bytes:
        """The sealed segments of ``data`` as bytes (no header)."""
        view = memoryview(data).cast("B")
        out = bytearray(self.segments_size(len(view), final))
        self.seal_into(out, view, first_index, final)
        return bytes(out)

    def reader(self, source, length: int | None = None, **kwargs) -> SealingReader:
        """A :class:`SealingReader` of ``source`` under this key."""
        return SealingReader(self, source, length, **kwargs)

    def opener(self, source, **kwargs) -> OpeningReader:
        """An :class:`OpeningReader` of sealed segments read from ``source``."""
        return OpeningReader(self, source, **kwargs)


# ---- sources -----------------------------------------------------------------------------------


class _Input:
    """Fill caller buffers from bytes-like data, a binary file object or an iterable of chunks."""

    __slots__ = ("_file", "_it", "_pending", "_pos", "_readinto", "_view")

    def __init__(self, src) -> None:
        self._view = self._file = self._readinto = self._it = None
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
        except (
            AttributeError
        ):  # e.g. s3transfer's ReadFileChunk: seek/tell without seekable()
            return hasattr(f, "seek") and hasattr(f, "tell")
        except ValueError:
            return False

    def remaining(self) -> int | None:
        """Bytes left from the current position, if that can be known without reading."""
        if self._view is not None:
            return len(self._view) - self._pos
        if self.seekable:
            f = self._file
            pos = f.tell()
            f.seek(0, io.SEEK_END)
            end = f.tell()  # not seek()'s return value: some file-likes return None
            f.seek(pos)
            return end - pos
        return None

    def tell(self) -> int:
        return self._pos if self._view is not None else self._file.tell()

    def seek(self, pos: int) -> None:
        if self._view is not None:
            self._pos = pos
        else:
            self._file.seek(pos)

    def fill(self, buf: memoryview) -> int:
        """Fill ``buf`` completely unless the source ends first; returns the bytes written."""
        want = len(buf)
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
                    raise TypeError(
                        "the file object returned str; open it in binary mode"
                    )
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


def source_length(source) -> int | None:
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


# ---- sealing -----------------------------------------------------------------------------------


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
        source,
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
            raise SourceChanged(
                f"the source holds {known} bytes, not the declared {length}"
            )
        self._random = length is not None and self._src.seekable
        if self._random:
            self._base = self._src.tell()
        self._length = length
        if length is not None:
            nseg = length // seg + (1 if final else 0)
            self._size = len(self._head) + cipher.segments_size(length, final)
            self._batches = -(-nseg // self._k)
            if first_index + nseg > MAX_SEGMENTS:
                raise ValueError(
                    "too many segments for one object; use a larger segment size"
                )
        else:
            self._size = None
            self._batches = None
        self._tags: dict[int, bytes] = {}
        self._pt_buf = (
            None  # allocated on first use: a caller's buffer often serves instead
        )
        self._ct_buf = None
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
            raise TypeError(
                "the sealed size is unknown until the source ends (no length given)"
            )
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
                raise io.UnsupportedOperation(
                    "cannot seek from the end of an unknown size"
                )
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
            self._src.seek(self._base + min(batch * self._k * self._seg, self._length))
            self._cur = -1
        return offset

    def readinto(self, b) -> int:
        out = memoryview(b).cast("B")
        done = 0
        while done < len(out):
            at_header = self._pos < len(self._head)
            n = self._read_some(out[done:])
            done += n
            # Short reads at the header's end and at batch ends keep the caller's buffer
            # aligned with batches, so the next call can seal straight into it.
            if (
                n == 0
                or at_header
                or (self._at_batch_end() and len(out) - done < self._ct_size)
            ):
                break
        return done

    def _at_batch_end(self) -> bool:
        if self._random:
            return (self._pos - len(self._head)) % (self._k * self._step) == 0
        return self._off >= self._cur_len

    def read(self, size: int = -1) -> bytes:
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
            if batch >= self._batches:
                return 0
            if batch != self._cur:
                room = min(span, self._size - hl - batch * span)
                if (
                    off == 0 and len(out) >= room
                ):  # seal straight into the caller's buffer
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
        tags = b"".join(
            dst[i * step + seg : i * step + step] for i in range(len(pt) // seg)
        )
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
        n = min(k * seg, self._length - start)
        self._src.seek(self._base + start)
        pt = self._plain(n)
        if len(pt) != n:
            raise SourceChanged(
                f"the source ended after {start + len(pt)} of {self._length} bytes"
            )
        return self._seal(batch, pt, self._final and batch == self._batches - 1, dst)

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
                raise SourceChanged(
                    f"the source holds more than the {self._length} declared bytes"
                )
        else:
            last = got < want
        if last:
            self._seq_done = True
            if not self._final:
                if got % self._seg:
                    raise ValueError(
                        "a non-final run of segments must hold whole segments"
                    )
                if got == 0:
                    return 0
        batch = self._next
        self._next += 1
        n = self._seal(batch, pt, self._final and last, dst)
        if self._size is None and last:
            self._size = self._pos + n
        return n


def seal_stream(
    source,
    keyring,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    context=b"",
    location=None,
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


# ---- opening -----------------------------------------------------------------------------------


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
        source,
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
        self._ct_buf = (
            None  # allocated on first use (bytes sources and large reads skip them)
        )
        self._pt_buf = None
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

    def _truncated(self):
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

    def readinto(self, b) -> int:
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
    source, keyring, *, context=b"", location=None, allow_retired: bool = False
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

    def readinto(self, b) -> int:
        return self._src.fill(memoryview(b).cast("B"))

    def close(self) -> None:
        self._src.close()
