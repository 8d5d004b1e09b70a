"""sealstore.migrations: sealstore's tables as Alembic revisions, Alembic operations for users'
columns, and online key rotation with status, verify, re-index and safe retirement.

Alembic: add ``sealstore.migrations:versions`` to ``version_locations`` (branch label
``sealstore``); ``import sealstore.migrations.alembic.ops`` gives ``op.encrypt_column`` /
``op.decrypt_column``, and :data:`rewriter` makes autogenerate use them.

Python API (each also a ``sealstore`` CLI command)::

    from sealstore.migrations import rotate, status, verify, reindex, create_tables

    rotate(engine, Base)             # every encrypted column of the models, one job each
    status(engine, *specs_from_metadata(Base)).columns   # rows per key id, SQL only
    verify(engine, Base)             # open everything, failures by primary key
    reindex(engine, Base)            # blind indexes under the index keyring's primary
    find_references(engine, specs, key_id)   # what still names a key (before retiring it)

See docs/ROTATION.md.  Names are imported lazily: ``import sealstore.migrations`` stays cheap.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names imported on first use (_LAZY below), as type checkers see them
    from .alembic.ops import rewriter
    from .rotation.progress import make_progress
    from .rotation.reindex import reindex
    from .rotation.reseal import rotate
    from .rotation.retire import (
        find_references,
        register_object_prefix,
        register_s3_prefix,
        unregister_object_prefix,
        unregister_s3_prefix,
    )
    from .rotation.spec import ColumnSpec, IndexSpec, specs_from_metadata
    from .rotation.status import status
    from .rotation.verify import verify
    from .rotation.worker import WorkerResult
    from .schema import create_tables, drop_tables

from sealstore.extras import require

require("sqlalchemy", "sealstore.migrations")  # every submodule needs SQLAlchemy and Alembic

__all__ = [
    "VERSIONS",
    "VERSION_LOCATION",
    "ColumnSpec",
    "IndexSpec",
    "WorkerResult",
    "create_tables",
    "drop_tables",
    "find_references",
    "make_progress",
    "register_object_prefix",
    "register_s3_prefix",
    "reindex",
    "rewriter",
    "rotate",
    "specs_from_metadata",
    "status",
    "unregister_object_prefix",
    "unregister_s3_prefix",
    "verify",
]

#: Directory of sealstore's Alembic revision scripts.
VERSIONS = Path(__file__).resolve().parent / "versions"
#: The ``version_locations`` entry for ``alembic.ini`` (a package resource, works installed).
VERSION_LOCATION = "sealstore.migrations:versions"

_LAZY = {
    "ColumnSpec": "rotation.spec",
    "IndexSpec": "rotation.spec",
    "specs_from_metadata": "rotation.spec",
    "WorkerResult": "rotation.worker",
    "create_tables": "schema",
    "drop_tables": "schema",
    "find_references": "rotation.retire",
    "register_object_prefix": "rotation.retire",
    "register_s3_prefix": "rotation.retire",
    "unregister_object_prefix": "rotation.retire",
    "unregister_s3_prefix": "rotation.retire",
    "make_progress": "rotation.progress",
    "reindex": "rotation.reindex",
    "rewriter": "alembic.ops",
    "rotate": "rotation.reseal",
    "status": "rotation.status",
    "verify": "rotation.verify",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sealstore.migrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
