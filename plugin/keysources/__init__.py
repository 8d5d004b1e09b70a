"""Key sources: where a keyring lives between processes.

* :mod:`.base`: the :class:`KeySource` protocol (load, save with a three-way merge, wrapping);
* :mod:`.records` and :mod:`.merge`: one stored key as a source reads and writes it, and the
  merge that lets a stale writer keep every key another writer added;
* :mod:`.metadata`: the authenticated key metadata a wrapped store binds under its wrapping key;
* :mod:`.file`: :class:`KeyFile`, the local JSON key file;
* :mod:`.database`: :class:`~sealstore.keysources.database.DatabaseKeySource`, the
  ``sealstore_keys`` table (needs SQLAlchemy; imported on first use).

Applications usually get theirs from the configuration: ``sealstore.config.load_config()
.load_keyring()``.
"""

from typing import Any

from .base import KeyRecord, KeySource
from .file import KeyFile

__all__ = ["DatabaseKeySource", "KeyFile", "KeyRecord", "KeySource"]


def __getattr__(name: str) -> Any:
    if name == "DatabaseKeySource":
        from .database import DatabaseKeySource

        return DatabaseKeySource
    raise AttributeError(f"module 'sealstore.keysources' has no attribute {name!r}")
