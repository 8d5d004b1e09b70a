"""Three-way merge of key records: a stale writer's save keeps every key another writer added.

A key source remembers the records it last read or wrote (``seen``).  When it saves and the
store has changed since (``theirs``), each key is merged on its (state, wrapped blob):

* a key on one side only (created by that writer) is kept;
* a key changed on one side only takes that side's record;
* a key changed on both sides to the same value is kept; to different values is a conflict;
* the result must have exactly one primary (two writers each promoting a key is a conflict).

A conflict raises :class:`~sealstore.errors.ConcurrentKeyChange` and nothing is written.
Keys are never removed from a store, so a merge can never lose one.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConcurrentKeyChange, InternalError
from ..keyring import KeyState
from .records import KeyRecord

__all__ = ["merge_records", "record_values"]


def record_values(records: list[KeyRecord]) -> dict[int, tuple[Any, ...]]:
    """What a merge compares per key: {key_id: (state, wrapped blob)}."""
    return {r.key_id: (r.state, r.wrapped) for r in records}


def _pick(
    key_id: int, seen: dict[int, tuple[Any, ...]], ours: KeyRecord | None, theirs: KeyRecord | None
) -> KeyRecord:
    if theirs is None:
        if ours is None:  # (key_id comes from one side or the other)
            raise InternalError(f"key {key_id:08x} is on neither side of the merge")
        return ours
    if ours is None:
        return theirs
    mine, other = (ours.state, ours.wrapped), (theirs.state, theirs.wrapped)
    base = seen.get(key_id, other)  # a key we never saw: our record wins
    if mine == other or other == base:
        return ours
    if mine == base:
        return theirs
    raise ConcurrentKeyChange(
        f"key {key_id:08x} was changed concurrently (here to {ours.state}, in the store to "
        f"{theirs.state}); reload the keyring and apply the change again"
    )


def merge_records(
    seen: dict[int, tuple[Any, ...]] | None, ours: list[KeyRecord], theirs: list[KeyRecord]
) -> list[KeyRecord]:
    """The records to store when ``theirs`` changed since ``seen`` (see the module doc)."""
    seen = seen or {}
    mine = {r.key_id: r for r in ours}
    other = {r.key_id: r for r in theirs}
    merged = [_pick(k, seen, mine.get(k), other.get(k)) for k in {**other, **mine}]
    primaries = [r for r in merged if r.state is KeyState.PRIMARY]
    if len(primaries) != 1:
        ids = ", ".join(f"{r.key_id:08x}" for r in primaries) or "none"
        raise ConcurrentKeyChange(
            f"concurrent rotation: merging with the store would leave {len(primaries)} primary "
            f"keys ({ids}); reload the keyring and rotate again"
        )
    return sorted(merged, key=lambda r: r.created_at)
