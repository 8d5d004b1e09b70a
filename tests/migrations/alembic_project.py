"""An application's Alembic project for the tests, in this process: its own ``env.py`` and
revisions, with sealstore's revisions in ``version_locations`` by package resource."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import alembic
from alembic.config import Config


#: an ``env.py`` with sealstore's rewriter, the target metadata from
#: ``config.attributes["target_metadata"]``, a transaction per migration
REWRITER_ENV_PY = """
from alembic import context
from sqlalchemy import create_engine
from sealstore.migrations.alembic.ops import rewriter

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as conn:
        context.configure(
            connection=conn,
            target_metadata=config.attributes.get("target_metadata"),
            process_revision_directives=rewriter,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""

#: an ``env.py`` whose autogenerate hooks ``config.attributes["hooks"]`` chooses: ``"options"``
#: (``alembic_options()``, the default), ``"rewriter"`` (the rewriter alone) or ``"none"``; the
#: target metadata from ``config.attributes["target"]``, a transaction per migration
HOOKS_ENV_PY = """
from alembic import context
from sqlalchemy import create_engine
from sealstore.migrations.alembic.autogen import alembic_options
from sealstore.migrations.alembic.ops import rewriter

config = context.config
hooks = config.attributes.get("hooks", "options")
extra = {"options": alembic_options(), "rewriter": {"process_revision_directives": rewriter},
         "none": {}}[hooks]
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=config.attributes.get("target"),
                          transaction_per_migration=True, **extra)
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""


@contextmanager
def alembic_project(tmp_path: Path, engine, env_py: str, revisions: dict[str, str] | None = None):
    """(Config, versions directory) of a project in ``tmp_path / "alembic"`` on ``engine``'s
    database: ``env_py`` as its ``env.py``, Alembic's generic script template, and
    ``revisions`` (file name -> text) in its versions directory.  Drops ``alembic_version``
    afterwards."""
    root = tmp_path / "alembic"
    versions = root / "versions"
    versions.mkdir(parents=True)
    (root / "env.py").write_text(env_py)
    template = Path(alembic.__file__).parent / "templates/generic/script.py.mako"
    (root / "script.py.mako").write_text(template.read_text())
    for name, text in (revisions or {}).items():
        (versions / name).write_text(text)
    cfg = Config()
    cfg.set_main_option("script_location", str(root))
    cfg.set_main_option("path_separator", "space")
    cfg.set_main_option("version_locations", f"{versions} sealstore.migrations:versions")
    url = engine.url.render_as_string(hide_password=False)
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    try:
        yield cfg, versions
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")


_ENCRYPT_USERS_SSN = '''
"""encrypt users.ssn"""
import sqlalchemy as sa
from alembic import op
import sealstore.migrations.alembic.ops  # noqa: F401
from sealstore.adapters.sqlalchemy import EncryptedString

revision = "app_0002"
down_revision = "app_0001"
branch_labels = None
depends_on = None


def upgrade():
    op.encrypt_column("users", "ssn", EncryptedString(11){up})


def downgrade():
    op.decrypt_column("users", "ssn", EncryptedString(11), plain_type=sa.String(11){down})
'''


def encrypt_users_ssn(up: str = "", down: str = "") -> str:
    """The text of revision ``app_0002`` (after ``app_0001``): ``op.encrypt_column`` of
    ``users.ssn`` (VARCHAR(11)) up, ``op.decrypt_column`` down; ``up`` and ``down`` are more
    keyword arguments of each, as source text (``", batch_size=7"``)."""
    return _ENCRYPT_USERS_SSN.format(up=up, down=down)
