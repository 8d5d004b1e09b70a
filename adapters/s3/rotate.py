"""``sealstore s3 rotate``: the engine's object rotation (``objects/rotation.py``: the decisions
per object, the loop, the checkpoint, the report) run on S3 with an encrypted client's settings.

The client's keyring, segment size, context and location binding are the engine's; the store is
the client's raw side (``S3Store``), so every write repeats the object's S3 settings (content
headers, user metadata, tags, storage class, server-side encryption, object lock, legal hold and
a readable ACL: ``settings.py``), objects above 5 GiB take multipart uploads and copies, and
S3 errors of one object are that object's failure (the run goes on).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from ..objects.engine import ObjectSealing
from ..objects.rotation import (
    CHECKPOINT_LIMIT,
    RotationReport,
    default_checkpoint,
)
from ..objects.rotation import pending_objects as _pending
from ..objects.rotation import rotate_objects as _rotate
from ..objects.stores import parse_object_url
from .store import S3Store

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
    """The engine settings of an encrypted client (``encrypt_client``)."""
    s = client.sealstore
    return ObjectSealing(
        s.keyring, segment_size=s.segment_size, context=s.context,
        bind_location=s.bind_location, allow_retired=s.allow_retired, tenancy=s.tenancy,
    )  # fmt: skip


def pending_objects(
    client: Any, bucket: str, prefix: str = "", *, checkpoint: str | None = None
) -> int:
    """How many objects :func:`rotate_objects` with the same arguments would visit now."""
    return _pending(sealing_of(client), S3Store(client), bucket, prefix, checkpoint=checkpoint)


def rotate_objects(
    client: Any,
    bucket: str,
    prefix: str = "",
    *,
    checkpoint: str | None = None,
    dry_run: bool = False,
    seal_plaintext: bool = False,
    pause: float = 0.0,
    progress: Callable[[RotationReport, str, str], None] | None = None,
) -> RotationReport:
    """Re-seal every object under ``bucket/prefix`` with the primary key of ``client``'s
    keyring (``client`` comes from :func:`sealstore.adapters.s3.encrypt_client`); see
    :func:`sealstore.adapters.objects.rotation.rotate_objects` for the arguments."""
    return _rotate(
        sealing_of(client), S3Store(client), bucket, prefix, checkpoint=checkpoint,
        dry_run=dry_run, seal_plaintext=seal_plaintext, pause=pause, progress=progress,
        errors=(ClientError,),
    )  # fmt: skip
