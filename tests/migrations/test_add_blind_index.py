"""``op.add_blind_index``: a BlindIndex added to a table that has rows is filled by the revision
that adds it (online, resumable), its index created after; rows written meanwhile by writers
whose models lack the index are reported and make lookups raise IndexIncomplete until
``reindex`` fills them.  SQLite, PostgreSQL, MariaDB, through a real Alembic environment."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic_project import REWRITER_ENV_PY, alembic_project
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString, index_state
from sealstore.errors import DuplicateIndexValue, IndexIncomplete
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation import reindex as reindex_module
from sealstore.migrations.rotation import worker
from sealstore.migrations.rotation.reindex import reindex

ENV_PY = """
from alembic import context
from sqlalchemy import create_engine

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as conn:
        context.configure(connection=conn, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""

MEMBERS_REV = '''
"""members table, e-mail already encrypted"""
import sqlalchemy as sa
from alembic import op
from sealstore.adapters.sqlalchemy import EncryptedString

revision = "app_0001"
down_revision = None
branch_labels = ("app",)
depends_on = "sealstore"


def upgrade():
    op.create_table(
        "members",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("email", EncryptedString(120), nullable=True),
    )


def downgrade():
    op.drop_table("members")
'''

INDEX_REV = '''
"""blind index on members.email"""
from alembic import op
import sealstore.migrations.alembic.ops  # noqa: F401  (op.add_blind_index)
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString

revision = "app_0002"
down_revision = "app_0001"
branch_labels = None
depends_on = "sealstore_0002"  # the job tables


def upgrade():
    op.add_blind_index("members", "email_index", BlindIndex("email"),
                       source_type=EncryptedString(120), unique=True, batch_size=7)


def downgrade():
    op.drop_blind_index("members", "email_index", index_name="ix_members_email_index")
'''


class _Base(DeclarativeBase):
    pass


class Member(_Base):
    __tablename__ = "members"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[str | None] = mapped_column(EncryptedString(120))
    email_index: Mapped[bytes | None] = mapped_column(BlindIndex("email"), unique=True)


old_members = sa.Table(  # the application before the index
    "members",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("email", EncryptedString(120)),
)


@pytest.fixture
def keyrings():
    enc = use_keyring(Keyring.generate())
    idx = use_keyring(Keyring.generate(), name="index")
    index_state.forget()
    yield enc, idx
    index_state.forget()
    forget_keyring()
    forget_keyring("index")


@pytest.fixture
def project(tmp_path, sql_engine, keyrings):
    with alembic_project(tmp_path, sql_engine, ENV_PY) as (cfg, versions):
        (versions / "app_0001.py").write_text(MEMBERS_REV)
        (versions / "app_0002.py").write_text(INDEX_REV)
        yield cfg, sql_engine
        command.downgrade(cfg, "base")


def _email(i: int) -> str | None:
    return None if i % 9 == 0 else f"m{i}@example.org"


def _seed(engine, ids) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(old_members), [{"id": i, "email": _email(i)} for i in ids])


def _ids(engine, email: str) -> list[int]:
    with Session(engine) as session:
        return sorted(session.scalars(sa.select(Member.id).where(Member.email == email)))


def _nulls(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM members WHERE email IS NOT NULL AND email_index IS NULL")
        ).scalar_one()


def test_the_revision_fills_the_index_and_creates_it_unique(project):
    cfg, engine = project
    command.upgrade(cfg, "app_0001")
    _seed(engine, range(1, 51))
    command.upgrade(cfg, "app@head")
    assert _nulls(engine) == 0
    (ix,) = [i for i in sa.inspect(engine).get_indexes("members") if i["name"].endswith("index")]
    assert ix["column_names"] == ["email_index"] and ix["unique"]
    for i in range(1, 51):
        if _email(i) is not None:
            assert _ids(engine, _email(i)) == [i]
    with Session(engine) as session:  # the unique index refuses a duplicate
        session.add(Member(id=100, email="m1@example.org"))
        with pytest.raises(sa.exc.IntegrityError):
            session.commit()
    command.downgrade(cfg, "app_0001")
    assert "email_index" not in {c["name"] for c in sa.inspect(engine).get_columns("members")}


def test_an_interrupted_fill_resumes_when_the_revision_runs_again(project, monkeypatch):
    cfg, engine = project
    command.upgrade(cfg, "app_0001")
    _seed(engine, range(1, 41))
    calls = []
    process = reindex_module.ReindexTask.process

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("killed midway")
        return process(self, *args, **kwargs)

    monkeypatch.setattr(reindex_module.ReindexTask, "process", failing)
    with pytest.raises(OSError, match="killed midway"):
        command.upgrade(cfg, "app@head")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == (
            "app_0001"
        )
    assert 0 < _nulls(engine) < 36  # two batches committed
    with pytest.raises(IndexIncomplete):  # never a silent miss meanwhile
        _ids(engine, "m40@example.org")
    monkeypatch.undo()
    command.upgrade(cfg, "app@head")  # the same revision again: no DuplicateColumn, finishes
    assert _nulls(engine) == 0
    index_state.forget(engine)  # (another engine filled it: this one would ask again after 1 s)
    assert _ids(engine, "m40@example.org") == [40]


def test_rows_old_writers_add_during_the_fill_are_reported_and_refused_at_lookup(
    project, monkeypatch, capsys
):
    cfg, engine = project
    command.upgrade(cfg, "app_0001")
    _seed(engine, range(1, 31))
    step = worker._Run.step_pending
    written = []

    def with_old_writer(self):
        out = step(self)  # a batch committed (or none left)
        n = len(written)  # an application process still on the models without the index:
        with engine.begin() as other:  # its rows land behind the run's cursor
            other.execute(sa.insert(old_members), {"id": -1 - n, "email": f"late{n}@example.org"})
        written.append(-1 - n)
        return out

    monkeypatch.setattr(worker._Run, "step_pending", with_old_writer)
    command.upgrade(cfg, "app@head")
    monkeypatch.undo()
    out = capsys.readouterr().out
    assert (
        "rows have no index value yet" in out
        and "sealstore reindex --models <your models> --table members" in out
    )
    assert _nulls(engine) > 0
    with pytest.raises(IndexIncomplete):
        _ids(engine, "m1@example.org")
    reindex(engine, Member)
    assert _nulls(engine) == 0
    for n, pk in enumerate(written):
        assert _ids(engine, f"late{n}@example.org") == [pk]
    assert _ids(engine, "m1@example.org") == [1]


def test_a_rotation_after_the_fill_keeps_the_unique_index_unique(project, keyrings):
    cfg, engine = project
    command.upgrade(cfg, "app_0001")
    _seed(engine, range(1, 11))
    command.upgrade(cfg, "app@head")
    keyrings[1].rotate()
    with Session(engine) as session:
        session.add(Member(id=100, email="m1@example.org"))
        with pytest.raises(DuplicateIndexValue):
            session.commit()


def test_autogenerate_writes_add_blind_index_for_a_new_index_on_an_existing_table(
    tmp_path, sql_engine, keyrings
):
    from pathlib import Path

    from sealstore.migrations import schema

    engine = sql_engine
    with alembic_project(tmp_path, engine, REWRITER_ENV_PY, {"app_0001.py": MEMBERS_REV}) as (
        cfg,
        _,
    ):
        command.upgrade(cfg, "heads")
        _seed(engine, range(1, 31))
        target = sa.MetaData()
        sa.Table(  # the model: a named UNIQUE index (an unnamed constraint cannot be dropped)
            "members", target,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("email", EncryptedString(120)),
            sa.Column("email_index", BlindIndex("email"), index=True, unique=True),
        )  # fmt: skip
        for t in schema.metadata.tables.values():
            t.to_metadata(target)
        cfg.attributes["target_metadata"] = target
        script = command.revision(
            cfg, "index email", autogenerate=True, head="app@head", rev_id="app_0002"
        )
        text = Path(script.path).read_text()
        upgrade = text.split("def upgrade")[1].split("def downgrade")[0]
        assert (
            "op.add_blind_index('members', 'email_index', "
            "sealstore.adapters.sqlalchemy.BlindIndex('email'), "
            "source_type=sealstore.adapters.sqlalchemy.EncryptedString(120), index=False)"
        ) in upgrade
        assert "add_column" not in upgrade
        assert upgrade.index("add_blind_index") < upgrade.index(
            "op.create_index(op.f('ix_members_email_index'), 'members', ['email_index'], unique=True)"
        )
        assert "import sealstore.migrations.alembic.ops" in text
        command.upgrade(cfg, "app@head")  # the generated file runs: filled, then indexed
        assert _nulls(engine) == 0
        assert _ids(engine, "m1@example.org") == [1]
        command.downgrade(cfg, "app_0001")
        assert "email_index" not in {c["name"] for c in sa.inspect(engine).get_columns("members")}
        command.downgrade(cfg, "base")


PEOPLE_REV = '''
"""people table, e-mail in plaintext"""
import sqlalchemy as sa
from alembic import op

revision = "app_0001"
down_revision = None
branch_labels = ("app",)
depends_on = "sealstore"


def upgrade():
    op.create_table(
        "people",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("email", sa.String(120), nullable=True),
    )


def downgrade():
    op.drop_table("people")
'''


def test_autogenerate_fills_a_new_index_after_its_source_is_encrypted(
    tmp_path, sql_engine, keyrings
):
    """The adoption revision: email String -> EncryptedString and a new UNIQUE BlindIndex on
    it.  The index is added and filled in the revision after the conversion (its source must be
    sealed first), its index created after the fill; the generated files run and go back."""
    from pathlib import Path

    from sealstore.migrations import schema

    engine = sql_engine
    with alembic_project(tmp_path, engine, REWRITER_ENV_PY, {"app_0001.py": PEOPLE_REV}) as (
        cfg,
        versions,
    ):
        command.upgrade(cfg, "heads")
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO people (id, email) VALUES (:id, :email)"),
                [{"id": i, "email": _email(i)} for i in range(1, 31)],
            )
        target = sa.MetaData()
        people = sa.Table(
            "people", target,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("email", EncryptedString(120)),
            sa.Column("email_index", BlindIndex("email"), index=True, unique=True),
        )  # fmt: skip
        for t in schema.metadata.tables.values():
            t.to_metadata(target)
        cfg.attributes["target_metadata"] = target
        command.revision(cfg, "adopt", autogenerate=True, head="app@head", rev_id="app_0002")
        texts = {p.name: p.read_text() for p in Path(versions).glob("app_0002*.py")}
        (convert,) = [t for t in texts.values() if "op.encrypt_column(" in t]
        (fill,) = [t for t in texts.values() if "op.add_blind_index(" in t]
        assert "add_blind_index" not in convert and "encrypt_column(" not in fill
        assert fill.index("op.add_blind_index(") < fill.index("op.create_index(")
        command.upgrade(cfg, "app@head")
        with engine.connect() as conn:
            nulls = conn.execute(
                sa.text(
                    "SELECT count(*) FROM people WHERE email IS NOT NULL AND email_index IS NULL"
                )
            ).scalar_one()
        assert nulls == 0
        with engine.connect() as conn:
            for i in (1, 2, 30):
                stmt = sa.select(people.c.id).where(people.c.email == _email(i))
                assert conn.execute(stmt).scalars().all() == [i]
        command.downgrade(cfg, "app_0001")
        with engine.connect() as conn:
            back = dict(conn.execute(sa.text("SELECT id, email FROM people")).all())
        assert back == {i: _email(i) for i in range(1, 31)}
        command.downgrade(cfg, "base")
