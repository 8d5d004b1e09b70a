"""Moved to :mod:`sealstore.migrations.alembic.ops`; this name stays for the Alembic revision
scripts and ``env.py`` files written against sealstore 0.1, which keep working unchanged."""

import warnings

from .alembic.ops import *  # noqa: F403
from .alembic.ops import __all__  # noqa: F401

warnings.warn(
    "sealstore.migrations.ops moved to sealstore.migrations.alembic.ops",
    DeprecationWarning,
    stacklevel=2,
)
