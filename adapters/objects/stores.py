"""The object stores sealstore knows, by URL scheme: one :class:`StoreKind` per store in
:data:`STORE_KINDS` (a test forbids a second list).  A record names the module that builds the
store from a URL (``store_from_url(url, *, endpoint_url=None, region=None)``, imported when a URL
of that scheme is used, so this module imports no adapter) and the extra it needs.

Key retirement (``sealstore keys retire``) and object rotation name object prefixes as URLs,
``s3://bucket/prefix``; :func:`parse_object_url` reads one, :func:`open_store` gives its store.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from sealstore.errors import ConfigError
from sealstore.extras import require

from .store import ObjectStore

__all__ = ["STORE_KINDS", "ObjectURL", "StoreKind", "open_store", "parse_object_url"]


@dataclass(frozen=True)
class StoreKind:
    """One object store: its URL scheme, its name in messages, the module with its
    ``store_from_url`` factory, and the extra that installs its client."""

    scheme: str
    name: str
    module: str
    extra: str
    client: tuple[str, ...]  #: modules the extra provides (checked before the import)


#: every object store, by scheme
STORE_KINDS: dict[str, StoreKind] = {
    kind.scheme: kind
    for kind in (
        StoreKind("s3", "S3", "sealstore.adapters.s3.store", "s3", ("boto3",)),
        StoreKind(
            "gs",
            "Google Cloud Storage",
            "sealstore.adapters.gcs.store",
            "gcs",
            ("google.cloud.storage",),
        ),  # fmt: skip
    )
}


@dataclass(frozen=True)
class ObjectURL:
    """``scheme://bucket/prefix`` (the prefix may be empty: the whole bucket)."""

    scheme: str
    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}" if self.prefix else (
            f"{self.scheme}://{self.bucket}"
        )  # fmt: skip

    @property
    def kind(self) -> StoreKind:
        return STORE_KINDS[self.scheme]


def parse_object_url(url: str) -> ObjectURL:
    """``scheme://bucket[/prefix]`` of a known store -> ObjectURL; ValueError otherwise (the
    message lists the known schemes)."""
    scheme, sep, rest = str(url).partition("://")
    bucket, _, prefix = rest.partition("/")
    known = ", ".join(f"{s}://" for s in sorted(STORE_KINDS))
    if not sep or scheme not in STORE_KINDS:
        raise ValueError(f"expected an object prefix URL ({known}BUCKET[/PREFIX]), got {url!r}")
    if not bucket:
        raise ValueError(f"expected {scheme}://BUCKET[/PREFIX], got {url!r}")
    return ObjectURL(scheme, bucket, prefix)


def open_store(
    url: ObjectURL | str, *, endpoint_url: str | None = None, region: str | None = None
) -> ObjectStore:
    """The store of ``url``, built by its kind's factory with the environment's credentials
    (``endpoint_url``/``region``: for stores that take them).  MissingExtra when the store's
    extra is not installed."""
    parsed = url if isinstance(url, ObjectURL) else parse_object_url(url)
    kind = parsed.kind
    require(kind.extra, f"{kind.name} prefixes ({kind.scheme}://)", kind.client)
    module: Any = importlib.import_module(kind.module)
    store = module.store_from_url(parsed, endpoint_url=endpoint_url, region=region)
    if store.scheme != kind.scheme:
        raise ConfigError(f"{kind.module} built a {store.scheme!r} store for {parsed}")
    return store  # type: ignore[no-any-return]
