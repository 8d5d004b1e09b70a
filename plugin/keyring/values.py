"""The value path of a keyring: seal and open one value or many, re-seal, and find the key a
sealed value names (a mixin of :class:`~sealstore.keyring.Keyring`, which holds the snapshots
it reads without locking)."""

from __future__ import annotations

from collections.abc import Sequence

from typing import TYPE_CHECKING, Any

from ..errors import (
    InvalidTag,
    KeyNotUsable,
    MalformedCiphertext,
    UnknownKeyId,
)
from ..format import (
    _DIGESTS,
    HEADER_SIZE,
    context_digest,
    parse_header,
)
from .keys import KeyState, _Slot, _with_index

if TYPE_CHECKING:
    import threading

    from cryptography.utils import Buffer

    from ..format import Suite
    from .keys import Key, _ClosedSlot


class ValuePath:
    """seal/open/seal_many/open_many/reseal (see :class:`~sealstore.keyring.Keyring`)."""

    if TYPE_CHECKING:  # what the keyring holds (sealstore.keyring.ring)
        _seal: _Slot | _ClosedSlot
        _seal_small: _Slot | _ClosedSlot
        _threshold: int
        _slots: dict[bytes, _Slot]
        _keys: dict[int, Key]
        _allow_retired: bool
        _lock: threading.RLock

        def _check_open(self) -> None: ...
        def check_tag_size(self, suite: Suite, tag_size: int, key_id: int) -> None: ...
        def _slot(self, key: Key, suite: Suite, tag_size: int) -> _Slot: ...

    def seal(self, plaintext: Buffer, context: bytes = b"") -> bytes:
        """Seal ``plaintext`` under the primary key, bound to ``context``."""
        slot = self._seal if len(plaintext) >= self._threshold else self._seal_small
        try:
            ad = _DIGESTS[context]
        except (KeyError, TypeError):
            ad = context_digest(context)
        return slot.seal(slot.prefix, plaintext, ad)

    def open(self, sealed: bytes, context: bytes = b"", *, allow_retired: bool = False) -> bytes:
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

    def seal_many(self, plaintexts: Sequence[Buffer], context: bytes = b"") -> list[bytes]:
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
        out: list[Any] = [None] * len(plaintexts)
        for slot, idx in (
            (small, [i for i, n in enumerate(lengths) if n < threshold]),
            (large, [i for i, n in enumerate(lengths) if n >= threshold]),
        ):
            try:
                sealed = slot.seal_many(slot.prefix, [plaintexts[i] for i in idx], ad)
            except Exception as exc:
                index = getattr(exc, "index", None)
                if isinstance(index, int):
                    setattr(exc, "index", idx[index])  # a position in the caller's list
                raise
            for i, v in zip(idx, sealed):
                out[i] = v
        return out

    def open_many(
        self, sealed: Sequence[bytes], context: bytes = b"", *, allow_retired: bool = False
    ) -> list[bytes]:
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

    def _open_groups(self, values: Sequence[bytes], ad: bytes, allow_retired: bool) -> list[bytes]:
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
        out: list[Any] = [None] * len(values)
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

    def reseal(self, sealed: bytes, context: bytes = b"", *, allow_retired: bool = False) -> bytes:
        """Open with whichever key sealed ``sealed`` and seal again under the primary.

        A value already under the primary (same key and tag size, a suite the primary seals
        with) is returned as it is, without being opened.
        """
        if not self.needs_reseal(sealed):
            return sealed
        return self.seal(self.open(sealed, context, allow_retired=allow_retired), context)

    def reseal_many(
        self, sealed: Sequence[bytes], context: bytes = b"", *, allow_retired: bool = False
    ) -> list[bytes]:
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
            index = getattr(exc, "index", None)
            if isinstance(index, int):  # the position in ``sealed``, not in the stale subset
                setattr(exc, "index", stale[index])
            raise
        out = list(values)
        for i, v in zip(stale, self.seal_many(opened, context)):
            out[i] = v
        return out

    def needs_reseal(self, sealed: bytes) -> bool:
        """True when ``sealed`` is not under the primary key (and its suites and tag size)."""
        head = sealed[:HEADER_SIZE]
        return head != self._seal.prefix and head != self._seal_small.prefix

    def _resolve(self, sealed: bytes, allow_retired: bool) -> _Slot:
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
