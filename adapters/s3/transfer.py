"""``upload_file``/``upload_fileobj``/``copy`` for encrypted clients (boto3's managed transfers).

boto3's own methods run s3transfer, which splits an upload into parts sent by several threads;
the handlers seal each part in the thread that sends it.  These wrappers only choose a part size
that is a whole number of segments (at least 5 MiB, at most 10,000 parts) and declare it, with
the plaintext length when it is known, as request metadata hints the handlers consume.
Downloads need no wrapper: ``head_object`` reports the plaintext size and every ranged GET that
s3transfer sends is mapped to its segments.
"""

from __future__ import annotations

import copy
import os

from boto3.s3 import inject
from boto3.s3.transfer import TransferConfig
from sealstore.errors import UnsupportedOperation
from sealstore.stream import source_length

from . import metadata as M

__all__ = ["install", "part_size"]

MIN_PART = 5 << 20
MAX_PART = 5 << 30
MAX_PARTS = 10_000
MAX_SINGLE_COPY = 5 << 30


def part_size(length: int | None, wanted: int, segment_size: int) -> int:
    """A part size: ``wanted`` rounded up to whole segments, >= 5 MiB, <= 10,000 parts."""
    size = max(wanted, MIN_PART)
    if length is not None:
        size = max(size, -(-length // MAX_PARTS))
    size = -(-size // segment_size) * segment_size
    if size > MAX_PART:
        raise UnsupportedOperation(
            "the object is too large for 10,000 parts of at most 5 GiB"
        )
    return size


def _plan(sealing, length, extra_args, config):
    config = copy.copy(config or TransferConfig())
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


def install(client, sealing) -> None:
    """Give ``client`` (this instance only) the sealing versions of the managed transfers."""

    def upload_file(Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):
        extra, config = _plan(sealing, os.path.getsize(Filename), ExtraArgs, Config)
        return inject.upload_file(
            client, Filename, Bucket, Key, extra, Callback, config
        )

    def upload_fileobj(
        Fileobj, Bucket, Key, ExtraArgs=None, Callback=None, Config=None
    ):
        extra, config = _plan(sealing, source_length(Fileobj), ExtraArgs, Config)
        return inject.upload_fileobj(
            client, Fileobj, Bucket, Key, extra, Callback, config
        )

    def copy_(
        CopySource,
        Bucket,
        Key,
        ExtraArgs=None,
        Callback=None,
        SourceClient=None,
        Config=None,
    ):
        """Server-side copy of the sealed bytes with CopyObject (sources up to 5 GiB)."""
        extra = dict(ExtraArgs or {})
        from .handlers import _copy_source

        with sealing.raw() as raw:
            head = raw.head_object(**_copy_source(CopySource))
        if head["ContentLength"] > MAX_SINGLE_COPY:
            raise UnsupportedOperation(
                "copying a sealed object above 5 GiB needs a multipart copy, which an encrypted "
                "client does not do yet; download and upload it instead"
            )
        client.copy_object(CopySource=CopySource, Bucket=Bucket, Key=Key, **extra)
        if Callback is not None:
            Callback(head["ContentLength"])

    upload_file.__doc__ = inject.upload_file.__doc__
    upload_fileobj.__doc__ = inject.upload_fileobj.__doc__
    client.upload_file = upload_file
    client.upload_fileobj = upload_fileobj
    client.copy = copy_
