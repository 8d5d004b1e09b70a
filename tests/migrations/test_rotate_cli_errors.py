"""The rotation CLI answers bad input with one ``sealstore: error: ...`` line, never a
traceback: exit 2 for usage errors, 1 for runtime failures (unreachable or missing database,
missing driver, missing tables)."""

from __future__ import annotations

import importlib.util
import sys
import uuid

import pytest
from cli_runner import key_file_project
from sealstore.cli import main

MODELS = """
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString

metadata = sa.MetaData()
people = sa.Table("err_people", metadata, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("email", EncryptedString(100)))
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    key_file_project(tmp_path, monkeypatch)
    tag = uuid.uuid4().hex[:8]
    names = {"ok": f"m_ok_{tag}", "nameerror": f"m_name_{tag}", "syntax": f"m_syn_{tag}"}
    (tmp_path / f"{names['ok']}.py").write_text(MODELS)
    (tmp_path / f"{names['nameerror']}.py").write_text("import sqlalchemy\nx = undefined_name\n")
    (tmp_path / f"{names['syntax']}.py").write_text("def broken(:\n")
    (tmp_path / "app.db").touch()
    yield tmp_path, names
    for n in names.values():
        sys.modules.pop(n, None)


def run(capsys, *argv) -> tuple[int, str]:
    code = main(["--config", "c.json", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sealstore: error: "), err
    return code, lines[0]


SQLITE = "sqlite:///app.db"


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["--db", "not a url", "--column", "t.c"], 2, "not a database URL"),
        (["--db", "nosuchdialect://h/db", "--column", "t.c"], 2, "unknown database dialect"),
        (["--db", "postgresql+psycopg://u@127.0.0.1:1/db", "--column", "t.c"], 1,
         "cannot connect to postgresql+psycopg://u@127.0.0.1:1/db"),
        (["--db", "sqlite:///missing.db", "--column", "t.c"], 1, "no SQLite database at missing.db"),
        (["--db", SQLITE, "--models", "{ok}"], 1, "the database has no table err_people"),
        (["--db", SQLITE, "--column", "nope.c"], 1, "nope"),
        (["--db", SQLITE, "--models", "{nameerror}"], 2, "raised NameError: name 'undefined_name'"),
        (["--db", SQLITE, "--models", "{syntax}"], 2, "has a syntax error"),
        (["--db", SQLITE, "--models", "{ok}", "--batch-size", "0"], 2, "--batch-size must be at least 1"),
        (["--db", SQLITE, "--models", "{ok}", "--retry-budget", "-1"], 2, "--retry-budget"),
        (["--db", SQLITE, "--models", "m_absent_module"], 2, "cannot import m_absent_module"),
    ],
    ids=["bad url", "unknown dialect", "refused", "missing sqlite file", "missing tables",
         "missing column table", "models NameError", "models SyntaxError", "batch size 0",
         "negative retry budget", "models ImportError"],
)  # fmt: skip
def test_bad_input_is_one_error_line(project, capsys, argv, code, says):
    _, names = project
    argv = [a.format(**names) for a in argv]
    got, line = run(capsys, "rotate", *argv)
    assert got == code and says in line


def test_the_password_of_an_unreachable_database_is_not_printed(project, capsys):
    _, line = run(capsys, "status", "--db", "postgresql+psycopg://u:hunter2@127.0.0.1:1/db",
                  "--column", "t.c")  # fmt: skip
    assert "hunter2" not in line and "***" in line


def test_a_password_in_the_query_of_an_unreachable_database_is_not_printed(project, capsys):
    # SQLAlchemy's hide_password masks the user-info password only
    _, line = run(capsys, "status", "--db", "postgresql+psycopg://u@127.0.0.1:1/db?password=hunter2",
                  "--column", "t.c")  # fmt: skip
    assert "hunter2" not in line and "password=***" in line


def test_missing_driver(project, capsys):
    if importlib.util.find_spec("MySQLdb") is not None:
        pytest.skip("mysqlclient is installed")
    code, line = run(capsys, "rotate", "--db", "mysql+mysqldb://u@localhost/db", "--column", "t.c")
    assert code == 1 and "the driver for 'mysql+mysqldb' is not installed" in line


def test_missing_postgresql_database(project, capsys, pg_url):
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(database="no_such_database_here")
    code, line = run(capsys, "verify", "--db", url.render_as_string(hide_password=False),
                     "--column", "t.c")  # fmt: skip
    assert code == 1 and "no_such_database_here" in line and "does not exist" in line


def test_unknown_table_filter_names_the_tables(project, capsys, tmp_path):
    import sqlalchemy as sa

    _, names = project
    engine = sa.create_engine(SQLITE)
    sa.Table("err_people", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
             sa.Column("email", sa.LargeBinary)).create(engine)  # fmt: skip
    engine.dispose()
    code, line = run(capsys, "rotate", "--db", SQLITE, "--models", names["ok"], "--table", "nope")
    assert code == 2 and "--table nope" in line and "err_people" in line
    assert "keyring" not in line
