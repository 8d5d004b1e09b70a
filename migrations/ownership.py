"""Moved to :mod:`sealstore.migrations.alembic.ownership`; this name stays for the Alembic revision
scripts and ``env.py`` files written against sealstore 0.1, which keep working unchanged."""

import warnings

from .alembic.ownership import *  # noqa: F403
from .alembic.ownership import __all__  # noqa: F401

warnings.warn(
    "sealstore.migrations.ownership moved to sealstore.migrations.alembic.ownership",
    DeprecationWarning,
    stacklevel=2,
)
