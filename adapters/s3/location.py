"""The location an S3 object is bound to: ``sealstore.adapters.objects.location`` with the S3
domain tag (``sealstore/v1/s3-object``), the encoding S3 objects were always bound with::

    location = lp("sealstore/v1/s3-object") || lp(utf8(bucket)) || lp(utf8(key))
"""

from __future__ import annotations

from ..objects.location import encode_location, location_domain

__all__ = ["S3_DOMAIN", "object_location"]

S3_DOMAIN = location_domain("s3")


def object_location(bucket: str, key: str) -> bytes:
    """The location bytes of ``bucket/key`` (TypeError/ValueError for what S3 cannot name)."""
    return encode_location(S3_DOMAIN, bucket, key)
