"""What still names a key among stored objects, for key retirement: the key id of each stored
object version under a prefix, read from its metadata (one HEAD) or from its 76-byte header when
the metadata was lost, without a key and without downloading a body."""

from __future__ import annotations

from sealstore.errors import MalformedObject, NotSealedObject
from sealstore.stream import HEADER_SIZE, parse_object_header

from . import metadata as M
from .engine import read_exactly
from .store import ObjectStore, StoredObject

__all__ = ["count_references", "object_key_id"]


def object_key_id(store: ObjectStore, obj: StoredObject) -> int | None:
    """The keyring key id the object version ``obj`` (from ``versions()`` or ``list()``) is
    sealed under, or None when it is not sealed."""
    head = store.head(obj.bucket, obj.key, version=obj.version)
    meta = {str(k).lower(): v for k, v in head.metadata.items()}
    kid = meta.get(M.KEY_ID)
    if kid is not None:
        try:
            return int(kid, 16)
        except ValueError:
            pass  # edited: the body's header is what opening would read
    if head.size < HEADER_SIZE:
        return None
    body = store.get(obj.bucket, obj.key, 0, HEADER_SIZE - 1, version=obj.version)
    try:
        raw = read_exactly(body, HEADER_SIZE)
    finally:
        body.close()
    try:
        return parse_object_header(raw).key_id
    except (NotSealedObject, MalformedObject):
        return None


def count_references(store: ObjectStore, bucket: str, prefix: str, key_id: int) -> int:
    """Object versions under ``bucket/prefix`` sealed under ``key_id`` (one HEAD per version).
    Noncurrent versions count: they still open only with the key."""
    return sum(object_key_id(store, obj) == key_id for obj in store.versions(bucket, prefix))
