"""Core module paths of sealstore 0.1 that stay as deprecated aliases after the re-layout: the same
objects, and a DeprecationWarning naming the new path (the migrations' aliases:
tests/migrations/test_migrations_aliases.py)."""

import importlib
import sys

import pytest

MOVED = {"sealstore.registry": "sealstore.keysources.database"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_gives_the_same_objects_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        alias = importlib.import_module(old)
    assert alias.__all__ == new.__all__
    for name in new.__all__:
        assert getattr(alias, name) is getattr(new, name)


def test_the_packages_export_their_classes():
    from sealstore import keysources, wrapping
    from sealstore.keysources.database import DatabaseKeySource
    from sealstore.keysources.file import KeyFile
    from sealstore.wrapping.master import MasterKeyWrapper

    assert keysources.KeyFile is KeyFile and keysources.DatabaseKeySource is DatabaseKeySource
    assert wrapping.MasterKeyWrapper is MasterKeyWrapper
    with pytest.raises(AttributeError):
        keysources.NoSuchSource  # noqa: B018
