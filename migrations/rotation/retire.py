"""Retiring a key safely: count what still names it, in SQL columns and object prefixes, first.

``sealstore keys retire ID`` refuses while :func:`find_references` finds anything: values of
encrypted or blind-index columns whose key id (read in SQL at its fixed offset) is ``ID``,
and object versions (noncurrent ones and those behind delete markers included) under the given
and the registered object prefixes (``sealstore_object_prefixes``: ``s3://b/p`` and every other
store of ``sealstore.adapters.objects.stores``) whose metadata or header names ``ID``, counted
through the object engine.  ``--force`` retires anyway and says what will then fail to open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import delete, insert, inspect, select
from sqlalchemy.engine import Engine

from ...adapters.objects.stores import STORE_KINDS, ObjectURL, open_store, parse_object_url
from ..schema import OBJECT_PREFIXES_TABLE, sealstore_object_prefixes
from .status import Reference, references

__all__ = [
    "describe",
    "find_references",
    "object_references",
    "register_object_prefix",
    "register_s3_prefix",
    "registered_object_prefixes",
    "remedy",
    "unregister_object_prefix",
    "unregister_s3_prefix",
]

_T = sealstore_object_prefixes


def _where(url: ObjectURL) -> Any:
    return (_T.c.scheme == url.scheme) & (_T.c.bucket == url.bucket) & (_T.c.prefix == url.prefix)


def register_object_prefix(engine: Engine, url: str) -> None:
    """Record ``scheme://bucket/prefix`` (a known store's) as holding objects sealed with this
    keyring (idempotent); ValueError for another URL."""
    parsed = parse_object_url(url)
    with engine.begin() as conn:
        if conn.execute(select(_T.c.scheme).where(_where(parsed))).first() is None:
            conn.execute(
                insert(_T).values(
                    scheme=parsed.scheme, bucket=parsed.bucket, prefix=parsed.prefix,
                    registered_at=datetime.now(timezone.utc),
                )
            )  # fmt: skip


def unregister_object_prefix(engine: Engine, url: str) -> None:
    parsed = parse_object_url(url)
    with engine.begin() as conn:
        conn.execute(delete(_T).where(_where(parsed)))


#: the names of sealstore 0.x (any store's URL is taken)
register_s3_prefix = register_object_prefix
unregister_s3_prefix = unregister_object_prefix


def registered_object_prefixes(engine: Engine) -> list[str]:
    """The registered prefixes as URLs ([] when the table does not exist)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(OBJECT_PREFIXES_TABLE):
            return []
        rows = conn.execute(
            select(_T.c.scheme, _T.c.bucket, _T.c.prefix).order_by(
                _T.c.scheme, _T.c.bucket, _T.c.prefix
            )
        ).all()
    return [str(ObjectURL(*row)) for row in rows]


def object_references(store: Any, url: str, key_id: int) -> int:
    """Object versions under ``url`` sealed under ``key_id``, in ``store`` (an
    ``ObjectStore`` of the URL's scheme): one HEAD per version."""
    from ...adapters.objects.references import count_references

    parsed = parse_object_url(url)
    return count_references(store, parsed.bucket, parsed.prefix, key_id)


def find_references(
    engine: Engine | None,
    specs: Iterable[Any],
    key_id: int,
    *,
    urls: Iterable[str] = (),
    stores: Mapping[str, Any] | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> list[Reference]:
    """Everything that still names ``key_id``: columns of ``specs`` (rows), and objects under
    ``urls`` plus the registered prefixes of ``engine``.  ``stores`` maps a scheme to the
    ``ObjectStore`` to look in (e.g. one on a configured client); other schemes get theirs from
    the store registry (``open_store``, with ``endpoint_url``/``region``)."""
    found: list[Reference] = []
    wanted = [str(parse_object_url(u)) for u in urls]
    if engine is not None:
        found += references(engine, specs, key_id)
        wanted += [u for u in registered_object_prefixes(engine) if u not in wanted]
    opened: dict[str, Any] = dict(stores or {})
    for url in wanted:
        parsed = parse_object_url(url)
        if parsed.scheme not in opened:
            opened[parsed.scheme] = open_store(parsed, endpoint_url=endpoint_url, region=region)
        n = object_references(opened[parsed.scheme], url, key_id)
        if n:
            found.append(Reference(url, n, parsed.scheme))  # kind: the store's scheme
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
    if kinds & set(STORE_KINDS):
        fixes.append("`sealstore s3 rotate`")
    return " and ".join(fixes) or "`sealstore rotate`"


def describe(refs: list[Reference]) -> str:
    """``users.ssn: 12 rows; s3://b/p: 3 objects``."""
    parts = []
    for r in refs:
        unit = "objects" if r.kind in STORE_KINDS else "rows"
        parts.append(f"{r.name}: {r.count} {unit}")
    return "; ".join(parts)
