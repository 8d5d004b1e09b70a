"""Keyrings: keys with ids, suites and states, and the seal/open entry points on top of them.

A :class:`Keyring` holds :class:`Key` objects (32 bytes of root material each) and exactly one
primary.  Values are sealed under a per-(key, suite, tag size) subkey derived with HKDF-SHA256
and kept as a ready cipher object, so the per-value path is one dictionary look-up and one C
call.  The format is in :mod:`sealstore.format` and ``docs/FORMAT.md``.

Key states: ``primary`` seals and opens; ``active`` opens; ``retired`` opens only when asked
explicitly (``allow_retired``); ``destroyed`` has no material left.

Thread safety: seal/open read immutable snapshots and never lock; changes (rotate, state
changes, first use of a key) build new snapshots under a lock and swap them in.
"""

from __future__ import annotations

import enum
import hmac
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any
from datetime import datetime, timezone

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import (
    InvalidKeyring,
    InvalidTag,
    KeyNotUsable,
    MalformedCiphertext,
    ShortTagRefused,
    UnknownKeyId,
    UnknownKeyring,
)
from .holdskey import HoldsKey
from .format import (
    _DIGESTS,
    HEADER_SIZE,
    Suite,
    context_digest,
    overhead,
    pack_header,
    parse_header,
)

__all__ = [
    "DEFAULT_ADAPTIVE_THRESHOLD",
    "DEFAULT_SUITE",
    "DEFAULT_TAG_SIZE",
    "KEY_SIZE",
    "Key",
    "KeyState",
    "Keyring",
    "forget_keyring",
    "get_keyring",
    "named_opener",
    "named_sealer",
    "use_keyring",
]

KEY_SIZE = 32  # root material per key; subkeys are derived from it
DEFAULT_SUITE = Suite.AEGIS_128X4
DEFAULT_TAG_SIZE = 32
# Below this many plaintext bytes an AEGIS-128X2/X4 key seals with AEGIS-128L (its own subkey):
# the single-lane variant initialises faster, so it wins on small values (bench/keyring_bench.py).
DEFAULT_ADAPTIVE_THRESHOLD = 1024
_SUBKEY_INFO = b"sealstore/v1/subkey"

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
        material,
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
            self._material = None
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

    key_id = property(lambda self: self._key_id, doc="32-bit key id stored in every value")
    suite = property(lambda self: self._suite, doc="the suite this key seals with")
    state = property(lambda self: self._state, doc="a KeyState")
    created_at = property(lambda self: self._created_at, doc="when the key was created (UTC)")
    rotated_at = property(
        lambda self: self._rotated_at, doc="when the key stopped being primary (UTC), or None"
    )

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


def _native_opens(slots: dict) -> dict:
    """{header: _speedups.Context} of the slots whose cipher has one (AEGIS suites)."""
    return {h: s.cipher._fast for h, s in slots.items() if hasattr(s.cipher, "_fast")}


def _native_seal(ring: "Keyring") -> tuple | None:
    large, small = ring._seal, ring._seal_small
    if not (hasattr(large.cipher, "_fast") and hasattr(small.cipher, "_fast")):
        return None
    return (ring._threshold, large.cipher._fast, large.prefix, small.cipher._fast, small.prefix)


def _refuse(*args, **kwargs):
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
    hkdf.derive_into(key._material, out)  # no immutable copy of the subkey
    return out


def make_cipher(suite: Suite, subkey: bytes, tag_size: int):
    """The cipher object of ``suite`` keyed with ``subkey`` (columns and objects share it)."""
    return suite.spec.new_cipher(subkey, tag_size)


def _random_material(key_id: int) -> bytes:
    return os.urandom(KEY_SIZE)


def _with_index(exc: Exception, index: int) -> Exception:
    exc.index = index
    return exc


class Keyring(HoldsKey):
    """Keys plus the seal/open/reseal entry points.  See the module docstring.

    ``suite`` and ``tag_size`` apply to keys created by :meth:`rotate` and to new values (the
    tag size; the suite of a value is its key's).  AES-256-GCM always uses a 16-byte tag.
    ``adaptive_threshold``: an AEGIS-128X2/X4 primary seals plaintexts shorter than this with
    AEGIS-128L under its own subkey (the suite is recorded per value; 0 disables).  An AEGIS
    key opens values of every AEGIS variant, an AES-256-GCM key only AES-256-GCM values.
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
        self._native: tuple = ({}, None)
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

    def __iter__(self):
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

    def seal(self, plaintext, context=b"") -> bytes:
        """Seal ``plaintext`` under the primary key, bound to ``context``."""
        slot = self._seal if len(plaintext) >= self._threshold else self._seal_small
        try:
            ad = _DIGESTS[context]
        except (KeyError, TypeError):
            ad = context_digest(context)
        return slot.seal(slot.prefix, plaintext, ad)

    def open(self, sealed, context=b"", *, allow_retired: bool = False) -> bytes:
        """Open a value sealed under any usable key of this keyring with the same ``context``.

        Raises MalformedCiphertext, UnknownKeyId or KeyNotUsable before decrypting, and
        InvalidTag if authentication fails (wrong context, edited header or body).
        """
        try:
            slot = self._slots[sealed[:HEADER_SIZE]]
        except (KeyError, TypeError, ValueError):  # ValueError: a writable memoryview
            slot = None  # resolved outside the handler: no KeyError(stored bytes) in the chain
        if slot is None:
            slot = self._resolve(sealed, allow_retired)
        if len(sealed) < slot.overhead:
            parse_header(sealed)  # raises the precise "too short" error
        ad = _DIGESTS.get(context) if type(context) is bytes else None
        if ad is None:
            ad = context_digest(context)
        return slot.open(HEADER_SIZE, sealed, ad)

    def seal_many(self, plaintexts, context=b"") -> list[bytes]:
        """Seal every plaintext of a list under the primary key, in one native call per suite."""
        large, small = self._seal, self._seal_small
        plaintexts = list(plaintexts)  # a copy: the caller's list may change during the call
        ad = context_digest(context)
        if small is large or not plaintexts:
            return large.seal_many(large.prefix, plaintexts, ad)
        threshold = self._threshold
        try:
            lengths = list(map(len, plaintexts))
        except TypeError:
            i = next(i for i, p in enumerate(plaintexts) if not hasattr(p, "__len__"))
            raise _with_index(
                TypeError(f"plaintext must be bytes-like, not {type(plaintexts[i]).__name__}"), i
            ) from None
        if max(lengths) < threshold:
            return small.seal_many(small.prefix, plaintexts, ad)
        if min(lengths) >= threshold:
            return large.seal_many(large.prefix, plaintexts, ad)
        out: list = [None] * len(plaintexts)
        for slot, idx in (
            (small, [i for i, n in enumerate(lengths) if n < threshold]),
            (large, [i for i, n in enumerate(lengths) if n >= threshold]),
        ):
            try:
                sealed = slot.seal_many(slot.prefix, [plaintexts[i] for i in idx], ad)
            except Exception as exc:
                if isinstance(getattr(exc, "index", None), int):
                    exc.index = idx[exc.index]  # a position in the caller's list
                raise
            for i, v in zip(idx, sealed):
                out[i] = v
        return out

    def open_many(self, sealed, context=b"", *, allow_retired: bool = False) -> list[bytes]:
        """Open a list of values sharing one context; one native call per key involved.

        Every header is checked before anything is decrypted.  On failure the exception
        carries ``.index``: for InvalidTag the first position that fails to open, for header
        errors a position with that error.
        """
        values = list(sealed)  # a copy: the caller's list may change during the call
        if not values:
            return []
        ad = context_digest(context)
        try:
            heads = [v[:HEADER_SIZE] for v in values]
        except TypeError:
            heads = None  # _open_groups names the offending position
        if heads is not None:
            first = heads[0]
            slot = self._slots.get(first) if isinstance(first, bytes) else None
            if slot is not None and heads.count(first) == len(heads):
                if min(map(len, values)) >= slot.overhead:
                    return slot.open_many(HEADER_SIZE, values, ad)
        return self._open_groups(values, ad, allow_retired)

    def _open_groups(self, values, ad, allow_retired) -> list[bytes]:
        groups: dict[bytes, list[int]] = {}
        for i, v in enumerate(values):
            try:
                head = bytes(v[:HEADER_SIZE])
            except TypeError:
                raise _with_index(
                    TypeError(f"sealed value must be bytes-like, not {type(v).__name__}"), i
                ) from None
            groups.setdefault(head, []).append(i)
        plan = []
        for head, idx in groups.items():  # validate everything before decrypting anything
            try:
                slot = self._slots.get(head) or self._resolve(values[idx[0]], allow_retired)
            except Exception as exc:
                raise _with_index(exc, idx[0])
            for i in idx:
                if len(values[i]) < slot.overhead:
                    try:
                        parse_header(values[i])
                    except MalformedCiphertext as exc:
                        raise _with_index(exc, i) from None
            plan.append((slot, idx))
        out: list = [None] * len(values)
        failed = None
        for slot, idx in plan:
            try:
                opened = slot.open_many(HEADER_SIZE, [values[i] for i in idx], ad)
            except InvalidTag as exc:
                pos = idx[getattr(exc, "index", 0) or 0]
                failed = pos if failed is None else min(failed, pos)
                continue
            for i, pt in zip(idx, opened):
                out[i] = pt
        if failed is not None:
            raise _with_index(InvalidTag(), failed)
        return out

    def reseal(self, sealed, context=b"", *, allow_retired: bool = False):
        """Open with whichever key sealed ``sealed`` and seal again under the primary.

        A value already under the primary (same key and tag size, a suite the primary seals
        with) is returned as it is, without being opened.
        """
        if not self.needs_reseal(sealed):
            return sealed
        return self.seal(self.open(sealed, context, allow_retired=allow_retired), context)

    def reseal_many(self, sealed, context=b"", *, allow_retired: bool = False) -> list:
        """:meth:`reseal` for a list sharing one context; values under the primary pass through."""
        values = sealed if isinstance(sealed, list) else list(sealed)
        current = (self._seal.prefix, self._seal_small.prefix)
        stale = [i for i, v in enumerate(values) if v[:HEADER_SIZE] not in current]
        if not stale:
            return list(values)
        try:
            opened = self.open_many(
                [values[i] for i in stale], context, allow_retired=allow_retired
            )
        except Exception as exc:
            if hasattr(exc, "index"):
                exc.index = stale[exc.index]
            raise
        out = list(values)
        for i, v in zip(stale, self.seal_many(opened, context)):
            out[i] = v
        return out

    def needs_reseal(self, sealed) -> bool:
        """True when ``sealed`` is not under the primary key (and its suites and tag size)."""
        head = sealed[:HEADER_SIZE]
        return head != self._seal.prefix and head != self._seal_small.prefix

    def _resolve(self, sealed, allow_retired: bool) -> _Slot:
        """Slow path of open(): diagnose the header precisely, derive and cache the subkey."""
        self._check_open()
        h = parse_header(sealed)
        key = self._keys.get(h.key_id)
        if key is None:
            raise UnknownKeyId(h.key_id)
        if key.suite.spec.family != h.suite.spec.family:
            raise MalformedCiphertext(
                f"value names suite {h.suite} but key {key.id_hex} is a {key.suite} key"
            )
        if key.state is KeyState.DESTROYED:
            raise KeyNotUsable(f"key {key.id_hex} is destroyed")
        if key.state is KeyState.RETIRED and not (allow_retired or self._allow_retired):
            raise KeyNotUsable(
                f"key {key.id_hex} is retired; pass allow_retired=True to open its values"
            )
        self.check_tag_size(h.suite, h.tag_size, h.key_id)
        with self._lock:
            return self._slot(key, h.suite, h.tag_size)

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
            key._state = to
            if to is KeyState.DESTROYED:
                key._wipe()
                self._forget_hash_keys(lambda kid: kid == key_id)
            self._publish()
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
        for hook in hooks:
            hook()

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when the keyring is closed (key sources wipe their caches)."""
        with self._lock:
            self._check_open()
            self._close_hooks.append(callback)

    # ---- keyed hashes (blind indexes) ---------------------------------------------------------

    def keyed_hash(self, key_id: int, info: bytes, data) -> bytes:
        """HMAC-SHA256 of ``data`` under HKDF-SHA256(key material, info=``info``), 32 bytes.

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
        with self._lock:
            self._check_open()
            key = self.get(key_id)
            if key.state is KeyState.DESTROYED:
                raise KeyNotUsable(f"key {key.id_hex} is destroyed")
            if (key_id, info) in self._hash_keys:  # another thread derived it meanwhile
                return self._hash_keys[(key_id, info)]
            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=bytes(info))
            out = bytearray(32)
            if hasattr(hkdf, "derive_into"):
                hkdf.derive_into(key._material, out)
            else:  # pragma: no cover - older cryptography
                out[:] = hkdf.derive(bytes(key._material))
            self._hash_keys = {**self._hash_keys, (key_id, bytes(info)): out}
            return out

    def _forget_hash_keys(self, which: Callable[[int], bool]) -> None:
        # caller holds the lock; unpublish first, then wipe, so keyed_hash()'s re-check after
        # hashing always sees a key that was wiped while it hashed as gone
        old = self._hash_keys
        self._hash_keys = {k: v for k, v in old.items() if not which(k[0])}
        for slot, buf in old.items():
            if slot not in self._hash_keys:
                buf[:] = bytes(len(buf))

    def __enter__(self) -> Keyring:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- named keyrings, for adapters that refer to a keyring by name ---------------------------

_NAMED: dict[str, Keyring] = {}
_NAMED_LOCK = threading.Lock()


def use_keyring(keyring: Keyring, name: str = "default") -> Keyring:
    """Register ``keyring`` under ``name`` (replacing any previous one) and return it."""
    if not isinstance(keyring, Keyring):
        raise TypeError(f"keyring must be a Keyring, not {type(keyring).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError("name must be a non-empty str")
    with _NAMED_LOCK:
        _NAMED[name] = keyring
    return keyring


def get_keyring(name: str = "default") -> Keyring:
    """The keyring registered under ``name``; UnknownKeyring if there is none."""
    try:
        return _NAMED[name]
    except KeyError:
        raise UnknownKeyring(
            f"no keyring registered as {name!r}; call sealstore.use_keyring(keyring, name={name!r})"
        ) from None


def forget_keyring(name: str = "default") -> Keyring | None:
    """Unregister ``name``; returns the keyring that was registered, if any."""
    with _NAMED_LOCK:
        return _NAMED.pop(name, None)


def named_sealer(
    name: str,
    context: bytes,
    fallback: Callable[[Any], bytes | None],
    *,
    raw: type | None = None,
    max_length: int | None = None,
    encode: Callable[[Any], bytes] | None = None,
    out: type = bytes,
) -> Callable[[Any], bytes | bytearray | None]:
    """One callable that seals a value with the keyring registered as ``name``, bound to
    ``context``: what an encrypted column calls for every value it writes.

    Same result as ``get_keyring(name).seal(encode(value), context)`` (None stays None), in one
    native call: the name is looked up on every call, so swapping or rotating the registered
    keyring takes effect at once.  ``raw=str`` seals an exact ASCII ``str`` as it is, ``raw=bytes``
    an exact ``bytes``, when no longer than ``max_length``; any other value goes through
    ``encode`` (which raises for bad values) or, without one, through ``fallback``.
    ``out=bytearray`` returns sealed values as bytearrays: Python's sqlite3 binds those
    directly, while a ``bytes`` parameter goes through its adapter lookup (about 0.3 us
    each).  ``fallback(value)`` also serves whatever the native path does not: no keyring under the
    name (it should raise UnknownKeyring), a closed keyring, AES-256-GCM, and Keyring
    subclasses that override ``seal``.
    """
    from . import _speedups

    kinds = {None: 0, bytes: 1, str: 2}
    if raw not in kinds:
        raise ValueError("raw must be None, bytes or str")
    if out not in (bytes, bytearray):
        raise ValueError("out must be bytes or bytearray")
    return _speedups.NamedSealer(
        _NAMED, name, context_digest(context), fallback, raw=kinds[raw],
        max_len=-1 if max_length is None else max_length, encode=encode,
        out_bytearray=out is bytearray,
    )  # fmt: skip


def named_opener(
    name: str,
    context: bytes,
    fallback: Callable[[Any], Any],
    *,
    text: bool = False,
    decode: Callable[[bytes | str], Any] | None = None,
) -> Callable[[Any], Any]:
    """One callable that opens a value sealed by :func:`named_sealer` (or ``Keyring.seal``).

    Same result as ``decode(get_keyring(name).open(value, context))`` (None stays None;
    ``text=True`` decodes the plaintext as UTF-8 first, into a wiped scratch buffer).  Headers
    of keys the keyring cannot open without asking, values too short to be whole, non-buffer
    values, AES-256-GCM values, everything :func:`named_sealer` hands to its fallback, and
    values whose tag fails or whose plaintext does not decode go to ``fallback(value)``, which
    raises the precise error (an encrypted column's names the column); the decoder's own
    exception, which would carry the plaintext, is dropped.
    """
    from . import _speedups

    return _speedups.NamedOpener(
        _NAMED, name, context_digest(context), fallback, text=text, decode=decode
    )
