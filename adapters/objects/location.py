"""The location an object is bound to: a canonical encoding of its store kind, bucket and key.

``sealstore.stream`` binds an object to opaque location bytes; a store builds them with
:func:`encode_location`, like ``sealstore.format.column_context``: length-prefixed fields behind
a domain tag naming the store kind, so no two (store, bucket, key) triples share an encoding
(``("a", "b/c")`` and ``("a/b", "c")`` differ, and an S3 object never opens as a GCS one)::

    lp(x)    = len(x) as 4-byte big-endian || x
    location = lp(domain) || lp(utf8(bucket)) || lp(utf8(key))

with ``domain = "sealstore/v1/<kind>-object"`` (S3: ``sealstore/v1/s3-object``, the encoding
objects were always bound with).  Version ids are not part of it: every version of a key lives
at the same bucket and key.
"""

from __future__ import annotations

__all__ = ["encode_location", "location_domain"]


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def location_domain(kind: str) -> bytes:
    """``sealstore/v1/<kind>-object`` (``kind``: lowercase letters and digits)."""
    if not (kind.isascii() and kind.isalnum() and kind.islower()):
        raise ValueError(f"a store kind is lowercase letters and digits, not {kind!r}")
    return f"sealstore/v1/{kind}-object".encode("ascii")


def encode_location(domain: bytes, bucket: str, key: str) -> bytes:
    """The location bytes of ``bucket/key`` under ``domain`` (TypeError/ValueError for what no
    store can name: not text, or empty)."""
    if not isinstance(bucket, str) or not isinstance(key, str):
        raise TypeError("bucket and key must be str")
    if not bucket or not key:
        raise ValueError("bucket and key must be non-empty")
    return _lp(domain) + _lp(bucket.encode("utf-8")) + _lp(key.encode("utf-8"))
