"""Transparent client-side encryption for boto3 S3 clients.

::

    s3 = boto3.client("s3")
    sealstore.adapters.s3.encrypt_client(s3, keyring)
    s3.put_object(Bucket="b", Key="k", Body=data)            # sealed on the way up
    s3.get_object(Bucket="b", Key="k")["Body"].read()         # verified plaintext
    s3.get_object(Bucket="b", Key="k", Range="bytes=10-99")   # exactly those plaintext bytes
    s3.upload_file("big.bin", "b", "big.bin")                 # parallel parts, each sealed
    s3.download_file("b", "big.bin", "out.bin")               # parallel ranged GETs

Objects use the format of :mod:`sealstore.stream` (``docs/FORMAT.md``).  Everything else the
client does keeps working; ``client.sealstore.raw()`` gives untouched access to sealed bytes.
"""

from __future__ import annotations

from typing import Any, TypeVar
from sealstore.extras import require

require("s3", "sealstore.adapters.s3")  # before anything imports boto3 or botocore

import inspect

from sealstore.errors import UnsupportedClient
from sealstore.keyring import Keyring
from sealstore.stream import DEFAULT_SEGMENT_SIZE

from ..objects.engine import ObjectSettings
from ..objects.tenancy import TenantRule
from .handlers import S3Sealing
from .sizes import plaintext_size
from .transfer import install, keep_off_crt

#: a boto3 S3 client (botocore has no types): encrypt_client returns the client it is given
_Client = TypeVar("_Client", bound=Any)

__all__ = ["S3Sealing", "encrypt_client", "plaintext_size"]


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
    """Make ``client`` seal every object it writes and open every object it reads.

    ``keyring``: a :class:`sealstore.keyring.Keyring`; objects are sealed under its primary
    key and open under any usable key.  ``segment_size``: plaintext bytes per segment for new
    objects (a power of two, 1 KiB .. 16 MiB).  ``passthrough``: return objects that were not
    written by sealstore as they are instead of raising NotSealedObject (for buckets being
    migrated).  UNAUTHENTICATED: anyone with write access to the bucket can plant such an
    object; such answers carry ``response["SealstoreSealed"] = False`` (and
    ``Body.sealstore_sealed``), opened ones True, and each passthrough read logs a WARNING
    (docs/S3.md, "Objects sealstore did not write").  ``allow_retired``: open objects of retired keys.  ``context``: bytes bound
    into every object key (readers need the same).  ``bind_location``: bind every object written
    to its bucket and key, so a copy or move by another tool fails to open (``WrongLocation``);
    pass False for applications that move sealed objects themselves (their objects then open
    anywhere; objects written with binding still open only where they were written).  Returns ``client``; its
    :class:`S3Sealing` is ``client.sealstore``.  UnsupportedClient (a TypeError) for an
    asynchronous (aiobotocore) client.  See ``docs/S3.md`` for what is refused and why.

    Tenants (``docs/TENANTS.md``, "Objects"): ``tenant_prefix`` (``"tenants/{tenant}/"`` or a
    callable ``key -> tenant``), ``tenant`` (the client's tenant, or True for the
    ``sealstore.tenant()`` block only) make the client seal each object under its tenant's
    keys, bound to its tenant; ``keyring`` then opens objects written before tenancy
    (``tenant_legacy``, default True; False refuses them).
    """
    settings = ObjectSettings.of(
        segment_size=segment_size, passthrough=passthrough, allow_retired=allow_retired,
        context=context, bind_location=bind_location, tenant=tenant,
        tenant_prefix=tenant_prefix, tenant_legacy=tenant_legacy,
    )  # fmt: skip
    if getattr(client, "sealstore", None) is not None:
        raise ValueError("this client is already encrypted (see client.sealstore)")
    if getattr(getattr(client, "meta", None), "service_model", None) is None or (
        client.meta.service_model.service_name != "s3"
    ):
        raise TypeError("encrypt_client needs a boto3 S3 client")
    if inspect.iscoroutinefunction(getattr(client, "_make_api_call", None)):
        raise UnsupportedClient(
            "encrypt_client supports boto3 (synchronous) clients only; an asynchronous client "
            "(aiobotocore) could seal uploads but not open downloads, so it is not encrypted: "
            "run a boto3 client in a thread (asyncio.to_thread) instead"
        )
    keep_off_crt()
    sealing = S3Sealing(client, keyring, settings)
    sealing.register(client.meta.events)
    install(client, sealing)
    client.sealstore = sealing
    return client
