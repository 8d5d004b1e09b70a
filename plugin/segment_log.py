"""What was sealed under each segment nonce of one object key, so no nonce covers two plaintexts.

A segment's nonce is fixed by the object key, its index and its final flag (docs/FORMAT.md O3),
so sealing a segment again (a retry, a re-read for signing, a multipart part sent twice) uses
its nonce again.  That is safe only for the same bytes, which give the same ciphertext.  A
:class:`SegmentLog` keeps a digest of the tags of every batch of segments sealed under one key;
equal tags under one key and nonce mean equal plaintext, so a batch sealed again must give the
same digest or be refused before its bytes leave the sealing reader.
"""

from __future__ import annotations

import hashlib
import threading

__all__ = ["SegmentLog"]


class SegmentLog:
    """Digests of the sealed batches of one object key, by the index of each batch's first
    segment.  Safe to share between threads (parts of one upload sealed in parallel)."""

    __slots__ = ("_digests", "_lock")

    def __init__(self) -> None:
        self._digests: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<SegmentLog batches={len(self._digests)}>"

    def record(self, first_index: int, final: bool, tags: bytes) -> bool:
        """Record the tags of the batch starting at segment ``first_index``; False when that
        batch was sealed before with other tags (other bytes: the caller must not use them)."""
        digest = hashlib.sha256(b"\x01" if final else b"\x00")
        digest.update(tags)
        value = digest.digest()
        with self._lock:
            old = self._digests.setdefault(first_index, value)
        return old == value
