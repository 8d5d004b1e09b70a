"""``sealstore s3 rotate``: the engine's object rotation (``objects/rotation.py``: the decisions
per object, the loop, the checkpoint, the report) run on S3 with an encrypted client's settings.

The client's keyring, segment size, context and location binding are the engine's; the store is
the client's raw side (``S3Store``), so every write repeats the object's S3 settings (content
headers, user metadata, tags, storage class, server-side encryption, object lock, legal hold and
a readable ACL: ``settings.py``), objects above 5 GiB take multipart uploads and copies, and
S3 errors of one object are that object's failure (the run goes on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..objects.engine import ObjectSealing
from ..objects.rotation import (
    CHECKPOINT_LIMIT,
    RotationOptions,
    RotationReport,
    default_checkpoint,
)
from ..objects.rotation import pending_objects as _pending
from ..objects.rotation import rotate_objects as _rotate
from ..objects.stores import parse_object_url
from .store import S3Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "CHECKPOINT_LIMIT",
    "RotationReport",
    "default_checkpoint",
    "parse_s3_url",
    "pending_objects",
    "rotate_objects",
    "sealing_of",
]


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> ``(bucket, prefix)``."""
    try:
        parsed = parse_object_url(url)
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme != "s3":
        raise ValueError(f"expected s3://BUCKET[/PREFIX], got {url!r}")
    return parsed.bucket, parsed.prefix


def sealing_of(client: Any) -> ObjectSealing:
    """The engine settings of an encrypted client (``encrypt_client``), passthrough off."""
    s = client.sealstore
    return ObjectSealing.from_settings(s.keyring, s.settings.replace(passthrough=False))


def pending_objects(
    client: Any, bucket: str, prefix: str = "", *, checkpoint: str | None = None
) -> int:
    """How many objects :func:`rotate_objects` with the same arguments would visit now."""
    return _pending(sealing_of(client), S3Store(client), bucket, prefix, checkpoint=checkpoint)


def rotate_objects(
    client: Any, bucket: str, prefix: str = "", **options: Unpack[RotationOptions]
) -> RotationReport:
    """Re-seal every object under ``bucket/prefix`` with the primary key of ``client``'s
    keyring (``client`` comes from :func:`sealstore.adapters.s3.encrypt_client`); ``options``
    are those of :func:`sealstore.adapters.objects.rotation.rotate_objects` (S3 errors of one
    object are that object's failure: the store's ``client_errors``)."""
    return _rotate(sealing_of(client), S3Store(client), bucket, prefix, **options)
