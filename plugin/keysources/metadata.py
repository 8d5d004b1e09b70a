"""Authenticated key metadata: what a wrapped key store binds under its wrapping key.

A store whose keys are wrapped (master key, KMS) keeps, from store format 2 on, a *metadata
key* (32 random bytes, wrapped by the same wrapper under its own context) and an HMAC-SHA256
tag under it over :func:`canonical`: the store's version counter, the wrapping description,
and per key (in key-id order) its id, suite, state, created/rotated times and a SHA-256 of its
wrapped blob.  Editing any of them (making an old key primary, reviving a retired key, moving
blobs between keys) is detected when the store is read: KeyMetadataTampered.

Format 1 stores (written by earlier versions) have no tag; they still load, and the next write
(rotate, retire, save, rewrap) upgrades them: every blob is re-wrapped under the format 2
context, so a format 2 store stripped of its tag and presented as format 1 no longer unwraps.
What a tag cannot stop: restoring a whole earlier copy of the store (rollback), or deleting it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any, NamedTuple

from ..errors import InternalError, KeyMetadataTampered
from .records import KeyRecord

__all__ = ["FORMAT", "StoreMeta", "canonical", "metadata_tag", "tag_matches", "tampered"]

FORMAT = 2  # the store format that carries a metadata tag
_DOMAIN = b"sealstore/v2/keyring-metadata"


class StoreMeta(NamedTuple):
    """What a store keeps beside its records: format, wrapped metadata key and tag."""

    fmt: int
    key_blob: bytes | None = None
    tag: bytes | None = None

    def key_and_tag(self) -> tuple[bytes, bytes]:
        """(wrapped metadata key, tag): what a store of format 2 or later keeps."""
        if self.key_blob is None or self.tag is None:
            raise InternalError(f"store format {self.fmt} metadata without its key or tag")
        return self.key_blob, self.tag


def _field(value: bytes) -> bytes:
    return len(value).to_bytes(4, "big") + value


def _time(dt: datetime | None) -> bytes:
    # second precision: the stores keep no more (MariaDB DATETIME), and keys are made without
    return dt.replace(microsecond=0).isoformat().encode() if dt is not None else b""


def canonical(records: list[KeyRecord], *, version: int | None, wrapping: dict[str, Any]) -> bytes:
    """The length-prefixed encoding the metadata tag covers (see the module doc)."""
    out = [_DOMAIN, (version or 0).to_bytes(8, "big")]
    out.append(json.dumps(wrapping, sort_keys=True, separators=(",", ":")).encode())
    for r in sorted(records, key=lambda r: r.key_id):
        out += [
            r.key_id.to_bytes(4, "big"),
            str(r.suite).encode(),
            r.state.value.encode(),
            _time(r.created_at),
            _time(r.rotated_at),
            hashlib.sha256(r.wrapped or b"").digest(),
        ]
    return b"".join(_field(part) for part in out)


def metadata_tag(key: bytes | bytearray, data: bytes) -> bytes:
    """HMAC-SHA256 of ``data`` under the metadata key."""
    return hmac.digest(key, data, "sha256")


def tag_matches(key: bytes | bytearray, data: bytes, tag: bytes | None) -> bool:
    """Whether ``tag`` authenticates ``data`` (constant-time comparison)."""
    return tag is not None and hmac.compare_digest(metadata_tag(key, data), bytes(tag))


def tampered(where: str) -> KeyMetadataTampered:
    """The error for a failed tag: raise it from a frame that no longer holds the key."""
    return KeyMetadataTampered(
        f"{where}: the key metadata does not match its authentication tag: key ids, states, "
        "suites, dates or wrapped blobs were changed outside sealstore; restore the store "
        "from a backup"
    )
