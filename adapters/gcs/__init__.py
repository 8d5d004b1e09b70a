"""Transparent client-side encryption for google-cloud-storage clients.

::

    client = storage.Client()
    sealstore.adapters.gcs.encrypt_client(client, keyring)
    blob = client.bucket("b").blob("k")
    blob.upload_from_string(data)                    # sealed on the way up
    blob.download_as_bytes()                         # verified plaintext
    blob.download_as_bytes(start=10, end=99)         # exactly those plaintext bytes
    blob.upload_from_filename("big.bin")             # one resumable session, a part at a time

Objects use the format of :mod:`sealstore.stream` (``docs/FORMAT.md``) and are bound to their
bucket and name.  ``doors.py`` lists every library method that moves a body and what it becomes;
``client.sealstore.raw()`` gives untouched access to sealed bytes.  See ``docs/GCS.md``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sealstore.extras import require

require("gcs", "sealstore.adapters.gcs")  # before anything imports google.cloud.storage

from google.cloud.storage import Client

from sealstore.keyring import Keyring
from sealstore.stream import DEFAULT_SEGMENT_SIZE

from ..objects.engine import ObjectSettings
from ..objects.tenancy import TenantRule
from .doors import encrypted_class, guard_transport, install
from .sealing import GCSSealing
from .store import GCSStore

_Client = TypeVar("_Client", bound=Any)

__all__ = ["GCSSealing", "GCSStore", "encrypt_client"]


def encrypt_client(
    client: _Client,
    keyring: Keyring,
    *,
    segment_size: int = DEFAULT_SEGMENT_SIZE,
    passthrough: bool = False,
    allow_retired: bool = False,
    context: bytes = b"",
    bind_location: bool = True,
    tenant: str | bool | None = None,
    tenant_prefix: TenantRule | None = None,
    tenant_legacy: bool = True,
) -> _Client:
    """Make ``client`` (a ``google.cloud.storage.Client``) seal every object it writes and open
    every object it reads; the settings are those of :func:`sealstore.adapters.s3.encrypt_client`
    (``passthrough``: return objects sealstore did not write as they are, UNAUTHENTICATED;
    ``tenant``, ``tenant_prefix``, ``tenant_legacy``: tenants, docs/TENANTS.md).
    Returns ``client``; its :class:`GCSSealing` is ``client.sealstore``.  TypeError for anything
    but a google-cloud-storage client.  See ``docs/GCS.md`` for what is refused and why."""
    settings = ObjectSettings.of(
        segment_size=segment_size, passthrough=passthrough, allow_retired=allow_retired,
        context=context, bind_location=bind_location, tenant=tenant,
        tenant_prefix=tenant_prefix, tenant_legacy=tenant_legacy,
    )  # fmt: skip
    if getattr(client, "sealstore", None) is not None:
        raise ValueError("this client is already encrypted (see client.sealstore)")
    if not isinstance(client, Client):
        raise TypeError("encrypt_client needs a google.cloud.storage.Client")
    sealing = GCSSealing(client, keyring, settings)
    install()
    guard_transport(client, sealing)
    client.__class__ = encrypted_class(type(client))
    client.sealstore = sealing
    return client
