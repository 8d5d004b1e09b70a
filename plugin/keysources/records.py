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

    def __post_init__(self) -> None:
        """Check the types a store handed back (ValueError naming the field, which the key
        sources turn into their documented errors); naive datetimes (SQLite) are UTC."""
        k: object = self.key_id  # (stores hand back whatever a column holds)
        if type(k) is not int or not 0 <= k <= 0xFFFFFFFF:
            raise ValueError("key_id: must be an integer in 0..0xffffffff")
        suite: object = self.suite
        if not isinstance(suite, Suite):
            if not isinstance(suite, (str, int)) or isinstance(suite, bool):
                raise ValueError(f"suite: must be a suite name, not {type(suite).__name__}")
            self.suite = Suite.parse(suite)  # ValueError naming the unknown suite
        state: object = self.state
        if not isinstance(state, KeyState):
            if not isinstance(state, str):
                raise ValueError(f"state: must be a key state, not {type(state).__name__}")
            self.state = KeyState(state)
        for name in ("created_at", "rotated_at"):
            value = getattr(self, name)
            if value is None and name == "rotated_at":
                continue
            if not isinstance(value, datetime):
                raise ValueError(f"{name}: must be a date and time, not {type(value).__name__}")
            try:
                setattr(self, name, _utc(value))
            except (OverflowError, ValueError):
                raise ValueError(f"{name}: out of range in UTC") from None
        for name in ("material", "wrapped"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bytes):
                raise ValueError(f"{name}: must be bytes, not {type(value).__name__}")

    def __repr__(self) -> str:
        return (
            f"KeyRecord(key_id={self.key_id:08x}, suite={self.suite}, state={self.state}, "
            f"created_at={self.created_at.isoformat()})"
        )
