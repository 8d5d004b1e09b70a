"""Key wrapping: how a key source protects keyring material at rest.

A :class:`Wrapper` turns a key's 32 bytes of material into an opaque ``wrapped`` blob and back,
bound to the key id (a blob moved to another key id does not unwrap) and to the store format:
format 2 stores (which authenticate their key metadata, see :mod:`sealstore.keysources.metadata`) wrap
under another context than format 1 stores, so a format 2 store stripped of its metadata tag
and presented as format 1 does not unwrap.  ``key_id=None`` wraps a store's metadata key.
Two ship here and in
:mod:`sealstore.wrapping.kms`: :class:`MasterKeyWrapper` (AES-256-GCM under a local 32-byte master key)
and ``KmsWrapper`` (AWS KMS envelope).  ``None`` as a wrapper means plain material (local
development key files only).
"""

from __future__ import annotations

from typing import Any

import base64
import logging
import os
from abc import ABC, abstractmethod
from pathlib import Path

from cryptography.exceptions import InvalidTag as _CryptoInvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import ConfigError, KeySourceError
from ..holdskey import HoldsKey
from ..securefile import read_secret_file, write_secret_file

__all__ = ["MasterKeyWrapper", "Wrapper", "wrap_context"]

log: logging.Logger = logging.getLogger(__name__)

MATERIAL_SIZE = 32
_WRAP_VERSION = b"\x01"
_WRAP_AD = b"sealstore/v1/wrap"
_WRAP_AD_V2 = b"sealstore/v2/wrap"
_METADATA_AD = b"sealstore/v2/metadata-key"


def wrap_context(key_id: int | None, fmt: int = 1) -> bytes:
    """Associated data binding a wrapped blob to its key id (None: the metadata key) and to
    the store format (1 or 2)."""
    if key_id is None:
        return _METADATA_AD
    return (_WRAP_AD if fmt == 1 else _WRAP_AD_V2) + key_id.to_bytes(4, "big")


class Wrapper(HoldsKey, ABC):
    """Wraps and unwraps keyring material; subclasses name themselves with ``kind``."""

    kind: str = ""

    def generate(self, key_id: int | None, fmt: int = 2) -> tuple[bytes, bytes]:
        """New material for ``key_id`` and its wrapped form."""
        material = os.urandom(MATERIAL_SIZE)
        return material, self.wrap(key_id, material, fmt)

    @abstractmethod
    def wrap(self, key_id: int | None, material: bytes, fmt: int = 2) -> bytes:
        """The wrapped form of ``material``, bound to ``key_id`` and the store format."""

    @abstractmethod
    def unwrap(self, key_id: int | None, wrapped: bytes, fmt: int = 2) -> bytes:
        """The material of a blob made by :meth:`wrap`; KeySourceError if it does not unwrap."""

    def rewrap(
        self, key_id: int | None, wrapped: bytes, new: Wrapper, fmt: int = 2, new_fmt: int = 2
    ) -> bytes:
        """``wrapped`` re-wrapped under ``new`` (subclasses may do it without exposing material)."""
        return new.wrap(key_id, self.unwrap(key_id, wrapped, fmt), new_fmt)

    def forget(self) -> None:
        """Wipe whatever unwrapped material this wrapper caches (called when a keyring closes)."""

    def describe(self) -> dict[str, Any]:
        """A secret-free description recorded next to the wrapped keys."""
        return {"type": self.kind}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


class MasterKeyWrapper(Wrapper):
    """AES-256-GCM under a 32-byte master key: blob = 0x01 || nonce(12) || ciphertext || tag."""

    kind = "master-key"

    def __init__(self, master_key: bytes | bytearray | memoryview) -> None:
        key = bytes(master_key)
        if len(key) != MATERIAL_SIZE:
            raise ValueError(f"master key must be {MATERIAL_SIZE} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MasterKeyWrapper:
        """Read a master key file (base64 of 32 bytes; mode 0600 required)."""
        log.debug("reading master key file %s", path)
        text = read_secret_file(path, limit=4096, what="master key file").strip()
        try:
            key = base64.b64decode(text, validate=True)
        except ValueError:
            del text  # no key file content in the locals of a raising frame
            raise ConfigError(f"master key file {path}: not base64") from None
        del text
        if len(key) != MATERIAL_SIZE:
            size = len(key)
            del key
            raise ConfigError(
                f"master key file {path}: must hold {MATERIAL_SIZE} bytes, found {size}"
            )
        return cls(key)

    @staticmethod
    def create_file(path: str | os.PathLike[str]) -> Path:
        """Write a new random master key file with mode 0600 (refuses to overwrite)."""
        path = Path(path)
        if path.exists():
            raise KeySourceError(f"{path} already exists; refusing to overwrite a master key")
        key = base64.b64encode(os.urandom(MATERIAL_SIZE)) + b"\n"
        write_secret_file(path, key, exclusive=True, what="master key file")
        log.info("created master key file %s", path)
        return path

    def wrap(self, key_id: int | None, material: bytes, fmt: int = 2) -> bytes:
        nonce = os.urandom(12)
        ad = wrap_context(key_id, fmt)
        return _WRAP_VERSION + nonce + self._aead.encrypt(nonce, bytes(material), ad)

    def unwrap(self, key_id: int | None, wrapped: bytes, fmt: int = 2) -> bytes:
        wrapped = bytes(wrapped)
        what = "the metadata key" if key_id is None else f"key {key_id:08x}"
        if len(wrapped) != 1 + 12 + MATERIAL_SIZE + 16 or wrapped[:1] != _WRAP_VERSION:
            raise KeySourceError(f"{what}: wrapped material is not a master-key blob")
        try:
            return self._aead.decrypt(wrapped[1:13], wrapped[13:], wrap_context(key_id, fmt))
        except _CryptoInvalidTag:
            raise KeySourceError(
                f"{what}: wrapped material does not unwrap with this master key (another master "
                "key, or a blob moved to another key or store format)"
            ) from None
