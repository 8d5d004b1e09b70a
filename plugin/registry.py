"""Moved to :mod:`sealstore.keysources.database` (``DatabaseKeySource``, the ``sealstore_keys``
table); this name stays for code written against sealstore 0.1."""

import warnings

from .keysources.database import *  # noqa: F403
from .keysources.database import __all__  # noqa: F401

warnings.warn(
    "sealstore.registry moved to sealstore.keysources.database", DeprecationWarning, stacklevel=2
)
