"""The optional parts of sealstore and the extras that install them.

``pip install sealstore`` is the core: the cipher API, the sealed-value and object formats, the
keyring, key files and master-key wrapping.  Each other part needs an extra (pyproject.toml's
``[project.optional-dependencies]``) and checks for it before importing anything from it, so
a missing one is a :class:`~sealstore.errors.MissingExtra` (an ImportError) naming the
``pip install`` command, never a bare ``No module named ...``.
"""

from __future__ import annotations

import importlib.util

from .errors import MissingExtra

__all__ = ["EXTRAS", "missing", "require"]

#: extra -> the top-level modules it installs that sealstore imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "sqlalchemy": ("sqlalchemy", "alembic", "rich"),
    "s3": ("boto3", "botocore"),
    "kms": ("boto3", "botocore"),
    "gcs": ("google.cloud.storage", "google.api_core"),
    "bench": ("rich", "sqlalchemy", "alembic", "boto3", "moto", "sqlalchemy_utils", "matplotlib"),
}


def missing(extra: str, modules: tuple[str, ...] | None = None) -> list[str]:
    """The modules of ``extra`` (or only ``modules`` of it) that cannot be found; nothing is
    imported."""
    wanted = EXTRAS[extra] if modules is None else modules
    unknown = set(wanted) - set(EXTRAS[extra])
    if unknown:
        raise ValueError(f"the {extra!r} extra does not install {sorted(unknown)}")
    return [m for m in wanted if not _found(m)]


def _found(module: str) -> bool:
    """Whether ``module`` can be imported.  ``find_spec`` of a dotted name imports its parent
    packages, and raises ModuleNotFoundError when one is missing (``google.cloud.storage``
    without ``google``): that is the module missing too."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` if a module of ``extra`` (or of ``modules``, some of its
    modules) is not installed; ``what`` names the part that needs it
    (``"sealstore.adapters.s3"``)."""
    absent = missing(extra, modules)
    if absent:
        raise MissingExtra(what, extra, absent)
