"""Database fixtures: a throwaway PostgreSQL server, and engines on SQLite and PostgreSQL.

``pg_url`` (session scope) runs ``initdb`` and ``pg_ctl`` from the PostgreSQL binaries on this
machine (``pg_config --bindir``, else ``/usr/lib/postgresql/*/bin``) on a temporary directory
and a free port, with trust authentication on 127.0.0.1 and the unix socket inside that
directory, creates a database and yields its SQLAlchemy URL (``postgresql+psycopg://``).  The
server is stopped and its directory removed at the end of the session.  PostgreSQL refuses to
run as root, so as root the server runs as the ``postgres`` user (``runuser``).

``SEALSTORE_TEST_PG_URL`` points the tests at an existing server instead.  Without binaries
(or psycopg) the PostgreSQL tests are skipped, except in CI (``CI=true``), where that is a
failure: CI must exercise the real database.

``db_url`` / ``sql_engine`` are parametrized over ``sqlite`` and ``postgresql``: every test
that uses them runs on both.  ``sql_engine`` drops every table it created when the test ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

PG_USER = "postgres"
PG_DATABASE = "sealstore_test"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _unavailable(reason: str):
    if _in_ci():
        pytest.fail(f"PostgreSQL is required in CI (CI=true): {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available: {reason}")


def find_pg_bindir() -> Path | None:
    """The directory holding initdb/pg_ctl, or None."""
    candidates = []
    try:
        out = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True
        )
        candidates.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += sorted(glob.glob("/usr/pgsql-*/bin"), reverse=True)
    for cand in candidates:
        path = Path(cand)
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One temporary PostgreSQL cluster (see the module docstring)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="sealstore-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._as = []
        self._owner = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam(PG_USER)
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                raise RuntimeError(f"running as root and there is no {PG_USER!r} user") from None
            self._as = ["runuser", "-u", PG_USER, "--"]
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        self.started = False

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = self._as + [str(self.bindir / args[0]), *args[1:]]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n{log}"
            )
        return proc

    def start(self) -> str:
        self._run(
            "initdb", "-D", str(self.data), "-U", PG_USER, "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        self.started = True
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", PG_USER, PG_DATABASE)
        return self.url

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def stop(self) -> None:
        try:
            if self.started:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url():
    """URL of a PostgreSQL database for this test session (see the module docstring)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'psycopg[binary]')")
    existing = os.environ.get("SEALSTORE_TEST_PG_URL")
    if existing:
        yield existing
        return
    bindir = find_pg_bindir()
    if bindir is None:
        _unavailable("no initdb/pg_ctl found (pg_config --bindir, /usr/lib/postgresql/*/bin)")
    server = PostgresServer(bindir)
    try:
        url = server.start()
    except Exception as exc:
        server.stop()
        _unavailable(f"could not start a temporary server: {exc}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A database URL, once per backend: a fresh SQLite file, then the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'test.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def sql_engine(db_url):
    """An Engine on ``db_url``; tables created during the test are dropped afterwards."""
    from sqlalchemy import MetaData, create_engine, inspect

    engine = create_engine(db_url)
    with engine.connect() as conn:
        before = set(inspect(conn).get_table_names())
    try:
        yield engine
    finally:
        with engine.begin() as conn:
            created = set(inspect(conn).get_table_names()) - before
            if created:
                meta = MetaData()
                meta.reflect(conn, only=sorted(created))
                meta.drop_all(conn)
        engine.dispose()

