"""The object header (magic, version, suite, flags, segment size, key id, salt, commitment) and
the size arithmetic of a sealed object: sealed and plaintext sizes, the segments a range needs."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import (
    MalformedObject,
    NotSealedObject,
    TruncatedObject,
)
from ..format import Suite, _tag_flag_problem

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


def parse_object_header(data: bytes | bytearray | memoryview) -> ObjectHeader:
    """Parse and validate the first 76 bytes of ``data``.

    NotSealedObject if the magic is missing (fewer than 4 bytes, or other bytes); MalformedObject
    for a short header or a version, suite, flag or segment size this version does not define.
    """
    view = memoryview(data).cast("B")
    if len(view) < len(MAGIC) or view[: len(MAGIC)] != MAGIC:
        raise NotSealedObject("data does not start with a sealstore object header")
    if len(view) < HEADER_SIZE:
        raise MalformedObject(f"object header truncated: {len(view)} of {HEADER_SIZE} bytes")
    _, version, suite_id, flags, seg_log2, key_id, salt, commit = _FIXED.unpack_from(view)
    if version != VERSION:
        raise MalformedObject(f"unsupported object format version 0x{version:02x} (expected 0x01)")
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
    stop = HEADER_SIZE + i1 * step + (size - i1 * segment_size + tag_size if final else step)
    return RangePlan(i0, i1, final, start, stop, first - i0 * segment_size, last - first + 1)
