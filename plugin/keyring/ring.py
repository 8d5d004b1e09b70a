"""The :class:`Keyring`: its keys and their states, the snapshots the value path reads, key
changes (add, rotate, retire, destroy) and keyed hashes for blind indexes."""

from __future__ import annotations

import hmac
import logging
import os
import threading
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable, Iterator

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import (
    InvalidKeyring,
    KeyNotUsable,
    ReservedDerivation,
    ShortTagRefused,
    UnknownKeyId,
)
from ..format import (
    Suite,
    pack_header,
)
from ..holdskey import HoldsKey
from .keys import (
    _CLOSED,
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_SUITE,
    DEFAULT_TAG_SIZE,
    KEYED_HASH_INFO_PREFIXES,
    RESERVED_INFO_PREFIX,
    Key,
    KeyFactory,
    KeyState,
    _ClosedSlot,
    _native_opens,
    _native_seal,
    _now,
    _random_material,
    _Slot,
)
from .values import ValuePath

if TYPE_CHECKING:
    from typing_extensions import Self

log: logging.Logger = logging.getLogger(__name__)


class Keyring(ValuePath, HoldsKey):
    """Keys plus the seal/open/reseal entry points.  See the module docstring.

    ``suite`` and ``tag_size`` apply to keys created by :meth:`rotate` and to new values (the
    tag size; the suite of a value is its key's).  AES-256-GCM always uses a 16-byte tag.
    ``adaptive_threshold``: an AEGIS-128X2/X4 (AEGIS-256X2/X4) primary seals plaintexts shorter
    than this with AEGIS-128L (AEGIS-256) under its own subkey (the suite is recorded per value; 0
    disables).  A key opens values of every suite of its family (AEGIS-128, AEGIS-256), an
    AES-256-GCM key only AES-256-GCM values.
    ``key_factory(key_id) -> material`` lets a key source supply new material, e.g. from KMS
    ``GenerateDataKey``; the default draws 32 bytes from the OS CSPRNG.

    Tag-size policy: a keyring with ``tag_size=32`` opens only 32-byte-tag AEGIS values (values
    and objects with 16-byte tags raise ShortTagRefused before anything is decrypted), unless
    ``accept_short_tags=True`` (for the migration that reseals them).  AES-256-GCM values always
    carry 16-byte tags and are not affected; a ``tag_size=16`` keyring opens both sizes.
    """

    def __init__(
        self,
        keys: Iterable[Key],
        *,
        suite: Suite | str | int | None = None,
        tag_size: int = DEFAULT_TAG_SIZE,
        allow_retired: bool = False,
        accept_short_tags: bool = False,
        key_factory: KeyFactory | None = None,
        adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    ) -> None:
        self._lock = threading.RLock()
        self._keys: dict[int, Key] = {}
        for key in keys:
            if not isinstance(key, Key):
                raise TypeError(f"keys must be Key objects, not {type(key).__name__}")
            if key.key_id in self._keys:
                raise InvalidKeyring(f"duplicate key id {key.id_hex}")
            self._keys[key.key_id] = key
        primaries = [k for k in self._keys.values() if k.state is KeyState.PRIMARY]
        if len(primaries) != 1:
            raise InvalidKeyring(f"a keyring needs exactly one primary key, found {len(primaries)}")
        if tag_size not in (16, 32):
            raise ValueError(f"tag_size must be 16 or 32, not {tag_size!r}")
        self._tag_size = tag_size
        self._suite = Suite.parse(suite) if suite is not None else primaries[0].suite
        self._allow_retired = bool(allow_retired)
        self._accept_short_tags = bool(accept_short_tags)
        if not isinstance(adaptive_threshold, int) or adaptive_threshold < 0:
            raise ValueError("adaptive_threshold must be an int >= 0")
        self._adaptive_threshold = adaptive_threshold
        self._threshold = 0  # effective: 0 unless the primary is AEGIS-128X2/X4
        self._key_factory = key_factory or _random_material
        self._closed = False
        self._hash_keys: dict[tuple[int, bytes], bytearray] = {}  # keyed_hash() keys
        self._close_hooks: list[Callable[[], None]] = []
        self._derived: dict[bytes, _Slot] = {}  # every slot derived so far, by header
        self._slots: dict[bytes, _Slot] = {}  # the ones open() may use without asking
        self._seal: _Slot | _ClosedSlot = _CLOSED
        self._seal_small: _Slot | _ClosedSlot = _CLOSED
        # what named_sealer/named_opener read from C, replaced whole on every change:
        # ({header: _speedups.Context of a usable slot}, (threshold, Context, prefix,
        # small Context, small prefix) or None when the sealing slots have no Context)
        self._native: tuple[dict[bytes, Any], tuple[int, Any, bytes, Any, bytes] | None] = (
            {},
            None,
        )
        self._publish()

    # ---- construction helpers ---------------------------------------------------------------

    @classmethod
    def generate(
        cls,
        suite: Suite | str | int = DEFAULT_SUITE,
        tag_size: int = DEFAULT_TAG_SIZE,
        *,
        key_factory: KeyFactory | None = None,
        allow_retired: bool = False,
        accept_short_tags: bool = False,
        adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    ) -> Keyring:
        """A new keyring with one fresh primary key."""
        factory = key_factory or _random_material
        key_id = int.from_bytes(os.urandom(4), "big")
        key = Key(key_id, suite, factory(key_id), state=KeyState.PRIMARY)
        return cls(
            [key],
            suite=suite,
            tag_size=tag_size,
            allow_retired=allow_retired,
            accept_short_tags=accept_short_tags,
            key_factory=factory,
            adaptive_threshold=adaptive_threshold,
        )

    # ---- read-only views --------------------------------------------------------------------

    @property
    def primary(self) -> Key:
        return self._primary_key()

    @property
    def keys(self) -> tuple[Key, ...]:
        """All keys, oldest first."""
        return tuple(sorted(self._keys.values(), key=lambda k: k.created_at))

    @property
    def suite(self) -> Suite:
        return self._suite

    @property
    def tag_size(self) -> int:
        """Tag size of new values (AEGIS suites; AES-256-GCM always uses 16)."""
        return self._tag_size

    @property
    def allow_retired(self) -> bool:
        """Whether :meth:`open` accepts values of retired keys without being asked per call."""
        return self._allow_retired

    @allow_retired.setter
    def allow_retired(self, value: bool) -> None:
        with self._lock:
            self._allow_retired = bool(value)
            if not self._closed:
                self._publish()

    @property
    def accept_short_tags(self) -> bool:
        """Whether a 32-byte-tag keyring opens 16-byte-tag values of its keys (migrations)."""
        return self._accept_short_tags

    @accept_short_tags.setter
    def accept_short_tags(self, value: bool) -> None:
        with self._lock:
            self._accept_short_tags = bool(value)
            if not self._closed:
                self._publish()

    def tag_size_allowed(self, suite: Suite, tag_size: int) -> bool:
        """Whether the tag-size policy lets this keyring open a value of ``suite``/``tag_size``."""
        return (
            tag_size >= Suite.parse(suite).spec.tag_size_for(self._tag_size)
            or self._accept_short_tags
        )

    def check_tag_size(self, suite: Suite, tag_size: int, key_id: int) -> None:
        """Raise ShortTagRefused when the tag-size policy refuses such a value."""
        if not self.tag_size_allowed(suite, tag_size):
            raise ShortTagRefused(
                f"value of key {key_id:08x} has a {tag_size}-byte tag but this keyring requires "
                f"{self._tag_size}-byte tags; pass accept_short_tags=True to open it (e.g. while "
                "resealing old values)"
            )

    @property
    def adaptive_threshold(self) -> int:
        """Plaintexts shorter than this are sealed with AEGIS-128L by an X2/X4 primary."""
        return self._adaptive_threshold

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, key_id: int) -> Key:
        try:
            return self._keys[key_id]
        except KeyError:
            raise UnknownKeyId(key_id) from None

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Key]:
        return iter(self.keys)

    def __repr__(self) -> str:
        if self._closed:
            return "<Keyring closed>"
        p = self._primary_key()
        return (
            f"<Keyring keys={len(self._keys)} primary={p.id_hex} suite={p.suite} "
            f"tag_size={self._tag_size}>"
        )

    __str__ = __repr__

    # ---- the per-value path -----------------------------------------------------------------

    # ---- key management ---------------------------------------------------------------------

    def _primary_key(self) -> Key:
        for key in self._keys.values():
            if key.state is KeyState.PRIMARY:
                return key
        raise KeyNotUsable("the keyring is closed")

    def _check_open(self) -> None:
        if self._closed:
            raise KeyNotUsable("the keyring is closed")

    def _slot(self, key: Key, suite: Suite, tag_size: int) -> _Slot:
        # caller holds the lock
        header = pack_header(suite, key.key_id, tag_size)
        slot = self._derived.get(header)
        if slot is None or slot.key is not key:
            slot = _Slot(key, suite, tag_size)
            derived = dict(self._derived)
            derived[header] = slot
            self._derived = derived
        usable = key.state in (KeyState.PRIMARY, KeyState.ACTIVE) or (
            key.state is KeyState.RETIRED and self._allow_retired
        )
        if usable and self.tag_size_allowed(suite, tag_size):
            if self._slots.get(header) is not slot:
                slots = dict(self._slots)
                slots[header] = slot
                self._slots = slots
                if type(self)._native_ok():
                    self._native = (_native_opens(slots), self._native[1])
        return slot

    @classmethod
    def _native_ok(cls) -> bool:
        """Whether named_sealer/named_opener may bypass seal()/open() (not overridden)."""
        return cls.seal is Keyring.seal and cls.open is Keyring.open

    def _publish(self) -> None:
        """Rebuild the snapshots after a change of keys or states.  Takes the (reentrant) lock:
        callers that change keys hold it already, the constructor does not."""
        with self._lock:
            self._derived = {
                h: s for h, s in self._derived.items() if s.key.state is not KeyState.DESTROYED
            }
            self._slots = {}
            for slot in self._derived.values():
                self._slot(slot.key, Suite(slot.prefix[1]), 32 if slot.prefix[6] & 1 else 16)
            primary = self._primary_key()
            tag = primary.suite.spec.tag_size_for(self._tag_size)
            self._seal = self._slot(primary, primary.suite, tag)
            small = primary.suite.spec.small_suite
            if small is not None and self._adaptive_threshold:
                self._seal_small = self._slot(primary, small, tag)
                self._threshold = self._adaptive_threshold
            else:
                self._seal_small = self._seal
                self._threshold = 0
            if type(self)._native_ok():
                self._native = (_native_opens(self._slots), _native_seal(self))

    def _new_key_id(self) -> int:
        while True:
            key_id = int.from_bytes(os.urandom(4), "big")
            if key_id not in self._keys:
                return key_id

    def add(self, key: Key) -> Key:
        """Add a non-primary key (e.g. staged on every server before it is promoted)."""
        if not isinstance(key, Key):
            raise TypeError(f"key must be a Key, not {type(key).__name__}")
        with self._lock:
            self._check_open()
            if key.state is KeyState.PRIMARY:
                raise InvalidKeyring("add() takes non-primary keys; use promote() afterwards")
            if key.key_id in self._keys:
                raise InvalidKeyring(f"duplicate key id {key.id_hex}")
            keys = dict(self._keys)
            keys[key.key_id] = key
            self._keys = keys
        log.info("key %s added (%s, %s)", key.id_hex, key.suite, key.state.value)
        return key

    def new_key(self, *, suite: Suite | str | int | None = None) -> Key:
        """Create and add a fresh ``active`` key (material from the key factory)."""
        with self._lock:
            self._check_open()
            key_id = self._new_key_id()
            material = self._key_factory(key_id)
            key = Key(key_id, suite if suite is not None else self._suite, material)
            return self.add(key)

    def promote(self, key_id: int) -> Key:
        """Make an active key the primary; the old primary becomes active (rotated now)."""
        with self._lock:
            self._check_open()
            key = self.get(key_id)
            if key.state is KeyState.PRIMARY:
                return key
            if key.state is not KeyState.ACTIVE:
                raise InvalidKeyring(
                    f"only an active key can become primary; {key.id_hex} is {key.state}"
                )
            old = self._primary_key()
            old._state = KeyState.ACTIVE
            old._rotated_at = _now()
            key._state = KeyState.PRIMARY
            self._publish()
        log.info("key %s is now the primary; %s is active", key.id_hex, old.id_hex)
        return key

    def rotate(self, *, suite: Suite | str | int | None = None) -> Key:
        """Create a new primary key; the previous primary stays usable for opening (active)."""
        with self._lock:
            key = self.new_key(suite=suite)
            return self.promote(key.key_id)

    def retire(self, key_id: int) -> Key:
        """Active -> retired: its values open only with ``allow_retired``."""
        return self._transition(key_id, KeyState.RETIRED, (KeyState.ACTIVE,))

    def reactivate(self, key_id: int) -> Key:
        """Retired -> active."""
        return self._transition(key_id, KeyState.ACTIVE, (KeyState.RETIRED,))

    def destroy(self, key_id: int) -> Key:
        """Active or retired -> destroyed: the material is wiped and its values never open again."""
        return self._transition(key_id, KeyState.DESTROYED, (KeyState.ACTIVE, KeyState.RETIRED))

    def _transition(self, key_id: int, to: KeyState, allowed: tuple[KeyState, ...]) -> Key:
        with self._lock:
            self._check_open()
            key = self.get(key_id)
            if key.state is to:
                return key
            if key.state not in allowed:
                hint = "; rotate first" if key.state is KeyState.PRIMARY else ""
                raise InvalidKeyring(f"key {key.id_hex} is {key.state}, cannot become {to}{hint}")
            before, key._state = key.state, to
            if to is KeyState.DESTROYED:
                key._wipe()
                self._forget_hash_keys(lambda kid: kid == key_id)
            self._publish()
        log.info("key %s: %s -> %s", key.id_hex, before.value, to.value)
        return key

    def close(self) -> None:
        """Wipe all key material (best effort in Python; the C contexts wipe on free), the
        keyed_hash() keys, and run the :meth:`on_close` callbacks (e.g. a KMS cache wipe)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._seal = self._seal_small = _CLOSED
            self._threshold = 0
            self._slots = {}
            self._native = ({}, None)
            self._derived = {}
            for key in self._keys.values():
                key._wipe()
            self._forget_hash_keys(lambda key_id: True)
            hooks, self._close_hooks = self._close_hooks, []
        log.debug("keyring closed: material of %d keys wiped", len(self._keys))
        for hook in hooks:
            hook()

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when the keyring is closed (key sources wipe their caches)."""
        with self._lock:
            self._check_open()
            self._close_hooks.append(callback)

    # ---- keyed hashes (blind indexes) ---------------------------------------------------------

    def keyed_hash(self, key_id: int, info: bytes, data: bytes | bytearray | memoryview) -> bytes:
        """HMAC-SHA256 of ``data`` under HKDF-SHA256(key material, info=``info``), 32 bytes.

        ``info`` must lie outside sealstore's reserved derivation domain: an ``info`` starting
        with ``sealstore/`` is refused (:class:`~sealstore.errors.ReservedDerivation`) unless
        it starts with ``sealstore/v1/blind-index`` (what :mod:`sealstore.blind_index` uses).
        Every internal key (the values' subkeys, ``sealstore/v1/subkey`` || header; the object
        keys, ``sealstore/v1/object...``) is derived under another ``sealstore/`` prefix, so
        no accepted ``info`` can make this HMAC key equal to, or a prefix or an extension of,
        an internal key.  Accepted ``info`` values derive exactly as before (stored blind
        indexes keep matching).

        The derived key is cached per (key, info); destroying the key or closing the keyring
        wipes it, and from then on this raises KeyNotUsable (checked again after hashing, so a
        concurrent close never lets a value computed with a wiped key through).
        """
        hkey = self._hash_keys.get((key_id, info)) or self._new_hash_key(key_id, info)
        mac = hmac.digest(hkey, data, "sha256")
        del hkey
        if self._closed or (key_id, info) not in self._hash_keys:
            del mac  # neither the key nor the value in the locals of a raising frame
            raise KeyNotUsable(f"the keyring is closed or key {key_id:08x} was destroyed")
        return mac

    def _new_hash_key(self, key_id: int, info: bytes) -> bytearray:
        info = bytes(info)
        if info.startswith(RESERVED_INFO_PREFIX) and not info.startswith(KEYED_HASH_INFO_PREFIXES):
            raise ReservedDerivation(
                "keyed_hash: info starting with 'sealstore/' is reserved for sealstore's own "
                "key derivations (only 'sealstore/v1/blind-index...' is accepted there)"
            )
        with self._lock:
            self._check_open()
            key = self.get(key_id)
            if key.state is KeyState.DESTROYED:
                raise KeyNotUsable(f"key {key.id_hex} is destroyed")
            if (key_id, info) in self._hash_keys:  # another thread derived it meanwhile
                return self._hash_keys[(key_id, info)]
            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info)
            out = bytearray(32)
            if hasattr(hkdf, "derive_into"):
                hkdf.derive_into(key._live_material(), out)
            else:  # pragma: no cover - older cryptography
                out[:] = hkdf.derive(bytes(key._live_material()))
            self._hash_keys = {**self._hash_keys, (key_id, info): out}
            return out

    def _forget_hash_keys(self, which: Callable[[int], bool]) -> None:
        # caller holds the lock; unpublish first, then wipe, so keyed_hash()'s re-check after
        # hashing always sees a key that was wiped while it hashed as gone
        old = self._hash_keys
        self._hash_keys = {k: v for k, v in old.items() if not which(k[0])}
        for slot, buf in old.items():
            if slot not in self._hash_keys:
                buf[:] = bytes(len(buf))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
