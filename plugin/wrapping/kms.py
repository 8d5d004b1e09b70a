"""AWS KMS envelope wrapping for keyring material (boto3 ``kms`` client).

New material comes from ``GenerateDataKey`` (AES_256); only the ``CiphertextBlob`` is stored.
Unwrapping a blob is one KMS ``Decrypt``; the plaintext is cached in memory (values never cause
a KMS call: a keyring unwraps each key once, when it is loaded or refreshed) for at most
``cache_max_age`` seconds (default 300) and ``cache_max_uses`` unwraps (default 1000), and wiped
by :meth:`KmsWrapper.forget`, which a keyring loaded through a key source calls when it is
closed.  ``cache_max_age=0`` turns the cache off.  The encryption context
``{"sealstore-key-id": "<8 hex>"}`` binds a blob to its key id.
Rotating the KEK (:meth:`KmsWrapper.rewrap`) uses ``ReEncrypt``: the material never leaves KMS
in plaintext and no sealed value changes.  The log records botocore (and urllib3, and anything
else but sealstore) makes during a KMS call are withheld (:mod:`sealstore.logguard`): they
would carry the request parameters and the response body, key material included.
"""

from __future__ import annotations

from typing import Any

import logging
import threading
import time

from ..errors import KeySourceError
from ..extras import require
from ..logguard import withheld
from .master import MATERIAL_SIZE, Wrapper

__all__ = ["KmsWrapper"]

log: logging.Logger = logging.getLogger(__name__)

_CONTEXT_KEY = "sealstore-key-id"
DEFAULT_CACHE_MAX_AGE = 300.0  # seconds
DEFAULT_CACHE_MAX_USES = 1000


def _context(key_id: int | None, fmt: int) -> dict[str, str]:
    """The encryption context of a blob: its key id (or the metadata-key purpose) and, from
    store format 2 on, the format."""
    if key_id is None:
        return {"sealstore-purpose": "metadata-key", "sealstore-format": "2"}
    ctx = {_CONTEXT_KEY: f"{key_id:08x}"}
    if fmt != 1:
        ctx["sealstore-format"] = str(fmt)
    return ctx


def _what(key_id: int | None) -> str:
    return "metadata key" if key_id is None else f"key {key_id:08x}"


class KmsWrapper(Wrapper):
    """Wrap keyring material under the KMS key ``kms_key_id`` (id, ARN or alias)."""

    kind = "aws-kms"

    def __init__(
        self,
        kms_key_id: str,
        *,
        client: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        cache_max_age: float = DEFAULT_CACHE_MAX_AGE,
        cache_max_uses: int = DEFAULT_CACHE_MAX_USES,
    ) -> None:
        if not kms_key_id:
            raise ValueError("kms_key_id is required")
        if not cache_max_age >= 0:
            raise ValueError("cache_max_age must be >= 0 seconds")
        if not isinstance(cache_max_uses, int) or cache_max_uses < 1:
            raise ValueError("cache_max_uses must be an int >= 1")
        if client is None:
            require("kms", "KmsWrapper without a client=", ("boto3",))
            import boto3

            client = boto3.client("kms", region_name=region_name, endpoint_url=endpoint_url)
        self.kms_key_id = kms_key_id
        self._client = client
        self.cache_max_age: float = float(cache_max_age)
        self.cache_max_uses = cache_max_uses
        # (key id, format, blob) -> [plaintext, when cached (monotonic), unwraps served]
        self._cache: dict[tuple[int | None, int, bytes], list[Any]] = {}
        self._lock = threading.Lock()
        self._clock = time.monotonic

    def _remember(self, slot: tuple[int | None, int, bytes], material: bytes) -> None:
        if self.cache_max_age > 0:
            with self._lock:
                self._cache[slot] = [bytearray(material), self._clock(), 0]

    def _cached(self, slot: tuple[int | None, int, bytes]) -> bytes | None:
        with self._lock:
            entry = self._cache.get(slot)
            if entry is None:
                return None
            if self._clock() - entry[1] >= self.cache_max_age or entry[2] >= self.cache_max_uses:
                del self._cache[slot]
                entry[0][:] = bytes(len(entry[0]))
                return None
            entry[2] += 1
            return bytes(entry[0])

    def _call(self, op: str, key_id: int | None, **kwargs: Any) -> dict[str, Any]:
        what = _what(key_id)
        log.debug("KMS %s for %s under %s", op, what, self.kms_key_id)  # names only: no kwargs
        try:
            # botocore logs request parameters and response bodies (key material) at DEBUG:
            # its records on this thread are withheld for the call (sealstore.logguard)
            with withheld(f"a sealstore KMS {op}"):
                response: dict[str, Any] = getattr(self._client, op)(**kwargs)
            return response
        except Exception as exc:  # botocore ClientError, endpoint errors, ...
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            log.debug("KMS %s for %s failed (%s)", op, what, code)
            raise KeySourceError(f"KMS {op} failed ({code})") from None

    def generate(self, key_id: int | None, fmt: int = 2) -> tuple[bytes, bytes]:
        r = self._call(
            "generate_data_key",
            key_id,
            KeyId=self.kms_key_id,
            KeySpec="AES_256",
            EncryptionContext=_context(key_id, fmt),
        )
        material, blob = r["Plaintext"], r["CiphertextBlob"]
        self._remember((key_id, fmt, blob), material)
        return material, blob

    def wrap(self, key_id: int | None, material: bytes, fmt: int = 2) -> bytes:
        r = self._call(
            "encrypt",
            key_id,
            KeyId=self.kms_key_id,
            Plaintext=bytes(material),
            EncryptionContext=_context(key_id, fmt),
        )
        return bytes(r["CiphertextBlob"])

    def unwrap(self, key_id: int | None, wrapped: bytes, fmt: int = 2) -> bytes:
        wrapped = bytes(wrapped)
        cached = self._cached((key_id, fmt, wrapped))
        if cached is not None:
            log.debug("KMS cache served the unwrap of %s", _what(key_id))
            return cached
        r = self._call(
            "decrypt",
            key_id,
            CiphertextBlob=wrapped,
            EncryptionContext=_context(key_id, fmt),
            KeyId=self.kms_key_id,
        )
        material: bytes = r["Plaintext"]
        if len(material) != MATERIAL_SIZE:
            size = len(material)
            del material, r  # no key material in the locals of a raising frame
            raise KeySourceError(f"KMS returned {size}-byte material")
        self._remember((key_id, fmt, wrapped), material)
        return material

    def rewrap(
        self, key_id: int | None, wrapped: bytes, new: Wrapper, fmt: int = 2, new_fmt: int = 2
    ) -> bytes:
        if not isinstance(new, KmsWrapper):
            return super().rewrap(key_id, wrapped, new, fmt, new_fmt)
        r = self._call(
            "re_encrypt",
            key_id,
            CiphertextBlob=bytes(wrapped),
            SourceEncryptionContext=_context(key_id, fmt),
            SourceKeyId=self.kms_key_id,
            DestinationKeyId=new.kms_key_id,
            DestinationEncryptionContext=_context(key_id, new_fmt),
        )
        return bytes(r["CiphertextBlob"])

    def forget(self) -> None:
        """Wipe the cache of unwrapped material (best effort)."""
        with self._lock:
            for entry in self._cache.values():
                entry[0][:] = bytes(len(entry[0]))
            self._cache.clear()

    def describe(self) -> dict[str, Any]:
        return {"type": self.kind, "kms_key_id": self.kms_key_id}
