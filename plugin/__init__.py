"""sealstore: storage-layer encryption for Python (AEGIS-128X native kernels)."""

from .aead import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM
from .errors import InvalidTag, SealstoreError

__all__ = [
    "AEGIS128L",
    "AEGIS128X2",
    "AEGIS128X4",
    "AESGCM",
    "InvalidTag",
    "SealstoreError",
]
__version__ = "0.1.0"
