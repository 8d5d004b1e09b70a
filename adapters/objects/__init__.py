"""The storage-neutral object engine every object-store adapter shares, with no storage client
imported: the raw store protocol (``store``), the engine that seals into it and opens from it
(``engine``), location binding (``location``), part planning (``parts``), sizes (``sizes``),
the sealstore metadata fields (``metadata``), HTTP byte ranges (``ranges``) and an in-memory
store (``memory``).  The S3 adapter adds its client binding around them; another store's adapter
does the same (``docs/OBJECTS.md``)."""

from __future__ import annotations

from .engine import ObjectSealing, OpenedObject
from .memory import MemoryStore
from .store import ObjectStore, PartLimits, StoredObject, Written

__all__ = [
    "MemoryStore",
    "ObjectSealing",
    "ObjectStore",
    "OpenedObject",
    "PartLimits",
    "StoredObject",
    "Written",
]
