"""The module paths of sealstore 0.1 that users' Alembic files name keep working after the
split of ``sealstore.migrations`` into ``alembic/`` and ``rotation/``: same objects, and a
DeprecationWarning that names the new path."""

import importlib
import subprocess
import sys

import pytest

MOVED = {
    "sealstore.migrations.ops": "sealstore.migrations.alembic.ops",
    "sealstore.migrations.autogen": "sealstore.migrations.alembic.autogen",
    "sealstore.migrations.ownership": "sealstore.migrations.alembic.ownership",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_gives_the_same_objects_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        alias = importlib.import_module(old)
    assert alias.__all__ == new.__all__
    for name in new.__all__:
        assert getattr(alias, name) is getattr(new, name)


def test_operations_register_through_the_old_path():
    """A revision script written against 0.1 does ``import sealstore.migrations.ops``; that
    alone, in a fresh interpreter, must give Alembic its ``op.encrypt_column`` /
    ``op.decrypt_column``."""
    code = (
        "from alembic.operations import Operations\n"
        "assert not hasattr(Operations, 'encrypt_column')\n"
        "import sealstore.migrations.ops\n"
        "assert hasattr(Operations, 'encrypt_column') and hasattr(Operations, 'decrypt_column')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_api_is_unchanged():
    import sealstore.migrations as m

    for name in m.__all__:
        assert getattr(m, name) is not None
    assert m.VERSION_LOCATION == "sealstore.migrations:versions"
    assert (m.VERSIONS / "0001_sealstore_keys.py").is_file()
