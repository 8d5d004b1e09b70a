"""AWS KMS envelope wrapping for keyring material (boto3 ``kms`` client).

New material comes from ``GenerateDataKey`` (AES_256); only the ``CiphertextBlob`` is stored.
Each blob is decrypted once per wrapper and cached in memory, so no value ever causes a KMS
call.  The encryption context ``{"sealstore-key-id": "<8 hex>"}`` binds a blob to its key id.
Rotating the KEK (:meth:`KmsWrapper.rewrap`) uses ``ReEncrypt``: the material never leaves KMS
in plaintext and no sealed value changes.
"""

from __future__ import annotations

import threading

from .errors import KeySourceError
from .wrapping import MATERIAL_SIZE, Wrapper

__all__ = ["KmsWrapper"]

_CONTEXT_KEY = "sealstore-key-id"


def _context(key_id: int) -> dict[str, str]:
    return {_CONTEXT_KEY: f"{key_id:08x}"}


class KmsWrapper(Wrapper):
    """Wrap keyring material under the KMS key ``kms_key_id`` (id, ARN or alias)."""

    kind = "aws-kms"

    def __init__(
        self,
        kms_key_id: str,
        *,
        client=None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
    ) -> None:
        if not kms_key_id:
            raise ValueError("kms_key_id is required")
        if client is None:
            import boto3

            client = boto3.client("kms", region_name=region_name, endpoint_url=endpoint_url)
        self.kms_key_id = kms_key_id
        self._client = client
        self._cache: dict[tuple[int, bytes], bytearray] = {}
        self._lock = threading.Lock()

    def _call(self, op: str, **kwargs) -> dict:
        try:
            return getattr(self._client, op)(**kwargs)
        except Exception as exc:  # botocore ClientError, endpoint errors, ...
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            raise KeySourceError(f"KMS {op} failed ({code})") from None

    def generate(self, key_id: int) -> tuple[bytes, bytes]:
        r = self._call(
            "generate_data_key",
            KeyId=self.kms_key_id,
            KeySpec="AES_256",
            EncryptionContext=_context(key_id),
        )
        material, blob = r["Plaintext"], r["CiphertextBlob"]
        with self._lock:
            self._cache[(key_id, blob)] = bytearray(material)
        return material, blob

    def wrap(self, key_id: int, material: bytes) -> bytes:
        r = self._call(
            "encrypt",
            KeyId=self.kms_key_id,
            Plaintext=bytes(material),
            EncryptionContext=_context(key_id),
        )
        return r["CiphertextBlob"]

    def unwrap(self, key_id: int, wrapped: bytes) -> bytes:
        wrapped = bytes(wrapped)
        cached = self._cache.get((key_id, wrapped))
        if cached is not None:
            return bytes(cached)
        r = self._call(
            "decrypt",
            CiphertextBlob=wrapped,
            EncryptionContext=_context(key_id),
            KeyId=self.kms_key_id,
        )
        material = r["Plaintext"]
        if len(material) != MATERIAL_SIZE:
            raise KeySourceError(f"key {key_id:08x}: KMS returned {len(material)}-byte material")
        with self._lock:
            self._cache[(key_id, wrapped)] = bytearray(material)
        return material

    def rewrap(self, key_id: int, wrapped: bytes, new: Wrapper) -> bytes:
        if not isinstance(new, KmsWrapper):
            return super().rewrap(key_id, wrapped, new)
        r = self._call(
            "re_encrypt",
            CiphertextBlob=bytes(wrapped),
            SourceEncryptionContext=_context(key_id),
            SourceKeyId=self.kms_key_id,
            DestinationKeyId=new.kms_key_id,
            DestinationEncryptionContext=_context(key_id),
        )
        return r["CiphertextBlob"]

    def forget(self) -> None:
        """Wipe the cache of unwrapped material (best effort)."""
        with self._lock:
            for buf in self._cache.values():
                buf[:] = bytes(len(buf))
            self._cache.clear()

    def describe(self) -> dict:
        return {"type": self.kind, "kms_key_id": self.kms_key_id}
