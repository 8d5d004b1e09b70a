"""``upload_file``/``upload_fileobj``/``copy`` for encrypted clients (boto3's managed transfers).

boto3's own methods run s3transfer, which splits an upload into parts sent by several threads;
the handlers seal each part in the thread that sends it.  These wrappers only choose a part size
that is a whole number of segments (at least 5 MiB, at most 10,000 parts) and declare it, with
the plaintext length when it is known, as request metadata hints the handlers consume.
Downloads need no sealing logic (``head_object`` reports the plaintext size and every ranged
GET that s3transfer sends is mapped to its segments), only the classic manager.  ``copy`` is
the encrypted client's ``copy_object``, which re-seals the object to its destination
(``copying.py``).

boto3 may hand a managed transfer to the CRT transfer manager (``awscrt`` installed, and
``TransferConfig(preferred_transfer_client="crt")`` or a CRT-optimized instance type), which
sends and receives bodies itself, never through the client's handlers: an upload would leave
in clear.  An encrypted client never takes that path: its transfer methods (uploads and
downloads) always run the classic manager, and :func:`keep_off_crt` makes boto3's own check
(``boto3.crt.is_crt_compatible_request``, where boto3 falls back to the classic manager) answer
no for encrypted clients, so ``S3Transfer(client)`` and ``create_transfer_manager(client, ...)``
stay classic too.
"""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Any

from boto3.s3 import inject
from boto3.s3.constants import CLASSIC_TRANSFER_CLIENT
from boto3.s3.transfer import TransferConfig
from botocore.compat import HAS_CRT
from sealstore.errors import UnsealedPath
from sealstore.stream import source_length

from ..objects import metadata as M
from ..objects.parts import part_size as _part_size
from ..objects.store import PartLimits

if HAS_CRT:
    import boto3.crt as boto3_crt
else:  # without awscrt boto3 has no CRT path
    boto3_crt = None

__all__ = ["classic", "install", "keep_off_crt", "part_size"]

MIN_PART = 5 << 20
MAX_PART = 5 << 30
MAX_PARTS = 10_000


def part_size(length: int | None, wanted: int, segment_size: int) -> int:
    """A part size: ``wanted`` rounded up to whole segments, >= 5 MiB, <= 10,000 parts (the
    engine's part planning with S3's limits)."""
    limits = PartLimits(MIN_PART, MAX_PART, MAX_PARTS, MAX_PART)
    return _part_size(length, wanted, segment_size, limits)


def classic(config: Any) -> TransferConfig:
    """A copy of ``config`` (or the default) that runs the classic transfer manager, the one
    whose requests go through the client and its sealing handlers."""
    config = copy.copy(config or TransferConfig())
    config.preferred_transfer_client = CLASSIC_TRANSFER_CLIENT
    return config


def keep_off_crt() -> None:
    """Make boto3 fall back to the classic manager for encrypted clients (idempotent).

    UnsealedPath if awscrt is installed but this boto3 has no such check to hook: a transfer
    built from an encrypted client could then bypass the handlers."""
    if boto3_crt is None:
        return
    original = getattr(boto3_crt, "is_crt_compatible_request", None)
    if original is None:
        raise UnsealedPath(
            "awscrt is installed and this boto3 has no is_crt_compatible_request to keep "
            "encrypted clients off the CRT transfer manager (which sends bodies unsealed); "
            "uninstall awscrt or use a boto3 sealstore supports"
        )
    if getattr(original, "sealstore_guard", False):
        return

    def is_crt_compatible_request(client: Any, crt_s3_client: Any) -> Any:
        if getattr(client, "sealstore", None) is not None:
            return False  # the CRT would send and receive bodies around the handlers
        return original(client, crt_s3_client)

    setattr(is_crt_compatible_request, "sealstore_guard", True)
    is_crt_compatible_request.__doc__ = original.__doc__
    boto3_crt.is_crt_compatible_request = is_crt_compatible_request


def _plan(sealing: Any, length: Any, extra_args: Any, config: Any) -> Any:
    config = classic(config)
    size = part_size(length, config.multipart_chunksize, sealing.segment_size)
    config.multipart_chunksize = size
    extra = dict(extra_args or {})
    meta = dict(extra.get("Metadata") or {})
    M.reject_reserved(meta)
    meta[M.PART_SIZE] = str(size)
    if length is not None:
        meta[M.LENGTH] = str(length)
    extra["Metadata"] = meta
    return extra, config


def _tenant(sealing: Any, bucket: Any, key: Any) -> contextlib.AbstractContextManager[Any]:
    """The object's tenant for the transfer's worker threads (``objects/tenancy.py``)."""
    if sealing.tenancy is None:
        return contextlib.nullcontext()
    return sealing.tenancy.transfer(bucket, key)  # type: ignore[no-any-return]


def install(client: Any, sealing: Any) -> None:
    """Give ``client`` (this instance only) the sealing versions of the managed transfers
    (:func:`keep_off_crt` must have run)."""

    def upload_file(
        Filename: Any,
        Bucket: Any,
        Key: Any,
        ExtraArgs: Any = None,
        Callback: Any = None,
        Config: Any = None,
    ) -> Any:
        extra, config = _plan(sealing, os.path.getsize(Filename), ExtraArgs, Config)
        with _tenant(sealing, Bucket, Key):
            return inject.upload_file(client, Filename, Bucket, Key, extra, Callback, config)

    def upload_fileobj(
        Fileobj: Any,
        Bucket: Any,
        Key: Any,
        ExtraArgs: Any = None,
        Callback: Any = None,
        Config: Any = None,
    ) -> Any:
        extra, config = _plan(sealing, source_length(Fileobj), ExtraArgs, Config)
        with _tenant(sealing, Bucket, Key):
            return inject.upload_fileobj(client, Fileobj, Bucket, Key, extra, Callback, config)

    def download_file(
        Bucket: Any,
        Key: Any,
        Filename: Any,
        ExtraArgs: Any = None,
        Callback: Any = None,
        Config: Any = None,
    ) -> Any:
        with _tenant(sealing, Bucket, Key):
            return inject.download_file(
                client, Bucket, Key, Filename, ExtraArgs, Callback, classic(Config)
            )

    def download_fileobj(
        Bucket: Any,
        Key: Any,
        Fileobj: Any,
        ExtraArgs: Any = None,
        Callback: Any = None,
        Config: Any = None,
    ) -> Any:
        with _tenant(sealing, Bucket, Key):
            return inject.download_fileobj(
                client, Bucket, Key, Fileobj, ExtraArgs, Callback, classic(Config)
            )

    def copy_(
        CopySource: Any,
        Bucket: str,
        Key: str,
        ExtraArgs: Any = None,
        Callback: Any = None,
        SourceClient: Any = None,
        Config: Any = None,
    ) -> Any:
        """Copy an object through the encrypted client's ``copy_object``, which re-seals it to
        the destination (in parallel parts when large) or lets S3 copy unbound bytes (see
        ``copying.py``); ``Callback`` gets the source's stored size once done."""
        response = client.copy_object(
            CopySource=CopySource, Bucket=Bucket, Key=Key, **dict(ExtraArgs or {})
        )
        if Callback is not None:
            with sealing.raw() as raw:
                Callback(raw.head_object(Bucket=Bucket, Key=Key)["ContentLength"])
        return response

    for method in (upload_file, upload_fileobj, download_file, download_fileobj):
        method.__doc__ = getattr(inject, method.__name__).__doc__
        setattr(client, method.__name__, method)
    client.copy = copy_
