"""The location an S3 object is bound to: a canonical encoding of its bucket and key.

``sealstore.stream`` binds an object to opaque location bytes; this is the S3 encoding, built
like ``sealstore.format.column_context``: length-prefixed fields behind a domain tag, so no two
(bucket, key) pairs share an encoding (``("a", "b/c")`` and ``("a/b", "c")`` differ)::

    lp(x)    = len(x) as 4-byte big-endian || x
    location = lp("sealstore/v1/s3-object") || lp(utf8(bucket)) || lp(utf8(key))

The version id is not part of it: S3 assigns it after the write, and every version of a key
lives at the same bucket and key.
"""

from __future__ import annotations

__all__ = ["object_location"]

_DOMAIN = b"sealstore/v1/s3-object"


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def object_location(bucket: str, key: str) -> bytes:
    """The location bytes of ``bucket/key`` (TypeError/ValueError for what S3 cannot name)."""
    if not isinstance(bucket, str) or not isinstance(key, str):
        raise TypeError("bucket and key must be str")
    if not bucket or not key:
        raise ValueError("bucket and key must be non-empty")
    return _lp(_DOMAIN) + _lp(bucket.encode("utf-8")) + _lp(key.encode("utf-8"))
