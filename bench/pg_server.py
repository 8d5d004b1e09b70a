"""A throwaway PostgreSQL server for the rotation benches, started as the test fixture starts
one (``tests/fixtures_pg.py``, from the PostgreSQL binaries on this machine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def start_postgres() -> tuple[Any, str | None]:
    """(server, its SQLAlchemy URL), or (None, None) without the repository's tests or the
    PostgreSQL binaries.  ``server.stop()`` removes it."""
    root = Path(__file__).resolve().parents[1] / "tests"
    if not (root / "fixtures_pg.py").exists():
        return None, None
    sys.path.insert(0, str(root))
    try:
        from fixtures_pg import PostgresServer, find_pg_bindir  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    bindir = find_pg_bindir()
    if bindir is None:
        return None, None
    server = PostgresServer(bindir)
    return server, server.start()
