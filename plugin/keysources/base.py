"""Key sources: where a keyring lives between processes (a key file, a database table).

A :class:`KeySource` reads and writes :class:`KeyRecord` rows; a :class:`~sealstore.wrapping.Wrapper`
(or none, for plain development key files) protects the material.  The shared logic here turns
records into a :class:`~sealstore.keyring.Keyring` and back, creates, rotates, re-wraps (KEK
rotation, no sealed value touched) and refreshes a live keyring from the store.  Every change
is one read-modify-write under the store's exclusive lock (:meth:`KeySource._exclusive`), with
a stale writer's changes merged (:mod:`sealstore.keysources.merge`), and a wrapped store's metadata is
authenticated (:mod:`sealstore.keysources.metadata`).  See ``docs/KEYS.md``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from ..errors import InternalError, KeySourceError
from ..format import Suite
from ..holdskey import HoldsKey
from .metadata import FORMAT, StoreMeta, canonical, metadata_tag, tag_matches, tampered
from .merge import merge_records, record_values
from .records import KeyRecord
from ..keyring import DEFAULT_SUITE, DEFAULT_TAG_SIZE, KEY_SIZE, Key, Keyring, KeyState
from ..wrapping import Wrapper

__all__ = ["KeyRecord", "KeySource"]

log: logging.Logger = logging.getLogger(__name__)


def _wrapping(wrapper: Wrapper | None) -> str:
    return "none (plain material)" if wrapper is None else wrapper.kind


class KeySource(HoldsKey, ABC):
    """Base of the key stores.  Subclasses implement :meth:`exists`, :meth:`_read`, :meth:`_write`."""

    def __init__(self, wrapper: Wrapper | None = None) -> None:
        self.wrapper = wrapper
        # (blob, store format it was wrapped for) this source read or made, by key id
        self._wrapped: dict[int, tuple[bytes, int]] = {}
        # (store version, record_values()) as last read or written by this object
        self._seen: tuple[int | None, dict[int, tuple[Any, ...]]] | None = None
        self._mutex = threading.RLock()  # one read-modify-write of this object at a time
        self._stored_meta = StoreMeta(1)  # what the last _read() found beside the records
        self._meta_key: tuple[bytes, bytearray] | None = None  # (wrapped, plain) metadata key

    @abstractmethod
    def exists(self) -> bool:
        """Whether the store already holds a keyring."""

    @abstractmethod
    def _read(self) -> list[KeyRecord]:
        """All stored records (KeySourceError if there is no keyring), each with the
        ``wrap_format`` of the store; sets ``self._stored_meta`` to what is stored beside them."""

    @abstractmethod
    def _write(self, records: list[KeyRecord], *, create: bool, meta: StoreMeta) -> None:
        """Store ``records`` and ``meta`` (``create``: the store must not hold a keyring yet)."""

    def _next_version(self, create: bool) -> int | None:
        """The version counter the next write stores (None: the store keeps none)."""
        return None

    # ---- authenticated metadata (sealstore.keysources.metadata) ---------------------------------------------

    def _metadata_key(self, blob: bytes | None = None) -> tuple[bytes, bytearray]:
        """The (wrapped, plain) metadata key: ``blob`` unwrapped, or a new one when None."""
        if self._meta_key is not None and (blob is None or self._meta_key[0] == blob):
            return self._meta_key
        if self.wrapper is None:  # (a store of plain keys keeps no metadata key)
            raise InternalError("a metadata key needs a wrapping")
        if blob is None:
            material, blob = self.wrapper.generate(None, FORMAT)
        else:
            material = self.wrapper.unwrap(None, blob, FORMAT)
        self._meta_key = (bytes(blob), bytearray(material))
        return self._meta_key

    def _read_checked(self) -> list[KeyRecord]:
        """:meth:`_read`, with the metadata tag of a format 2 store verified."""
        records = self._read()
        meta = self._stored_meta
        if meta.fmt >= FORMAT:
            if self.wrapper is None or meta.key_blob is None:
                raise KeySourceError(f"{self}: a format {meta.fmt} store needs its wrapping")
            data = canonical(records, version=self._version(), wrapping=self.wrapper.describe())
            ok = tag_matches(self._metadata_key(meta.key_blob)[1], data, meta.tag)
            if not ok:  # no metadata key in this frame's locals (error reporters record them)
                raise tampered(str(self))
        return records

    def _store(self, records: list[KeyRecord], *, create: bool) -> None:
        """:meth:`_write` ``records``; a wrapped store is written as format 2 (blobs of format 1
        re-wrapped, the metadata tagged)."""
        if self.wrapper is None:
            self._write(records, create=create, meta=StoreMeta(1))
            return
        for r in records:
            if r.wrapped is not None and r.wrap_format != FORMAT:
                r.wrapped = self.wrapper.rewrap(r.key_id, r.wrapped, self.wrapper, r.wrap_format)
                r.wrap_format = FORMAT
                self._wrapped[r.key_id] = (r.wrapped, FORMAT)
        blob, key = self._metadata_key()
        data = canonical(
            records, version=self._next_version(create), wrapping=self.wrapper.describe()
        )
        self._write(records, create=create, meta=StoreMeta(FORMAT, blob, metadata_tag(key, data)))

    @contextlib.contextmanager
    def _exclusive(self, *, create: bool = False) -> Iterator[None]:
        """Exclude every other writer of the store (other processes too) for one
        read-modify-write; :meth:`_read` and :meth:`_write` inside it see and change the store
        under that exclusion.  Subclasses override it (a file lock, a table lock)."""
        yield

    # ---- records <-> keys ---------------------------------------------------------------------

    def _key(self, r: KeyRecord, state: KeyState | None = None) -> Key:
        state = state or r.state
        material = None
        if r.state is not KeyState.DESTROYED:
            if self.wrapper is not None:
                if r.wrapped is None:
                    raise KeySourceError(
                        f"{self}: key {r.key_id:08x} is stored in plain, but a "
                        f"{self.wrapper.kind} wrapping is configured; re-wrap the store first"
                    )
                material = self.wrapper.unwrap(r.key_id, r.wrapped, r.wrap_format)
                self._wrapped[r.key_id] = (r.wrapped, r.wrap_format)
            elif r.material is None:
                raise KeySourceError(
                    f"{self}: key {r.key_id:08x} is stored wrapped; configure its wrapping"
                )
            else:
                material = r.material
        return Key(
            r.key_id,
            r.suite,
            material,
            state=state,
            created_at=r.created_at,
            rotated_at=r.rotated_at,
        )

    def _records(self, keyring: Keyring) -> list[KeyRecord]:
        out = []
        for key in keyring.keys:
            rec = KeyRecord(key.key_id, key.suite, key.state, key.created_at, key.rotated_at)
            if key.state is not KeyState.DESTROYED:
                if self.wrapper is None:
                    rec.material = key.reveal_material()
                else:
                    cached = self._wrapped.get(key.key_id)
                    if cached is None:
                        blob = self.wrapper.wrap(key.key_id, key.reveal_material(), FORMAT)
                        cached = self._wrapped[key.key_id] = (blob, FORMAT)
                    rec.wrapped, rec.wrap_format = cached
            else:
                self._wrapped.pop(key.key_id, None)
            out.append(rec)
        return out

    def new_material(self, key_id: int) -> bytes:
        """Key factory for keyrings of this source: KMS/wrapper-generated material when wrapped."""
        if self.wrapper is None:
            return os.urandom(KEY_SIZE)
        material, blob = self.wrapper.generate(key_id, FORMAT)
        self._wrapped[key_id] = (blob, FORMAT)
        return material

    # ---- operations -----------------------------------------------------------------------------

    def _version(self) -> int | None:
        """The store's version counter as last read or written (None: the store keeps none)."""
        return None

    def _remember(self, records: list[KeyRecord]) -> list[KeyRecord]:
        self._seen = (self._version(), record_values(records))
        return records

    def load(
        self,
        *,
        suite: Suite | str | None = None,
        tag_size: int = DEFAULT_TAG_SIZE,
        allow_retired: bool = False,
        accept_short_tags: bool = False,
    ) -> Keyring:
        """The stored keyring, material unwrapped once per key."""
        with self._mutex:
            keys = [self._key(r) for r in self._remember(self._read_checked())]
        log.debug("loaded %d keys from %s (wrapping %s)", len(keys), self, _wrapping(self.wrapper))
        return self._owned(
            Keyring(
                keys,
                suite=suite,
                tag_size=tag_size,
                allow_retired=allow_retired,
                accept_short_tags=accept_short_tags,
                key_factory=self.new_material,
            )
        )

    def _owned(self, keyring: Keyring) -> Keyring:
        """``keyring``, set to :meth:`forget` this source's unwrapped secrets when closed."""
        if self.wrapper is not None:
            keyring.on_close(self.forget)
        return keyring

    def forget(self) -> None:
        """Wipe the unwrapped metadata key and the wrapper's cache (they are unwrapped again
        when needed)."""
        with self._mutex:
            if self._meta_key is not None:
                buf = self._meta_key[1]
                buf[:] = bytes(len(buf))
                self._meta_key = None
        if self.wrapper is not None:
            self.wrapper.forget()

    def save(self, keyring: Keyring) -> None:
        """Store every key of ``keyring`` (new keys are wrapped on the way).

        Under the store's exclusive lock the stored records are read again; when another writer
        changed them since this source last read or wrote them, the two are merged (keys added
        there are kept and added to ``keyring``; see :mod:`sealstore.keysources.merge`), and a real
        conflict raises ConcurrentKeyChange with nothing written.
        """
        with self._mutex, self._exclusive():
            stored = self._read_checked()
            records = self._records(keyring)
            if (self._version(), record_values(stored)) != self._seen:  # changed by another writer
                log.info("%s changed since it was read: merging with the other writer", self)
                records = merge_records(self._seen[1] if self._seen else None, records, stored)
            self._store(records, create=False)
            self._remember(records)
        log.debug("saved %d keys to %s", len(records), self)
        self._apply(keyring, records)

    def init(
        self, *, suite: Suite | str = DEFAULT_SUITE, tag_size: int = DEFAULT_TAG_SIZE
    ) -> Keyring:
        """Create the store with a new keyring of one primary key."""
        with self._mutex, self._exclusive(create=True):
            if self.exists():
                raise KeySourceError(f"{self} already holds a keyring; refusing to overwrite it")
            keyring = self._owned(Keyring.generate(suite, tag_size, key_factory=self.new_material))
            self._store(self._remember(self._records(keyring)), create=True)
        log.info(
            "created a keyring in %s: primary key %s (%s), wrapping %s",
            self, keyring.primary.id_hex, keyring.primary.suite, _wrapping(self.wrapper),
        )  # fmt: skip
        return keyring

    def rotate(self, keyring: Keyring | None = None, *, suite: Suite | str | None = None) -> Key:
        """Make a new primary in ``keyring`` (loaded if not given) and store the result.

        Atomic against other writers: under the store's exclusive lock, ``keyring`` is first
        brought up to date with the store, then rotated, then written, so concurrent rotations
        (other servers, other processes) each add their key and none is lost.
        """
        with self._mutex, self._exclusive():
            if keyring is None:
                keyring = self.load()
            else:
                self._apply(keyring, self._remember(self._read_checked()))
            key = keyring.rotate(suite=suite)
            records = self._records(keyring)
            self._store(records, create=False)
            self._remember(records)
        log.info("rotated %s: new primary key %s (%s)", self, key.id_hex, key.suite)
        return key

    def rewrap(self, new: Wrapper) -> int:
        """Re-wrap every stored key under ``new`` (KEK rotation); returns how many were re-wrapped.

        Sealed values are untouched: the material stays the same, only its wrapping changes.
        """
        with self._mutex, self._exclusive():
            records = self._read_checked()
            old, old_meta = self.wrapper, self._meta_key
            count = 0
            for r in records:
                if r.state is KeyState.DESTROYED:
                    continue
                if old is None and r.material is not None:
                    r.wrapped = new.wrap(r.key_id, r.material, FORMAT)
                elif old is not None and r.wrapped is not None:
                    r.wrapped = old.rewrap(r.key_id, r.wrapped, new, r.wrap_format, FORMAT)
                else:  # (a live key has its material, plain, or its wrapped blob)
                    raise InternalError(f"key {r.key_id:08x} has neither material nor a blob")
                r.material, r.wrap_format = None, FORMAT
                count += 1
            self.wrapper, self._meta_key = new, None  # a new metadata key, wrapped by ``new``
            try:
                self._store(records, create=False)
            except BaseException:
                self.wrapper, self._meta_key = old, old_meta
                raise
            self._remember(records)
        self._wrapped = {
            r.key_id: (r.wrapped, r.wrap_format) for r in records if r.wrapped is not None
        }
        log.info("re-wrapped %d keys of %s under %s", count, self, _wrapping(new))
        return count

    def refresh(self, keyring: Keyring) -> None:
        """Bring a live ``keyring`` up to date with the store, in place.

        New keys are added (unwrapped once), a new primary is promoted, and retirements and
        destructions are applied, so servers sharing a store converge without restarting.
        """
        with self._mutex:
            records = self._remember(self._read_checked())
        log.debug("refreshing a keyring from %s (%d stored keys)", self, len(records))
        self._apply(keyring, records)

    def _apply(self, keyring: Keyring, stored: list[KeyRecord]) -> None:
        """Make ``keyring`` hold every key of ``stored`` in its stored state."""
        records = {r.key_id: r for r in stored}
        with keyring._lock:
            for r in records.values():
                if r.key_id not in keyring:
                    start = KeyState.ACTIVE if r.state is KeyState.PRIMARY else r.state
                    keyring.add(self._key(r, start))
            for r in records.values():
                if r.state is KeyState.PRIMARY:
                    if keyring.get(r.key_id).state is KeyState.RETIRED:
                        keyring.reactivate(r.key_id)
                    keyring.promote(r.key_id)
            for r in records.values():
                key = keyring.get(r.key_id)
                if r.state is key.state or r.state is KeyState.PRIMARY:
                    continue
                if r.state is KeyState.ACTIVE and key.state is KeyState.RETIRED:
                    keyring.reactivate(r.key_id)
                elif r.state is KeyState.RETIRED and key.state is KeyState.ACTIVE:
                    keyring.retire(r.key_id)
                elif r.state is KeyState.DESTROYED:
                    keyring.destroy(r.key_id)
