"""The rotation and conversion commands, as the console script finds them (an entry point of
``sealstore.commands``): rotate, reindex, status, verify (migrations.rotation.cli), encrypt-column and
decrypt-column (migrations.alembic.cli), db init, keys retire and keys destroy."""

from __future__ import annotations

from .rotation.cli import add_commands, add_db_commands, add_keys_commands
from .alembic.cli import add_convert_commands


def register(commands, keys) -> None:
    add_commands(commands)
    add_convert_commands(commands)
    add_db_commands(commands)
    add_keys_commands(keys)
