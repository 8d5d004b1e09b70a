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

Modules: ``header`` (the header and the size arithmetic), ``object_key`` (the per-object key,
:class:`ObjectCipher`), ``sources`` (what a sealing reader reads), ``sealing`` and ``opening``.
"""

from __future__ import annotations

from .header import (
    BATCH_BYTES,
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAX_SEGMENT_SIZE,
    MIN_SEGMENT_SIZE,
    VERSION,
    ObjectHeader,
    RangePlan,
    parse_object_header,
    plaintext_size,
    plan_range,
    sealed_size,
)
from .object_key import ObjectCipher
from .opening import OpeningReader, open_stream
from .sealing import SealingReader, seal_stream
from .sources import source_length

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
