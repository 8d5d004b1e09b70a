"""sealstore: storage-layer encryption for Python (AEGIS-128X and AEGIS-256X native kernels).

The cipher classes mirror ``cryptography``'s AEAD classes; the keyring seals values in the
versioned sealed-value format (docs/FORMAT.md) that the column and S3 adapters store.
"""

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
    "use_keyring",
]
#: the package version, written only here (pyproject.toml reads it: [tool.setuptools.dynamic])
__version__ = "0.1.0"
