"""Moved to :mod:`sealstore.migrations.alembic.autogen`; this name stays for the Alembic revision
scripts and ``env.py`` files written against sealstore 0.1, which keep working unchanged."""

import warnings

from .alembic.autogen import *  # noqa: F403
from .alembic.autogen import __all__  # noqa: F401

warnings.warn(
    "sealstore.migrations.autogen moved to sealstore.migrations.alembic.autogen",
    DeprecationWarning,
    stacklevel=2,
)
