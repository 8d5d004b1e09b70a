"""One stored key as a key source reads and writes it (no Key object, no derived state)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ..format import Suite
from ..holdskey import HoldsKey
from ..keyring import KeyState

__all__ = ["KeyRecord"]


def _utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


@dataclass
class KeyRecord(HoldsKey):
    """One stored key: exactly one of ``material`` (plain) or ``wrapped`` unless destroyed."""

    key_id: int
    suite: Suite
    state: KeyState
    created_at: datetime
    rotated_at: datetime | None
    material: bytes | None = None
    wrapped: bytes | None = None
    wrap_format: int = (
        1  # the store format ``wrapped`` was wrapped for (sealstore.keysources.metadata)
    )

    def __post_init__(self) -> None:  # stores may hand back naive datetimes (SQLite): UTC
        self.created_at = _utc(self.created_at) or self.created_at
        self.rotated_at = _utc(self.rotated_at)

    def __repr__(self) -> str:
        return (
            f"KeyRecord(key_id={self.key_id:08x}, suite={self.suite}, state={self.state}, "
            f"created_at={self.created_at.isoformat()})"
        )
