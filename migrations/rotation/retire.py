"""Retiring a key safely: count what still names it, in SQL columns and S3 prefixes, first.

``sealstore keys retire ID`` refuses while :func:`find_references` finds anything: values of
encrypted or blind-index columns whose key id (read in SQL at its fixed offset) is ``ID``,
and object versions (noncurrent ones and those behind delete markers included) under the
registered S3 prefixes (``sealstore_s3_prefixes``) whose metadata or header names ``ID``.  ``--force`` retires anyway and says what will then fail to open.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from datetime import datetime, timezone

from sqlalchemy import delete, insert, inspect, select
from sqlalchemy.engine import Engine

from .status import Reference, references
from ..schema import S3_PREFIXES_TABLE, sealstore_s3_prefixes

__all__ = [
    "describe",
    "remedy",
    "find_references",
    "register_s3_prefix",
    "registered_s3_prefixes",
    "s3_references",
    "unregister_s3_prefix",
]


def register_s3_prefix(engine: Engine, url: str) -> None:
    """Record ``s3://bucket/prefix`` as holding objects sealed with this keyring (idempotent)."""
    _parse(url)
    with engine.begin() as conn:
        exists = conn.execute(
            select(sealstore_s3_prefixes.c.url).where(sealstore_s3_prefixes.c.url == url)
        ).first()
        if exists is None:
            conn.execute(
                insert(sealstore_s3_prefixes).values(
                    url=url, registered_at=datetime.now(timezone.utc)
                )
            )


def unregister_s3_prefix(engine: Engine, url: str) -> None:
    with engine.begin() as conn:
        conn.execute(delete(sealstore_s3_prefixes).where(sealstore_s3_prefixes.c.url == url))


def registered_s3_prefixes(engine: Engine) -> list[str]:
    """The registered prefixes ([] when the table does not exist)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(S3_PREFIXES_TABLE):
            return []
        return list(
            conn.execute(
                select(sealstore_s3_prefixes.c.url).order_by(sealstore_s3_prefixes.c.url)
            ).scalars()
        )


def _parse(url: str) -> tuple[str, str]:
    from ...adapters.s3.rotate import parse_s3_url

    return parse_s3_url(url)


def _object_key_id(client, bucket: str, key: str, version: str | None) -> int | None:
    """The keyring key id an object version is sealed under (metadata, else the header), or
    None."""
    from ...adapters.objects import metadata as M
    from ...errors import MalformedObject, NotSealedObject
    from ...stream import HEADER_SIZE, parse_object_header

    which = {"Bucket": bucket, "Key": key}
    if version is not None:
        which["VersionId"] = version
    head = client.head_object(**which)
    meta = {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}
    kid = meta.get(M.KEY_ID)
    if kid is not None:
        try:
            return int(kid, 16)
        except ValueError:
            pass
    if head.get("ContentLength", 0) < HEADER_SIZE:
        return None
    body = client.get_object(**which, Range=f"bytes=0-{HEADER_SIZE - 1}")["Body"].read()
    try:
        return parse_object_header(body).key_id
    except (NotSealedObject, MalformedObject):
        return None


def _object_versions(client, bucket: str, prefix: str):
    """``(key, version id)`` of every stored object version under ``prefix``: current and
    noncurrent versions, those behind a delete marker included (delete markers hold no body).
    Unversioned buckets list each object once, as version ``null``: the current ``null``
    version is asked for without a version id (not every S3 implementation takes ``null``)."""
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Versions", []):
            version = obj.get("VersionId")
            if version == "null" and obj.get("IsLatest"):
                version = None
            yield obj["Key"], version


def s3_references(client: Any, url: str, key_id: int) -> int:
    """Object versions under ``url`` sealed under ``key_id`` (one HEAD per version; ``client``
    is a plain boto3 S3 client).  Noncurrent versions count: they still open only with the
    key."""
    bucket, prefix = _parse(url)
    return sum(
        _object_key_id(client, bucket, key, version) == key_id
        for key, version in _object_versions(client, bucket, prefix)
    )


def find_references(
    engine: Engine | None,
    specs: Iterable[Any],
    key_id: int,
    *,
    s3_client: Any = None,
    s3_urls: Iterable[str] = (),
) -> list[Reference]:
    """Everything that still names ``key_id``: columns of ``specs`` (rows), and objects under
    ``s3_urls`` plus the registered prefixes of ``engine`` (needs ``s3_client``)."""
    found: list[Reference] = []
    urls = list(s3_urls)
    if engine is not None:
        found += references(engine, specs, key_id)
        urls += [u for u in registered_s3_prefixes(engine) if u not in urls]
    if urls and s3_client is None:
        raise ValueError("S3 prefixes are registered: an S3 client is needed to check them")
    for url in urls:
        n = s3_references(s3_client, url, key_id)
        if n:
            found.append(Reference(url, n, "s3"))
    return found


def remedy(refs: list[Reference]) -> str:
    """The commands that move the referencing values off the key: ``sealstore rotate`` for
    encrypted columns, ``sealstore reindex`` for blind indexes (index keys), ``sealstore s3
    rotate`` for objects."""
    fixes = []
    kinds = {r.kind for r in refs}
    if "encrypted" in kinds:
        fixes.append("`sealstore rotate`")
    if "blind index" in kinds:
        fixes.append("`sealstore reindex` (blind indexes: the index keyring's config)")
    if "s3" in kinds:
        fixes.append("`sealstore s3 rotate`")
    return " and ".join(fixes) or "`sealstore rotate`"


def describe(refs: list[Reference]) -> str:
    """``users.ssn: 12 rows; s3://b/p: 3 objects``."""
    parts = []
    for r in refs:
        unit = "objects" if r.name.startswith("s3://") else "rows"
        parts.append(f"{r.name}: {r.count} {unit}")
    return "; ".join(parts)
