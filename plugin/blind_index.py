"""Blind-index values: equality lookups on encrypted data through a keyed hash, storage-neutral.

An index value is ``key_id (4 bytes, big-endian) || HMAC-SHA256(index_key, encoded value)[:size]``.
The index key is derived by the keyring (:meth:`sealstore.keyring.Keyring.keyed_hash`, HKDF-SHA256)
from one of *its* keys with ``info = "sealstore/v1/blind-index" || context``, where the context
names the index (for a column, :func:`sealstore.format.column_context` of its table and column):
every index has its own key, and equal values in two indexes do not match each other.  The
keyring must be a separate one (``"index"`` by default), never the keyring that encrypts the data:
:func:`check_separate` refuses (``SharedIndexKey``) an index keyring that shares a key id or key
material with an encryption keyring.

Writes use the keyring's primary key; lookups try the primary and every active key, so an
index-key rotation keeps lookups working while values are re-indexed (:func:`is_stale`).

Truncation (``size``, 1..32 bytes): with N values, a lookup matches about ``N / 2**(8*size)``
unrelated ones by collision.  The default 16 bytes makes that negligible; 4 bytes or less is the
"fuzzy" choice (each index value hides among many rows) and the caller must then re-check the
decrypted values.  The SQLAlchemy ``BlindIndex`` column type is built on this module.
"""

from __future__ import annotations

import hmac

from .errors import SharedIndexKey
from .keyring import Key, Keyring, KeyState

__all__ = [
    "DEFAULT_SIZE",
    "INDEX_KEYRING",
    "INFO_PREFIX",
    "KEY_ID_SIZE",
    "MAX_SIZE",
    "candidates",
    "check_separate",
    "check_size",
    "index_info",
    "index_value",
    "is_stale",
    "key_id_of",
]

#: The name of the keyring blind indexes use unless told otherwise.
INDEX_KEYRING = "index"
#: Bytes of key id at the start of every index value.
KEY_ID_SIZE = 4
#: HMAC bytes kept by default, and at most (all of HMAC-SHA256).
DEFAULT_SIZE = 16
MAX_SIZE = 32
#: The HKDF ``info`` prefix of every blind-index key (format v1).
INFO_PREFIX = b"sealstore/v1/blind-index"


def check_size(size: object) -> int:
    """``size`` if it is an int in 1..32, else ValueError (a bool is not a size)."""
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_SIZE:
        raise ValueError(f"size must be an int in 1..32 (HMAC-SHA256 bytes kept), not {size!r}")
    return size


def index_info(context: bytes) -> bytes:
    """The HKDF ``info`` of the index named by ``context`` (e.g. a column context)."""
    return INFO_PREFIX + context


def _value(keyring: Keyring, key: Key, info: bytes, data: bytes, size: int) -> bytes:
    # the keyring derives and caches the HMAC key, wipes it on destroy()/close() and then
    # refuses (KeyNotUsable)
    mac = keyring.keyed_hash(key.key_id, info, data)
    return key.key_id.to_bytes(KEY_ID_SIZE, "big") + mac[:size]


def index_value(keyring: Keyring, info: bytes, data: bytes, size: int) -> bytes:
    """The index value of the encoded plaintext ``data`` under the keyring's primary key."""
    return _value(keyring, keyring.primary, info, data, size)


def candidates(keyring: Keyring, info: bytes, data: bytes, size: int) -> list[bytes]:
    """Index values of ``data`` under every key a lookup must try: the primary, then the active."""
    keys = [k for k in keyring.keys if k.state is KeyState.PRIMARY]
    keys += [k for k in keyring.keys if k.state is KeyState.ACTIVE]
    return [_value(keyring, k, info, data, size) for k in keys]


def key_id_of(stored: bytes) -> int:
    """The index key id at the start of a stored index value."""
    return int.from_bytes(bytes(stored[:KEY_ID_SIZE]), "big")


def is_stale(keyring: Keyring, stored: bytes | None) -> bool:
    """True when ``stored`` was not computed with the keyring's primary key (NULL is not stale)."""
    if stored is None:
        return False
    return key_id_of(stored) != keyring.primary.key_id


#: HMAC message of a key's fingerprint (HMAC-SHA256 under the key's material): compares two
#: keys' material without the material leaving the keyring, and says nothing about it.
_FINGERPRINT = b"sealstore/v1/key-fingerprint"


def _fingerprints(keyring: Keyring) -> dict[bytes, int]:
    """{fingerprint: key id} of every key of ``keyring`` that still has material."""
    out: dict[bytes, int] = {}
    with keyring._lock:
        for key in keyring._keys.values():
            material = key._material
            if material is not None:
                out[hmac.digest(material, _FINGERPRINT, "sha256")] = key.key_id
    return out


def check_separate(
    index_keyring: Keyring,
    other: Keyring,
    *,
    index_name: str = INDEX_KEYRING,
    other_name: str = "default",
    what: str = "a blind index",
) -> None:
    """Raise :class:`~sealstore.errors.SharedIndexKey` when ``index_keyring`` is ``other``, or
    shares a key id or key material with it (both loaded from one key store, or a key copied
    from one into the other).  Material is compared by fingerprint (HMAC-SHA256 under each
    key's material of a fixed label); nothing about it is logged or put in the message."""
    fix = (
        f"; {what} needs its own keyring: give it its own key store (docs/production-keys.md, "
        "'A separate index keyring': load_config(path, name='index') and SEALSTORE_INDEX_* "
        "variables)"
    )
    if index_keyring is other:
        raise SharedIndexKey(
            f"{what}: keyrings {index_name!r} and {other_name!r} are the same object{fix}"
        )
    shared_ids = sorted(set(index_keyring._keys) & set(other._keys))
    if shared_ids:
        ids = ", ".join(f"{k:08x}" for k in shared_ids)
        raise SharedIndexKey(
            f"{what}: index keyring {index_name!r} shares key id(s) {ids} with encryption "
            f"keyring {other_name!r} (loaded from the same key store?){fix}"
        )
    mine = _fingerprints(index_keyring)
    theirs = _fingerprints(other)
    same = sorted((mine[f], theirs[f]) for f in mine.keys() & theirs.keys())
    if same:
        pairs = ", ".join(
            f"{a:08x} of {index_name!r} is {b:08x} of {other_name!r}" for a, b in same
        )
        raise SharedIndexKey(
            f"{what}: index keyring {index_name!r} shares key material with encryption keyring "
            f"{other_name!r} under other key ids ({pairs}){fix}"
        )
