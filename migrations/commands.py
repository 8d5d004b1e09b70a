"""The rotation and conversion commands, as the console script finds them (an entry point of
``sealstore.commands``): rotate, reindex, status, verify (migrations.cli), encrypt-column and
decrypt-column (migrations.convert_cli), db init, keys retire and keys destroy."""

from __future__ import annotations

from .cli import add_commands, add_db_commands, add_keys_commands
from .convert_cli import add_convert_commands


def register(commands, keys) -> None:
    add_commands(commands)
    add_convert_commands(commands)
    add_db_commands(commands)
    add_keys_commands(keys)
