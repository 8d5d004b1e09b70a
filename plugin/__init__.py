"""sealstore: storage-layer encryption for Python (AEGIS-128X and AEGIS-256X native kernels).

The cipher classes mirror ``cryptography``'s AEAD classes; the keyring seals values in the
versioned sealed-value format (docs/FORMAT.md) that the column and S3 adapters store.
"""

import contextlib

from .aead import AEGIS128L, AEGIS128X2, AEGIS128X4, AEGIS256, AEGIS256X2, AEGIS256X4, AESGCM
from .errors import InvalidTag, SealstoreError
from .format import Suite, column_context, overhead, sealed_size
from .keyring import Key, Keyring, KeyState, forget_keyring, get_keyring, use_keyring

__all__ = [
    "AEGIS128L",
    "AEGIS128X2",
    "AEGIS128X4",
    "AEGIS256",
    "AEGIS256X2",
    "AEGIS256X4",
    "AESGCM",
    "InvalidTag",
    "Key",
    "KeyState",
    "Keyring",
    "SealstoreError",
    "Suite",
    "column_context",
    "forget_keyring",
    "get_keyring",
    "overhead",
    "sealed_size",
    "tenant",
    "use_keyring",
]


def tenant(name: str) -> "contextlib.AbstractContextManager[str]":
    """``with sealstore.tenant("acme"):`` binds the tenant-aware values written and read in
    the block to tenant ``acme`` (:func:`sealstore.tenants.tenant`, docs/TENANTS.md)."""
    from .tenants import tenant as _tenant

    return _tenant(name)


#: the package version, written only here (pyproject.toml reads it: [tool.setuptools.dynamic])
__version__ = "0.1.0"
