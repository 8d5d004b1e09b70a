"""Transient database errors during rotation (sealstore.migrations.transient): every driver's
deadlock, serialization failure and lost connection is retried, in every phase of a worker,
within a time budget; anything else comes out at once as DatabaseOperationFailed, without the
statement's parameters; a real PostgreSQL deadlock with the worker in the cycle is survived."""

from __future__ import annotations

import threading
import time

import asyncpg.exceptions
import psycopg
import psycopg.errors
import psycopg2.errors
import pymysql.err
import pytest
import sqlalchemy as sa
from sealstore.adapters.sqlalchemy import EncryptedString
from sealstore.errors import DatabaseOperationFailed, RetryBudgetExhausted
from sealstore.keyring import Keyring, forget_keyring, use_keyring
from sealstore.migrations.rotation import cas, jobs, worker
from sealstore.migrations.rotation.reseal import ResealTask, rotate
from sealstore.migrations.schema import create_tables, drop_tables
from sealstore.migrations.rotation.spec import ColumnSpec
from sealstore.migrations.transient import RetryPolicy, is_transient

metadata = sa.MetaData()
secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("body", EncryptedString(200), nullable=True),
)
N = 60


@pytest.fixture
def keyring():
    kr = use_keyring(Keyring.generate(tag_size=32))
    yield kr
    forget_keyring()


@pytest.fixture
def db(sql_engine, keyring):
    create_tables(sql_engine)
    metadata.create_all(sql_engine)
    with sql_engine.begin() as conn:
        conn.execute(sa.insert(secrets), [{"id": i, "body": f"SECRET-{i:04d}"} for i in range(N)])
    keyring.rotate()
    yield sql_engine
    metadata.drop_all(sql_engine)
    drop_tables(sql_engine)


def spec():
    return ColumnSpec.from_column(secrets.c.body)


class FakeTime:
    """A clock that only moves when the policy sleeps (deterministic budgets)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def policy(self, budget: float = 60.0) -> RetryPolicy:
        return RetryPolicy(budget=budget, sleep=self.sleep, clock=lambda: self.now)


def _sa_wrapped(orig, *, invalidated=False):
    err = sa.exc.DBAPIError.instance("UPDATE t SET v=%(v)s", {"v": "SECRET-0001"}, orig, Exception)
    err.connection_invalidated = invalidated
    return err


TRANSIENT = {
    "psycopg3 deadlock": lambda: psycopg.errors.DeadlockDetected("deadlock detected"),
    "psycopg3 serialization": lambda: psycopg.errors.SerializationFailure("could not serialize"),
    "psycopg3 lost connection": lambda: psycopg.OperationalError("server closed the connection"),
    "psycopg3 admin shutdown": lambda: psycopg.errors.AdminShutdown("terminating connection"),
    "psycopg2 deadlock": lambda: psycopg2.errors.DeadlockDetected("deadlock detected"),
    "psycopg2 serialization": lambda: psycopg2.errors.SerializationFailure("serialize"),
    "psycopg2 lost connection": lambda: psycopg2.OperationalError("server closed the connection"),
    "asyncpg deadlock": lambda: asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
    "asyncpg serialization": lambda: asyncpg.exceptions.SerializationError("serialize"),
    "asyncpg lost connection": lambda: asyncpg.exceptions.ConnectionDoesNotExistError("closed"),
    "pymysql deadlock": lambda: pymysql.err.OperationalError(1213, "Deadlock found"),
    "pymysql lock wait": lambda: pymysql.err.OperationalError(1205, "Lock wait timeout"),
    "pymysql gone away": lambda: pymysql.err.OperationalError(2006, "MySQL server has gone away"),
    "sqlalchemy deadlock": lambda: _sa_wrapped(psycopg.errors.DeadlockDetected("deadlock")),
    "sqlalchemy invalidated": lambda: _sa_wrapped(Exception("gone"), invalidated=True),
    "sqlalchemy sqlite locked": lambda: _sa_wrapped(_sqlite_locked()),
}


def _sqlite_locked():
    """A real SQLITE_BUSY from the sqlite3 module."""
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        a = sqlite3.connect(f"{tmp}/x.db", isolation_level=None)
        b = sqlite3.connect(f"{tmp}/x.db", timeout=0)
        try:
            a.execute("BEGIN EXCLUSIVE")
            b.execute("SELECT * FROM sqlite_master").fetchall()
        except sqlite3.OperationalError as exc:
            return exc
        finally:
            a.close()
            b.close()
    raise AssertionError("no lock error")


PERMANENT = {
    "psycopg3 undefined table": lambda: psycopg.errors.UndefinedTable("no relation"),
    "psycopg3 unique violation": lambda: psycopg.errors.UniqueViolation("duplicate key"),
    "psycopg2 undefined table": lambda: psycopg2.errors.UndefinedTable("no relation"),
    "asyncpg undefined table": lambda: asyncpg.exceptions.UndefinedTableError("no relation"),
    "pymysql no such table": lambda: pymysql.err.ProgrammingError(1146, "Table doesn't exist"),
    "pymysql duplicate": lambda: pymysql.err.IntegrityError(1062, "Duplicate entry 'SECRET-0001'"),
    "sqlalchemy wrapped undefined": lambda: _sa_wrapped(psycopg.errors.UndefinedTable("x")),
}


@pytest.mark.parametrize("make", TRANSIENT.values(), ids=TRANSIENT.keys())
def test_transient_errors_of_every_driver_are_recognised(make):
    assert is_transient(make())


@pytest.mark.parametrize("make", PERMANENT.values(), ids=PERMANENT.keys())
def test_other_errors_are_not_retried(make):
    assert not is_transient(make())
    fake = FakeTime()

    def fail():
        raise make()

    with pytest.raises(type(make())):
        fake.policy().call(fail, "step")
    assert fake.sleeps == []


def test_retries_back_off_with_jitter_and_stop_at_the_budget():
    fake = FakeTime()
    calls = []

    def deadlocked():
        calls.append(fake.now)
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    with pytest.raises(RetryBudgetExhausted) as caught:
        fake.policy(budget=10.0).call(deadlocked, "rotate secrets.body batch")
    err = caught.value
    assert sum(fake.sleeps) <= 10.0 and fake.now <= 10.0
    assert err.attempts == len(calls) and err.elapsed == fake.now
    assert "DeadlockDetected (SQLSTATE 40P01)" in str(err) and "rotate secrets.body" in str(err)
    assert err.__cause__ is None and err.__context__ is None
    # exponential backoff, capped at 2 s, each wait in the upper half of its ceiling
    for i, s in enumerate(fake.sleeps):
        ceiling = min(2.0, 0.05 * 2**i)
        assert ceiling / 2 <= s <= ceiling
    assert len(set(fake.sleeps)) == len(fake.sleeps)  # jitter: no two waits alike
    assert sum(fake.sleeps) > 10.0 - 2.0  # the budget was used, not cut short


def test_the_default_budget_covers_a_postgresql_restart():
    assert RetryPolicy().budget >= 60
    with pytest.raises(ValueError):
        RetryPolicy(budget=-1)


# ---- faults injected into each phase of a worker --------------------------------------------


def flaky(fn, make, times: int, counter: list, *, skip: int = 0):
    """``fn`` that raises ``make()`` on calls skip+1 .. skip+times."""

    def wrapped(*args, **kwargs):
        counter.append(1)
        if skip < len(counter) <= skip + times:
            raise make()
        return fn(*args, **kwargs)

    return wrapped


PHASES = ["start-up checks", "start job", "batch", "claim", "final count"]


def _inject(monkeypatch, phase, make, times, counter):
    if phase == "start-up checks":
        monkeypatch.setattr(
            worker, "_check_tables", flaky(worker._check_tables, make, times, counter)
        )
    elif phase == "start job":
        monkeypatch.setattr(jobs, "start_job", flaky(jobs.start_job, make, times, counter))
    elif phase == "batch":
        monkeypatch.setattr(ResealTask, "process", flaky(ResealTask.process, make, times, counter))
    elif phase == "claim":
        monkeypatch.setattr(jobs, "claim_range", flaky(jobs.claim_range, make, times, counter))
    else:  # the first call is the job's estimate; the second one is the final count
        monkeypatch.setattr(
            ResealTask, "count_stale", flaky(ResealTask.count_stale, make, times, counter, skip=1)
        )


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(
    "kind", ["psycopg3 deadlock", "psycopg2 serialization", "asyncpg lost connection",
             "pymysql deadlock", "sqlalchemy invalidated", "sqlalchemy sqlite locked"],
)  # fmt: skip
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_each_phase_retries_each_drivers_transient_error(db, keyring, monkeypatch, phase, kind):
    counter: list = []
    _inject(monkeypatch, phase, TRANSIENT[kind], 3, counter)
    fake = FakeTime()
    result = rotate(db, spec(), batch_size=25, retry=fake.policy())[0]
    assert result.status == "done" and result.remaining == 0 and result.resealed == N
    assert len(fake.sleeps) == 3  # three failures, three waits, then success
    assert len(counter) >= 4


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_each_phase_gives_up_at_the_budget(db, keyring, monkeypatch, phase):
    _inject(monkeypatch, phase, TRANSIENT["psycopg3 deadlock"], 10**6, [])
    fake = FakeTime()
    with pytest.raises(RetryBudgetExhausted) as caught:
        rotate(db, spec(), batch_size=25, retry=fake.policy(budget=3.0))
    assert fake.now <= 3.0 and len(fake.sleeps) >= 3
    assert caught.value.__context__ is None and caught.value.__cause__ is None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_permanent_error_stops_at_once_without_parameters(db, keyring, monkeypatch):
    def broken(self, conn, *args, **kwargs):
        conn.execute(sa.text("UPDATE secrets SET nope = :v"), {"v": "SECRET-0001"})

    monkeypatch.setattr(ResealTask, "process", broken)
    fake = FakeTime()
    with pytest.raises(DatabaseOperationFailed) as caught:
        rotate(db, spec(), batch_size=25, retry=fake.policy())
    assert fake.sleeps == []
    assert "SECRET" not in str(caught.value) and "no such column" in str(caught.value)
    assert caught.value.__context__ is None and caught.value.__cause__ is None


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_raw_psycopg_cursor_deadlock_is_retried(db, keyring, monkeypatch):
    """cas._execute_binary runs on psycopg's own cursor: its errors are not SQLAlchemy's."""
    counter: list = []
    monkeypatch.setattr(
        cas, "_execute_binary",
        flaky(cas._execute_binary, TRANSIENT["psycopg3 deadlock"], 2, counter),
    )  # fmt: skip
    fake = FakeTime()
    result = rotate(db, spec(), batch_size=25, retry=fake.policy())[0]
    assert result.status == "done" and result.remaining == 0 and len(fake.sleeps) == 2
    assert len(counter) >= 3


# ---- a real deadlock on PostgreSQL -----------------------------------------------------------


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_real_deadlock_with_the_worker_in_the_cycle(db, keyring, caplog):
    """An application transaction locks a row of the batch, the worker's compare-and-swap
    locks the rows before it and waits; the application then asks for one of the worker's
    rows: a lock cycle.  The worker's deadlock_timeout is the shorter, so PostgreSQL aborts
    the worker's transaction (40P01, raised on psycopg's raw cursor); the application commits
    and the worker redoes the batch."""
    url = db.url.render_as_string(hide_password=False)
    app = sa.create_engine(url)
    fired = threading.Event()
    app_done: list = []
    victim = N // 2  # in the middle of the first batch: the worker holds rows scanned before it

    def app_transaction(worker_pid: int):
        with app.connect() as conn:
            conn.exec_driver_sql("SET deadlock_timeout = '30s'")
            conn.commit()
            with conn.begin():
                conn.execute(sa.update(secrets).where(secrets.c.id == victim).values(body="app-B"))
                fired.set()
                deadline = time.monotonic() + 120  # a hang guard: ends when the worker waits
                while time.monotonic() < deadline:  # until the worker waits for our row
                    waiting = conn.exec_driver_sql(
                        f"SELECT count(*) FROM pg_locks WHERE pid = {worker_pid} AND NOT granted"
                    ).scalar_one()
                    if waiting:
                        break
                    time.sleep(0.01)
                held = _a_row_the_worker_holds(conn)
                conn.execute(sa.update(secrets).where(secrets.c.id == held).values(body="app-A"))
            app_done.append(held)

    sleeps: list = []

    def hook(name, **info):
        if name == "sealed" and not fired.is_set():
            threading.Thread(target=app_transaction, args=(worker_pid[0],), daemon=True).start()
            fired.wait(120)  # a hang guard: returns as soon as the app transaction holds its row

    worker_pid = [None]

    @sa.event.listens_for(db, "connect")
    def on_connect(dbapi_conn, record):
        cur = dbapi_conn.cursor()
        cur.execute("SET deadlock_timeout = '500ms'")
        cur.execute("SELECT pg_backend_pid()")
        worker_pid[0] = cur.fetchone()[0]
        cur.close()

    db.dispose()  # new connections get the settings above
    caplog.set_level("WARNING", "sealstore.migrations")
    policy = RetryPolicy(sleep=lambda s: (sleeps.append(s), time.sleep(s)))
    try:
        result = rotate(db, spec(), batch_size=N, retry=policy, on_event=hook)[0]
    finally:
        sa.event.remove(db, "connect", on_connect)
        app.dispose()
    assert app_done, "the application transaction did not commit"
    assert len(sleeps) >= 1  # the worker was the deadlock victim and retried
    assert "psycopg.errors.DeadlockDetected (SQLSTATE 40P01)" in caplog.text
    assert result.status == "done" and result.remaining == 0
    with db.connect() as conn:
        rows = dict(conn.execute(sa.select(secrets.c.id, secrets.c.body)).all())
    assert rows[victim] == "app-B" and rows[app_done[0]] == "app-A"
    for i in set(range(N)) - {victim, app_done[0]}:
        assert rows[i] == f"SECRET-{i:04d}"


def _a_row_the_worker_holds(conn) -> int:
    """Try each row with NOWAIT: the first one that is locked is the worker's."""
    for i in range(N):
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"SELECT 1 FROM secrets WHERE id = {i} FOR UPDATE NOWAIT")
        except sa.exc.OperationalError:
            return i
    raise AssertionError("the worker holds no row")


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_refused_login_is_not_retried_a_refused_connection_is(db):
    """psycopg's connection errors carry no SQLSTATE: a missing database or role is final (no
    60 s of retries), a closed port (a server restarting) is transient."""
    from sqlalchemy.engine import make_url

    url = make_url(db.url.render_as_string(hide_password=False))
    cases = [(url.set(database="no_such_db"), False), (url.set(username="no_such_role"), False),
             (url.set(port=1), True)]  # fmt: skip
    for target, transient in cases:
        engine = sa.create_engine(target)
        try:
            with pytest.raises(sa.exc.OperationalError) as caught:
                engine.connect()
        finally:
            engine.dispose()
        assert is_transient(caught.value) is transient, target
