"""Keys and what is derived from them: a :class:`Key` (id, suite, state, 32 bytes of root
material), the per-(key, suite, tag size) subkey slots, and the cipher objects they key."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, NoReturn

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..aead import Cipher
from ..errors import (
    InvalidKeyring,
    KeyNotUsable,
)
from ..format import (
    Suite,
    overhead,
    pack_header,
)
from ..holdskey import HoldsKey

KEY_SIZE = 32  # root material per key; subkeys are derived from it
DEFAULT_SUITE = Suite.AEGIS_128X4
DEFAULT_TAG_SIZE = 32
# Below this many plaintext bytes an AEGIS-128X2/X4 key seals with AEGIS-128L, an AEGIS-256X2/X4
# key with AEGIS-256 (each under its own subkey):
# the single-lane variant initialises faster, so it wins on small values (bench/keyring_bench.py).
DEFAULT_ADAPTIVE_THRESHOLD = 1024
_SUBKEY_INFO = b"sealstore/v1/subkey"
#: Every HKDF ``info`` sealstore derives an internal key with starts with this (the subkeys
#: above, the object keys of :mod:`sealstore.stream`); ``Keyring.keyed_hash`` refuses it...
RESERVED_INFO_PREFIX = b"sealstore/"
#: ... except under these prefixes, which internal derivations never use (blind indexes).
KEYED_HASH_INFO_PREFIXES = (b"sealstore/v1/blind-index",)

KeyFactory = Callable[[int], "bytes | bytearray"]


class KeyState(str, enum.Enum):
    """Lifecycle of a key: primary -> active -> retired -> destroyed."""

    PRIMARY = "primary"
    ACTIVE = "active"
    RETIRED = "retired"
    DESTROYED = "destroyed"

    def __str__(self) -> str:
        return self.value


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


class Key(HoldsKey):
    """One keyring key.  Its material is never shown by ``repr``/``str``."""

    __slots__ = ("_created_at", "_key_id", "_material", "_rotated_at", "_state", "_suite")

    def __init__(
        self,
        key_id: int,
        suite: Suite | str | int,
        material: bytes | bytearray | memoryview | None,
        *,
        state: KeyState | str = KeyState.ACTIVE,
        created_at: datetime | None = None,
        rotated_at: datetime | None = None,
    ) -> None:
        if not isinstance(key_id, int) or isinstance(key_id, bool) or not 0 <= key_id <= 0xFFFFFFFF:
            raise InvalidKeyring("key_id must be an int in 0..0xffffffff")
        self._key_id = key_id
        self._suite = Suite.parse(suite)
        try:
            self._state = KeyState(state)
        except ValueError:
            raise InvalidKeyring(
                f"key {key_id:08x}: unknown state {state!r}; expected one of "
                + ", ".join(s.value for s in KeyState)
            ) from None
        if self._state is KeyState.DESTROYED:
            self._material: bytearray | None = None
        else:
            if material is None:
                raise InvalidKeyring(f"key {key_id:08x}: material is required unless destroyed")
            try:
                buf = bytearray(memoryview(material).cast("B"))
            except TypeError:
                raise TypeError("key material must be a bytes-like object") from None
            if len(buf) != KEY_SIZE:
                size = len(buf)
                buf[:] = bytes(size)
                raise InvalidKeyring(
                    f"key {key_id:08x}: material must be {KEY_SIZE} bytes, not {size}"
                )
            self._material = buf
        self._created_at = created_at or _now()
        self._rotated_at = rotated_at

    @property
    def key_id(self) -> int:
        """32-bit key id stored in every value"""
        return self._key_id

    @property
    def suite(self) -> Suite:
        """the suite this key seals with"""
        return self._suite

    @property
    def state(self) -> KeyState:
        """a KeyState"""
        return self._state

    @property
    def created_at(self) -> datetime:
        """when the key was created (UTC)"""
        return self._created_at

    @property
    def rotated_at(self) -> datetime | None:
        """when the key stopped being primary (UTC), or None"""
        return self._rotated_at

    def _live_material(self) -> bytearray:
        """The root material (a destroyed key has none: KeyNotUsable)."""
        if self._material is None:
            raise KeyNotUsable(f"key {self.id_hex} is destroyed")
        return self._material

    @property
    def id_hex(self) -> str:
        """The key id as 8 hex digits, as it appears at offset 2 of a value."""
        return f"{self._key_id:08x}"

    def reveal_material(self) -> bytes:
        """Return a copy of the 32-byte root material (for key sources that persist it)."""
        if self._material is None:
            raise KeyNotUsable(f"key {self.id_hex} is destroyed: its material is gone")
        return bytes(self._material)

    def _wipe(self) -> None:
        if self._material is not None:
            self._material[:] = bytes(len(self._material))
            self._material = None

    def __repr__(self) -> str:
        return (
            f"Key(id={self.id_hex}, suite={self._suite}, state={self._state}, "
            f"created_at={self._created_at.isoformat()})"
        )

    __str__ = __repr__


class _Slot(HoldsKey):
    """A derived cipher for one (key, suite, tag size): the bound C entry points and prefix."""

    __slots__ = ("cipher", "key", "open", "open_many", "overhead", "prefix", "seal", "seal_many")

    def __init__(self, key: Key, suite: Suite, tag_size: int) -> None:
        header = pack_header(suite, key.key_id, tag_size)
        subkey = _derive_subkey(key, header, suite)
        try:
            cipher = make_cipher(suite, subkey, tag_size)  # every cipher copies its key
        finally:
            subkey[:] = bytes(len(subkey))
        self.key = key
        self.prefix = header
        self.overhead = overhead(suite, tag_size)
        self.cipher = cipher
        self.seal = cipher.seal_prefixed
        self.open = cipher.open_prefixed
        self.seal_many = cipher.seal_prefixed_many
        self.open_many = cipher.open_prefixed_many


def _native_opens(slots: dict[bytes, _Slot]) -> dict[bytes, Any]:
    """{header: _speedups.Context} of the slots whose cipher has one (AEGIS suites)."""
    return {h: s.cipher._fast for h, s in slots.items() if hasattr(s.cipher, "_fast")}


def _native_seal(ring: Any) -> tuple[int, Any, bytes, Any, bytes] | None:
    large, small = ring._seal, ring._seal_small
    if not (hasattr(large.cipher, "_fast") and hasattr(small.cipher, "_fast")):
        return None
    return (ring._threshold, large.cipher._fast, large.prefix, small.cipher._fast, small.prefix)


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise KeyNotUsable("the keyring is closed")


class _ClosedSlot:
    """Stands in for the sealing slots of a closed keyring: every call refuses."""

    key = cipher = None
    prefix = b""
    overhead = 0
    seal = open = seal_many = open_many = staticmethod(_refuse)


_CLOSED = _ClosedSlot()


def _derive_subkey(key: Key, header: bytes, suite: Suite) -> bytearray:
    """HKDF-SHA256(root material, salt=none, info="sealstore/v1/subkey" || header), into a
    bytearray the caller wipes once the cipher holds the key."""
    length = suite.spec.key_size
    hkdf = HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=_SUBKEY_INFO + header)
    out = bytearray(length)
    hkdf.derive_into(key._live_material(), out)  # no immutable copy of the subkey
    return out


def make_cipher(suite: Suite, subkey: bytes | bytearray, tag_size: int) -> Cipher:
    """The cipher object of ``suite`` keyed with ``subkey`` (columns and objects share it)."""
    return suite.spec.new_cipher(subkey, tag_size)


def _random_material(key_id: int) -> bytes:
    return os.urandom(KEY_SIZE)


def _with_index(exc: Exception, index: int) -> Exception:
    setattr(exc, "index", index)
    return exc
