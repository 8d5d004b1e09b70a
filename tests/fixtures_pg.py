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

``mariadb_url`` (session scope) does the same for MariaDB (``mariadb-install-db`` and
``mariadbd --user=mysql`` on a temporary directory and a free port, grant tables skipped,
``mysql+pymysql://``).  MariaDB is optional: without the server or PyMySQL its tests are
skipped, in CI too (install ``mariadb-server`` and ``pymysql`` to run them);
``SEALSTORE_TEST_MARIADB_URL`` points at an existing server.

``db_url`` / ``sql_engine`` are parametrized over ``sqlite``, ``postgresql`` and ``mariadb``:
every test that uses them runs on each.  ``sql_engine`` drops every table it created when the
test ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
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
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
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


# ---- MariaDB (optional) ------------------------------------------------------------------------

MARIADB_USER = "mysql"


def find_mariadb() -> tuple[Path, Path] | None:
    """(server binary, install-db script) of a local MariaDB/MySQL, or None."""
    for server, install in (("mariadbd", "mariadb-install-db"), ("mysqld", "mysql_install_db")):
        found_server = shutil.which(server) or next(
            (p for p in (f"/usr/sbin/{server}", f"/usr/libexec/{server}") if os.path.isfile(p)),
            None,
        )
        found_install = shutil.which(install)
        if found_server and found_install:
            return Path(found_server), Path(found_install)
    return None


class MariaDBServer:
    """One temporary MariaDB server: install-db on a temporary directory, the server on a free
    127.0.0.1 port with its socket in that directory, grant tables skipped (tests only)."""

    def __init__(self, server: Path, install_db: Path) -> None:
        self.server, self.install_db = server, install_db
        self.root = Path(tempfile.mkdtemp(prefix="sealstore-mariadb-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self._user_args: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam(MARIADB_USER)
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                raise RuntimeError(
                    f"running as root and there is no {MARIADB_USER!r} user"
                ) from None
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._user_args = [f"--user={MARIADB_USER}"]

    def start(self) -> str:
        import pymysql

        proc = subprocess.run(
            [str(self.install_db), "--no-defaults", f"--datadir={self.data}", "--skip-test-db",
             "--auth-root-authentication-method=normal", *self._user_args],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"{self.install_db} failed: {proc.stdout}\n{proc.stderr}")
        self.proc = subprocess.Popen(
            [str(self.server), "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.root / 'mysqld.sock'}",
             f"--pid-file={self.root / 'mysqld.pid'}", f"--log-error={self.root / 'error.log'}",
             "--skip-grant-tables", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
             "--innodb-buffer-pool-size=64M", "--max-allowed-packet=64M", *self._user_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = 60.0
        step = 0.1
        while True:
            try:
                conn = pymysql.connect(
                    host="127.0.0.1", port=self.port, user="root", connect_timeout=2
                )
                break
            except pymysql.err.OperationalError:
                if self.proc.poll() is not None or deadline <= 0:
                    log = self.root / "error.log"
                    text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise RuntimeError(f"MariaDB did not start:\n{text}") from None
                time.sleep(step)  # waiting for a server to start; tests never time anything
                deadline -= step
        with conn:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {PG_DATABASE} CHARACTER SET utf8mb4")
        return self.url

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{PG_DATABASE}?charset=utf8mb4"

    def stop(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def mariadb_url():
    """URL of a MariaDB database for this session.  Optional: skipped (also in CI) when the
    server or PyMySQL is not installed; ``SEALSTORE_TEST_MARIADB_URL`` uses an existing one."""
    existing = os.environ.get("SEALSTORE_TEST_MARIADB_URL")
    if existing:
        yield existing
        return
    try:
        import pymysql  # noqa: F401
    except ImportError:
        pytest.skip("MariaDB tests need PyMySQL (pip install pymysql)")
    found = find_mariadb()
    if found is None:
        pytest.skip("MariaDB not installed (apt-get install mariadb-server)")
    server = MariaDBServer(*found)
    try:
        url = server.start()
    except Exception as exc:
        server.stop()
        pytest.skip(f"MariaDB could not start: {exc}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db_url(request, tmp_path):
    """A database URL, once per backend: a fresh SQLite file, the session's PostgreSQL, and the
    session's MariaDB when one is installed."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'test.db'}"
    if request.param == "mariadb":
        return request.getfixturevalue("mariadb_url")
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
