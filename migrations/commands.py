"""The rotation and conversion commands, as the console script finds them (an entry point of
``sealstore.commands``): rotate, reindex, status, verify (migrations.rotation.cli), encrypt-column and
decrypt-column (migrations.alembic.cli), medium-check (migrations.medium_cli), db init, keys retire and keys destroy."""

from __future__ import annotations

from .rotation.cli import add_commands, add_db_commands, add_keys_commands
from .rotation.cli_setup import Subcommands
from .alembic.cli import add_convert_commands
from .medium_cli import add_medium_commands


def register(commands: Subcommands, keys: Subcommands) -> None:
    """Add the migrations' commands to ``sealstore``'s sub-commands and to ``sealstore keys``."""
    add_commands(commands)
    add_convert_commands(commands)
    add_medium_commands(commands)
    add_db_commands(commands)
    add_keys_commands(keys)
