"""Names of the temporary columns a conversion adds (no Alembic import: the rotation tools read
them too, and ``ops`` imports the rotation engine)."""

from __future__ import annotations

__all__ = ["shadow_name"]

_PREFIX = "_ss_"
_MAX_NAME = 63  # PostgreSQL's identifier limit, the smallest of the common databases


def shadow_name(column: str) -> str:
    """The temporary column a conversion fills: ``_ss_<column>`` (cut to 63 characters)."""
    return (_PREFIX + column)[:_MAX_NAME]
