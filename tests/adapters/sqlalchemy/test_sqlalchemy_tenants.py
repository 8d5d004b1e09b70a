"""Tenant-bound columns (issue #28): the four tenancies, cross-tenant copies refused, blind
indexes per tenant, legacy values, shredding (live, concurrent, restored backups, KMS).

Every test runs on SQLite (each tenant schema an attached database) and PostgreSQL (schemas).
"""

from __future__ import annotations

import shutil
from pathlib import Path
import threading
import uuid

import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import sealstore
from sealstore import tenants as T
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString, SealedRowValue, seal_for_row
from sealstore.errors import (
    KeySourceError,
    SealstoreError,
    TenantMismatch,
    TenantRequired,
    TenantShredded,
    UnknownTenant,
)
from sealstore.keyring import Keyring, forget_keyring, use_keyring

TENANTS = ("tenant_a", "tenant_b")
REFUSED = (StatementError, SealstoreError)


# ---- models ---------------------------------------------------------------------------------


def _users(meta: MetaData, schema: str | None) -> Table:
    return Table(
        "tn_users", meta,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("ssn", EncryptedString(11, tenant="schema")),
        Column("email", EncryptedString(64, tenant="schema")),
        Column("email_index", BlindIndex("email")),
        schema=schema,
    )  # fmt: skip


PLAIN = MetaData()
USERS = _users(PLAIN, None)  # schema_translate_map tenancy
QUALIFIED = {t: _users(MetaData(), t) for t in TENANTS}  # schema-qualified models

MEMOS = Table(
    "tn_memos", PLAIN,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, tenant="context")),
    Column("body_index", BlindIndex("body")),
)  # fmt: skip
# the same table, declared before tenancy (legacy values)
LEGACY = Table(
    "tn_memos", MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40)),
    Column("body_index", BlindIndex("body")),
)  # fmt: skip
STRICT = Table(
    "tn_memos", MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, tenant="context", tenant_legacy=False)),
)  # fmt: skip


class Base(DeclarativeBase):
    metadata = PLAIN


class Note(Base):
    __tablename__ = "tn_notes"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    tenant_id: Mapped[str] = mapped_column(String(63))
    body: Mapped[str] = mapped_column(EncryptedString(40, tenant_column="tenant_id"))


class UserRow(Base):
    __table__ = USERS


# ---- row-bound tenant columns (tenant binding combined with bind_row=True) ------------------


def _row_users(meta: MetaData, schema: str | None) -> Table:
    return Table(
        "tn_rusers", meta,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("ssn", EncryptedString(11, tenant="schema", bind_row=True)),
        schema=schema,
    )  # fmt: skip


ROW_USERS = _row_users(PLAIN, None)  # schema_translate_map tenancy
ROW_QUALIFIED = {t: _row_users(MetaData(), t) for t in TENANTS}

ROW_MEMOS = Table(
    "tn_rmemos", PLAIN,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, tenant="context", bind_row=True)),
)  # fmt: skip
# the same table, row-bound before tenancy (legacy values), and without legacy opening
ROW_LEGACY = Table(
    "tn_rmemos", MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, bind_row=True)),
)  # fmt: skip
ROW_STRICT = Table(
    "tn_rmemos", MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, tenant="context", bind_row=True, tenant_legacy=False)),
)  # fmt: skip


class RowUser(Base):
    __table__ = ROW_USERS


class RowMemo(Base):
    __table__ = ROW_MEMOS


class RowNote(Base):
    __tablename__ = "tn_rnotes"
    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    tenant_id: Mapped[str] = mapped_column(String(63))
    body: Mapped[str] = mapped_column(EncryptedString(40, tenant_column="tenant_id", bind_row=True))


# ---- fixtures -------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        eng = create_engine(f"sqlite:///{tmp_path / 'main.db'}")

        @event.listens_for(eng, "connect")
        def _attach(dbapi_conn, _record):
            for t in TENANTS:
                dbapi_conn.execute(f"ATTACH DATABASE '{tmp_path / t}.db' AS {t}")

    else:
        eng = create_engine(request.getfixturevalue("pg_url"))
        with eng.begin() as conn:
            for t in TENANTS:
                conn.execute(text(f"DROP SCHEMA IF EXISTS {t} CASCADE"))
                conn.execute(text(f"CREATE SCHEMA {t}"))
    PLAIN.drop_all(eng)
    with eng.begin() as conn:
        for t in TENANTS:
            PLAIN.create_all(conn.execution_options(schema_translate_map={None: t}))
    PLAIN.create_all(eng)
    yield eng
    PLAIN.drop_all(eng)
    if request.param == "postgresql":
        with eng.begin() as conn:
            for t in TENANTS:
                conn.execute(text(f"DROP SCHEMA IF EXISTS {t} CASCADE"))
    eng.dispose()


@pytest.fixture
def store(tmp_path):
    return T.TenantStore(tmp_path / "tenant-keys")


@pytest.fixture
def live(store):
    """Two tenants in a store, a live TenantKeys over it, and the untenanted keyrings."""
    for t in TENANTS:
        store.create(t)
    keys = T.use_tenant_keys(T.TenantKeys(store))
    use_keyring(Keyring.generate())
    use_keyring(Keyring.generate(), name="index")
    yield keys
    keys.close()
    T.use_tenant_keys(T.TenantKeys())
    forget_keyring("default")
    forget_keyring("index")


def _raw(engine, table: str, column: str, key, schema: str | None = None):
    name = f"{schema}.{table}" if schema else table
    with engine.connect() as conn:
        return bytes(conn.execute(text(f"SELECT {column} FROM {name} WHERE id = {key}")).scalar())


def _write_raw(engine, table: str, column: str, key, value, schema: str | None = None):
    name = f"{schema}.{table}" if schema else table
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {name} SET {column} = :v WHERE id = {key}"), {"v": value})


def _count(engine, table: str, schema: str | None = None) -> int:
    name = f"{schema}.{table}" if schema else table
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT count(*) FROM {name}")).scalar()


def _refused(exc: BaseException) -> BaseException:
    """The sealstore error behind a statement error (SQLAlchemy wraps processor errors)."""
    while isinstance(exc, StatementError) and exc.orig is not None:
        exc = exc.orig
    assert isinstance(exc, SealstoreError), repr(exc)
    return exc


# ---- names and contexts ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "a.b", "a/b", "a:b", "a b", "-a", "x" * 64, "é", 5, b"a"])
def test_tenant_names_are_validated(bad):
    with pytest.raises(sealstore.errors.TenantError):
        T.check_name(bad)


def test_tenant_context_is_unambiguous_and_keeps_the_v1_encoding():
    from sealstore.format import column_context

    assert column_context("t", "c") == column_context("t", "c", tenant=None)
    seen = {
        column_context("t", "c"),
        column_context("t", "c", tenant="a"),
        column_context("t", "c", tenant="a", schema="a"),
        column_context("t", "c", tenant="a", schema="b"),
        column_context("t", "c", tenant="b", schema="a"),
        column_context("t", "c", 1, tenant="a"),
        column_context("t", "c", 1),
    }
    assert len(seen) == 7
    with pytest.raises(ValueError):
        column_context("t", "c", schema="a")


# ---- schema-qualified models ----------------------------------------------------------------


def _put_qualified(engine, tenant, key, ssn, email):
    with engine.begin() as conn:
        conn.execute(insert(QUALIFIED[tenant]).values(id=key, ssn=ssn, email=email))


def test_schema_qualified_round_trip_and_copy_refused(engine, live):
    _put_qualified(engine, "tenant_a", 1, "111-22-3333", "a@x.org")
    _put_qualified(engine, "tenant_b", 1, "999-88-7777", "b@x.org")
    for t, ssn in (("tenant_a", "111-22-3333"), ("tenant_b", "999-88-7777")):
        with engine.connect() as conn:
            assert conn.execute(select(QUALIFIED[t].c.ssn)).scalar() == ssn
    # a storage attacker copies tenant A's ssn into tenant B's row (same table, same pk)
    stolen = _raw(engine, "tn_users", "ssn", 1, "tenant_a")
    _write_raw(engine, "tn_users", "ssn", 1, stolen, "tenant_b")
    with engine.connect() as conn, pytest.raises(REFUSED) as info:
        conn.execute(select(QUALIFIED["tenant_b"].c.ssn)).scalar()
    assert "111-22-3333" not in str(info.value)
    _refused(info.value)


def test_schema_values_are_sealed_under_the_tenants_own_keys(engine, live):
    _put_qualified(engine, "tenant_a", 1, "111-22-3333", "a@x.org")
    stored = _raw(engine, "tn_users", "ssn", 1, "tenant_a")
    from sealstore.format import column_context, key_id_of

    ring_a = T.tenant_keyring("tenant_a")
    assert key_id_of(stored) == ring_a.primary.key_id
    assert key_id_of(stored) not in T.tenant_keyring("tenant_b")
    ctx = column_context("tn_users", "ssn", tenant="tenant_a", schema="tenant_a")
    assert ring_a.open(stored, ctx) == b"111-22-3333"


def test_blind_indexes_differ_across_tenants_and_swaps_do_not_match(engine, live):
    _put_qualified(engine, "tenant_a", 1, "1", "same@x.org")
    _put_qualified(engine, "tenant_b", 1, "2", "same@x.org")
    idx_a = _raw(engine, "tn_users", "email_index", 1, "tenant_a")
    idx_b = _raw(engine, "tn_users", "email_index", 1, "tenant_b")
    assert idx_a != idx_b  # equal e-mails do not link
    for t in TENANTS:
        users = QUALIFIED[t]
        with engine.connect() as conn:
            assert conn.execute(select(users.c.id).where(users.c.email == "same@x.org")).all() == [
                (1,)
            ]
    _put_qualified(engine, "tenant_a", 2, "3", "other@x.org")
    # swap: tenant A's index value of other@x.org put on tenant B's row
    _write_raw(engine, "tn_users", "email_index", 1,
               _raw(engine, "tn_users", "email_index", 2, "tenant_a"), "tenant_b")  # fmt: skip
    users = QUALIFIED["tenant_b"]
    with engine.connect() as conn:
        assert conn.execute(select(users.c.id).where(users.c.email == "other@x.org")).all() == []


# ---- schema_translate_map -------------------------------------------------------------------


def test_schema_translate_map_binds_to_the_effective_schema(engine, live):
    for t, ssn in (("tenant_a", "111-22-3333"), ("tenant_b", "999-88-7777")):
        with engine.begin() as conn:
            conn = conn.execution_options(schema_translate_map={None: t})
            conn.execute(insert(USERS).values(id=7, ssn=ssn, email=f"{t}@x.org"))
    for t, ssn in (("tenant_a", "111-22-3333"), ("tenant_b", "999-88-7777")):
        with engine.connect() as conn:
            conn = conn.execution_options(schema_translate_map={None: t})
            assert conn.execute(select(USERS.c.ssn, USERS.c.email)).one() == (ssn, f"{t}@x.org")
            found = conn.execute(select(USERS.c.id).where(USERS.c.email == f"{t}@x.org")).all()
            assert found == [(7,)]
        # the schema-qualified model of the same schema reads it too: one binding
        with engine.connect() as conn:
            assert conn.execute(select(QUALIFIED[t].c.ssn)).scalar() == ssn
    _write_raw(engine, "tn_users", "ssn", 7,
               _raw(engine, "tn_users", "ssn", 7, "tenant_a"), "tenant_b")  # fmt: skip
    with engine.connect() as conn, pytest.raises(REFUSED) as info:
        conn = conn.execution_options(schema_translate_map={None: "tenant_b"})
        conn.execute(select(USERS.c.ssn)).scalar()
    _refused(info.value)


def test_schema_tenancy_without_a_schema_writes_nothing(engine, live):
    with engine.begin() as conn, pytest.raises(REFUSED) as info:
        conn.execute(insert(USERS).values(id=1, ssn="1", email="e"))
    assert isinstance(_refused(info.value), TenantRequired)
    assert _count(engine, "tn_users") == 0


# ---- a tenant for the session/connection ----------------------------------------------------


def test_context_tenant_block_and_execution_option(engine, live):
    with sealstore.tenant("tenant_a"), engine.begin() as conn:
        conn.execute(insert(MEMOS).values(id=1, body="from a"))
    with engine.begin() as conn:
        conn = conn.execution_options(sealstore_tenant="tenant_b")
        conn.execute(insert(MEMOS).values(id=2, body="from b"))
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        assert conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 1)).scalar() == "from a"
        assert conn.execute(select(MEMOS.c.id).where(MEMOS.c.body == "from a")).all() == [(1,)]
        # tenant B's row does not open under tenant A
        with pytest.raises(REFUSED) as info:
            conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar()
        _refused(info.value)
    with engine.connect() as conn:
        conn = conn.execution_options(sealstore_tenant="tenant_b")
        assert conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar() == "from b"
        assert conn.execute(select(MEMOS.c.id).where(MEMOS.c.body == "from b")).all() == [(2,)]
        assert conn.execute(select(MEMOS.c.id).where(MEMOS.c.body == "from a")).all() == []
    # ORM session bound to a tenant through its connection's options
    with Session(engine.execution_options(sealstore_tenant="tenant_b")) as session:
        assert session.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar() == "from b"


def test_context_tenant_required_and_mismatch_write_nothing(engine, live):
    with engine.begin() as conn, pytest.raises(REFUSED) as info:
        conn.execute(insert(MEMOS).values(id=1, body="x"))
    assert isinstance(_refused(info.value), TenantRequired)
    with sealstore.tenant("tenant_a"), engine.begin() as conn, pytest.raises(REFUSED) as i2:
        conn.execution_options(sealstore_tenant="tenant_b").execute(
            insert(MEMOS).values(id=1, body="x")
        )
    assert isinstance(_refused(i2.value), TenantMismatch)
    with engine.begin() as conn, pytest.raises(REFUSED) as i3:
        conn.execution_options(sealstore_tenant="nobody").execute(
            insert(MEMOS).values(id=1, body="x")
        )
    assert isinstance(_refused(i3.value), UnknownTenant)
    assert _count(engine, "tn_memos") == 0


def test_context_rows_copied_across_tenants_are_refused(engine, live):
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"secret {t}"))
    _write_raw(engine, "tn_memos", "body", 2, _raw(engine, "tn_memos", "body", 1))
    with sealstore.tenant("tenant_b"), engine.connect() as conn:
        with pytest.raises(REFUSED) as info:
            conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar()
    assert "secret" not in str(info.value)
    _refused(info.value)


# ---- tenant column --------------------------------------------------------------------------


def test_tenant_column_orm_round_trip_and_checks(engine, live):
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        session.add(Note(id=1, tenant_id="tenant_a", body="note a"))
        session.commit()
    with sealstore.tenant("tenant_b"), Session(engine) as session:
        session.add(Note(id=2, tenant_id="tenant_b", body="note b"))
        session.commit()
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        assert session.get(Note, 1).body == "note a"
        # a row claiming another tenant is refused before anything is written
        session.add(Note(id=3, tenant_id="tenant_b", body="forged"))
        with pytest.raises(TenantMismatch):
            session.commit()
    with sealstore.tenant("tenant_a"), engine.begin() as conn:
        with pytest.raises(TenantMismatch):
            conn.execute(update(Note.__table__).where(Note.id == 1).values(tenant_id="tenant_b"))
        with pytest.raises(TenantRequired):
            conn.execute(insert(Note.__table__).values(id=4, body="no tenant"))
    assert _count(engine, "tn_notes") == 2
    # copy tenant A's ciphertext into tenant B's row: refused when B reads it
    _write_raw(engine, "tn_notes", "body", 2, _raw(engine, "tn_notes", "body", 1))
    with sealstore.tenant("tenant_b"), Session(engine) as session:
        with pytest.raises(SealstoreError):
            session.get(Note, 2).body  # noqa: B018


# ---- legacy values --------------------------------------------------------------------------


def test_values_written_before_tenancy_still_open(engine, live):
    with engine.begin() as conn:
        conn.execute(insert(LEGACY).values(id=1, body="old value"))
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        assert conn.execute(select(MEMOS.c.body)).scalar() == "old value"
        with pytest.raises(REFUSED) as info:
            conn.execute(select(STRICT.c.body)).scalar()
        _refused(info.value)


# ---- shredding ------------------------------------------------------------------------------


def test_shred_live_process_refuses_after_refresh_others_untouched(engine, live, store):
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"v {t}"))
    # another process (another store object) shreds tenant B
    record = T.TenantStore(store.directory).shred("tenant_b", by="tester")
    assert record.by == "tester" and record.key_ids and record.index_key_ids
    text_b = (store.directory / "tenant_b.keys.json").read_text()
    assert '"material"' not in text_b and '"destroyed"' in text_b
    assert store.shredded("tenant_b").key_ids == record.key_ids
    assert store.names() == ["tenant_a"]
    live.refresh()  # what the refresh thread does every interval
    with sealstore.tenant("tenant_b"), engine.connect() as conn:
        with pytest.raises(REFUSED) as info:
            conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar()
        assert isinstance(_refused(info.value), TenantShredded)
        with pytest.raises(REFUSED):
            conn.execute(select(MEMOS.c.id).where(MEMOS.c.body == "v tenant_b")).all()
    with sealstore.tenant("tenant_b"), engine.begin() as conn, pytest.raises(REFUSED):
        conn.execute(insert(MEMOS).values(id=3, body="after"))
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        assert conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 1)).scalar() == "v tenant_a"
    with pytest.raises(TenantShredded):
        store.create("tenant_b")


def test_shred_with_refresh_thread(engine, live, store):
    with sealstore.tenant("tenant_b"), engine.begin() as conn:
        conn.execute(insert(MEMOS).values(id=1, body="b"))
    live.start(0.05)
    T.TenantStore(store.directory).shred("tenant_b")
    gone = threading.Event()
    for _ in range(400):  # until the refresh thread has run (no elapsed time asserted)
        try:
            with sealstore.tenant("tenant_b"), engine.connect() as conn:
                conn.execute(select(MEMOS.c.body)).scalar()
        except REFUSED as exc:
            assert isinstance(_refused(exc), TenantShredded)
            gone.set()
            break
        threading.Event().wait(0.02)
    assert gone.is_set()


def test_shred_while_other_tenants_read_and_write(engine, live, store):
    errors: list[BaseException] = []
    stop = threading.Event()
    done = {"n": 0}

    def worker(base: int) -> None:
        i = 0
        try:
            while not stop.is_set() or i < 20:
                key = base + i
                with sealstore.tenant("tenant_a"), engine.begin() as conn:
                    conn.execute(insert(MEMOS).values(id=key, body=f"w{key}"))
                with sealstore.tenant("tenant_a"), engine.connect() as conn:
                    got = conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == key)).scalar()
                    assert got == f"w{key}"
                i += 1
                done["n"] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    with sealstore.tenant("tenant_b"), engine.begin() as conn:
        conn.execute(insert(MEMOS).values(id=1, body="b"))
    threads = [threading.Thread(target=worker, args=(1000 * (n + 1),)) for n in range(2)]
    for th in threads:
        th.start()
    T.TenantStore(store.directory).shred("tenant_b")
    live.refresh()
    stop.set()
    for th in threads:
        th.join()
    assert errors == []
    assert done["n"] >= 40
    with sealstore.tenant("tenant_b"), engine.connect() as conn, pytest.raises(REFUSED):
        conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 1)).scalar()


def _backup(engine, tmp_path, store):
    """A copy of the tenant key directory and of tenant B's memo (the database backup)."""
    shutil.copytree(store.directory, tmp_path / "backup-keys")
    return _raw(engine, "tn_memos", "body", 2)


def test_restored_backup_of_plain_key_files_still_opens(engine, live, store, tmp_path):
    """The threat model: without a per-tenant KMS key, a pre-shredding backup of the key files
    reopens the tenant's values.  Shredding holds against the live store only."""
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"v {t}"))
    backup_value = _backup(engine, tmp_path, store)
    store.shred("tenant_b")
    restored = T.TenantStore(tmp_path / "backup-keys")
    (tmp_path / "backup-keys" / T.SHRED_LOG).unlink(missing_ok=True)
    keys = T.use_tenant_keys(T.TenantKeys(restored))
    try:
        _write_raw(engine, "tn_memos", "body", 2, backup_value)
        with sealstore.tenant("tenant_b"), engine.connect() as conn:
            assert (
                conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar() == "v tenant_b"
            )
    finally:
        keys.close()


# ---- per-tenant KMS keys: shredding that holds against backups ------------------------------


@pytest.fixture(params=["moto", "localstack"])
def kms_store(request, tmp_path):
    """A KMS-wrapped tenant store: moto in-process, or LocalStack's KMS (skipped when LocalStack
    is not installed, except in CI)."""
    boto3 = pytest.importorskip("boto3")
    from moto import mock_aws

    if request.param == "moto":
        mock = mock_aws()
        mock.start()
        client = boto3.client("kms", region_name="us-east-1")
    else:
        mock = None
        client = boto3.client(
            "kms", endpoint_url=request.getfixturevalue("localstack_endpoint"),
            region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test",
        )  # fmt: skip
    prefix = f"alias/sealstore-test-{uuid.uuid4().hex[:8]}-"
    store = T.TenantStore(
        tmp_path / "kms-keys", kms=T.KmsTenantWrapping(client, alias_prefix=prefix)
    )
    for t in TENANTS:
        store.create(t)
    keys = T.use_tenant_keys(T.TenantKeys(store))
    use_keyring(Keyring.generate())
    use_keyring(Keyring.generate(), name="index")
    try:
        yield request.param, store, client
    finally:
        keys.close()
        T.use_tenant_keys(T.TenantKeys())
        forget_keyring("default")
        forget_keyring("index")
        if mock is not None:
            mock.stop()


def _end_of_pending_window(backend: str, client, kms_key: str) -> None:
    """What AWS does once the pending window (7 to 30 days) has passed: the key is gone.
    LocalStack refuses a disabled key at once; moto does not enforce DisableKey or a pending
    deletion on Decrypt, so the test removes the key from moto's backend, as AWS will."""
    if backend == "moto":
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.kms.models import kms_backends

        kms_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].delete_key(kms_key)


def test_kms_shredding_defeats_a_restored_backup(engine, kms_store, tmp_path):
    backend, store, client = kms_store
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"v {t}"))
    text_a = (store.directory / "tenant_a.keys.json").read_text()
    assert '"wrapped"' in text_a and '"material"' not in text_a
    backup_value = _backup(engine, tmp_path, store)
    record = store.shred("tenant_b")
    assert record.kms_key is not None
    state = client.describe_key(KeyId=record.kms_key)["KeyMetadata"]["KeyState"]
    assert state == "PendingDeletion"
    _end_of_pending_window(backend, client, record.kms_key)
    # restore the pre-shredding key files and database row, in a fresh process
    restored = T.TenantStore(tmp_path / "backup-keys", kms=store.kms)
    (tmp_path / "backup-keys" / T.SHRED_LOG).unlink(missing_ok=True)
    fresh = T.use_tenant_keys(T.TenantKeys(restored))
    try:
        _write_raw(engine, "tn_memos", "body", 2, backup_value)
        with sealstore.tenant("tenant_a"), engine.connect() as conn:
            assert (
                conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 1)).scalar() == "v tenant_a"
            )
        with sealstore.tenant("tenant_b"), engine.connect() as conn:
            with pytest.raises(REFUSED) as info:
                conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 2)).scalar()
        assert isinstance(_refused(info.value), KeySourceError)
        assert "v tenant_b" not in str(info.value)
    finally:
        fresh.close()


def test_object_binding_seam():
    ring = Keyring.generate()
    keys = T.use_tenant_keys(T.TenantKeys())
    keys.register("tenant_a", ring, Keyring.generate())
    try:
        got, prefix = T.object_binding("tenant_a")
        assert got is ring and b"tenant_a" in prefix
        with sealstore.tenant("tenant_a"):
            assert T.object_binding()[1] == prefix
        with pytest.raises(TenantRequired):
            T.object_binding()
    finally:
        keys.close()
        T.use_tenant_keys(T.TenantKeys())


# ---- status counts legacy values, rotation re-seals them to the tenant binding ----------------


@pytest.fixture
def sealstore_tables(engine):
    """The sealstore tables (jobs), dropped afterwards when this test created them."""
    from sqlalchemy import inspect

    from sealstore.migrations.schema import JOBS_TABLE, create_tables, drop_tables

    with engine.connect() as conn:
        existed = inspect(conn).has_table(JOBS_TABLE)
    create_tables(engine)
    yield engine
    if not existed:
        drop_tables(engine)


def test_status_counts_legacy_values_and_rotate_binds_them(engine, live, sealstore_tables):
    from sealstore.format import key_id_of
    from sealstore.migrations.rotation.reseal import rotate
    from sealstore.migrations.rotation.spec import ColumnSpec
    from sealstore.migrations.rotation.status import status

    with engine.begin() as conn:
        for key in range(1, 6):
            conn.execute(insert(LEGACY).values(id=key, body=f"old {key}"))
    with sealstore.tenant("tenant_a"), engine.begin() as conn:
        conn.execute(insert(MEMOS).values(id=10, body="new"))
    from sealstore.migrations.rotation.verify import verify

    with sealstore.tenant("tenant_a"):
        spec = ColumnSpec.from_column(MEMOS.c.body)
        (checked,) = verify(engine, [spec])
        assert (checked.checked, checked.failed) == (6, 0)  # legacy values open too
        report = status(engine, [spec])
        (col,) = [c for c in report.columns if c.kind == "encrypted"]
        assert (col.tenant, col.legacy, col.not_primary) == ("tenant_a", 5, 5)
        (result,) = rotate(engine, [spec])
        assert result.failed == 0
        col = [c for c in status(engine, [spec]).columns if c.kind == "encrypted"][0]
        assert (col.legacy, col.not_primary) == (0, 0)
    ring_a = T.tenant_keyring("tenant_a")
    assert key_id_of(_raw(engine, "tn_memos", "body", 3)) == ring_a.primary.key_id
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        assert conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 3)).scalar() == "old 3"
        # now bound: the strict model (no legacy) opens it, and it no longer opens as legacy
        assert conn.execute(select(STRICT.c.body).where(STRICT.c.id == 3)).scalar() == "old 3"
    with sealstore.tenant("tenant_b"), engine.connect() as conn, pytest.raises(REFUSED):
        conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 3)).scalar()
    with pytest.raises(TenantRequired):
        ColumnSpec.from_column(MEMOS.c.body)


def test_rotate_a_tenant_column_table_touches_only_the_tenants_rows(engine, live, sealstore_tables):
    from sealstore.migrations.rotation.reseal import rotate
    from sealstore.migrations.rotation.spec import ColumnSpec

    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), Session(engine) as session:
            session.add(Note(id=key, tenant_id=t, body=f"n {t}"))
            session.commit()
    T.TenantStore(live.store.directory).rotate("tenant_a")
    live.refresh()
    before_b = _raw(engine, "tn_notes", "body", 2)
    with sealstore.tenant("tenant_a"):
        (result,) = rotate(engine, [ColumnSpec.from_column(Note.__table__.c.body)])
    assert result.failed == 0
    assert _raw(engine, "tn_notes", "body", 2) == before_b
    from sealstore.format import key_id_of

    assert (
        key_id_of(_raw(engine, "tn_notes", "body", 1))
        == T.tenant_keyring("tenant_a").primary.key_id
    )
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        assert session.get(Note, 1).body == "n tenant_a"


def test_rows_open_under_the_tenant_their_statement_ran_for(engine, live):
    """A result fetched after another tenant's statement still opens under its own tenant
    (the tenant is taken from the execution, not from whatever ran last)."""
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"m {t}"))
    with engine.connect() as c1, engine.connect() as c2:
        first = c1.execution_options(sealstore_tenant="tenant_a").execute(
            select(MEMOS.c.body).where(MEMOS.c.id == 1)
        )
        second = c2.execution_options(sealstore_tenant="tenant_b").execute(
            select(MEMOS.c.body).where(MEMOS.c.id == 2)
        )
        assert first.scalar() == "m tenant_a"
        assert second.scalar() == "m tenant_b"


# ---- the commands: status and rotate --tenant ------------------------------------------------

_APP_MODELS = """
from sqlalchemy import Column, Integer, MetaData, Table
from sealstore.adapters.sqlalchemy import BlindIndex, EncryptedString, SealedRowValue, seal_for_row

metadata = MetaData()
memos = Table(
    "cli_memos", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("body", EncryptedString(40, tenant="context")),
    Column("body_index", BlindIndex("body")),
)
"""


def test_status_and_rotate_commands_per_tenant(tmp_path, monkeypatch, capsys):
    import json
    import sys as _sys

    from sealstore.cli import main
    from sealstore.config import load_config

    _sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "migrations"))
    from cli_runner import key_file_project

    config = key_file_project(tmp_path, monkeypatch)
    (tmp_path / "app_models.py").write_text(_APP_MODELS)
    tenants_dir = tmp_path / "tenant-keys"
    assert main(["tenants", "create", "acme", "--dir", str(tenants_dir)]) == 0
    db = f"sqlite:///{tmp_path / 'app.db'}"
    import app_models

    engine = create_engine(db)
    app_models.metadata.create_all(engine)
    column_ring = use_keyring(load_config(str(config)).load_keyring())
    use_keyring(Keyring.generate(), name="index")
    keys = T.use_tenant_keys(T.TenantKeys(T.TenantStore(tenants_dir)))
    legacy = Table(
        "cli_memos", MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("body", EncryptedString(40)),
    )  # fmt: skip
    try:
        with engine.begin() as conn:
            conn.execute(insert(legacy), [{"id": i, "body": f"old {i}"} for i in range(3)])
        capsys.readouterr()
        common = ["--config", str(config)]
        where = ["--db", db, "--models", "app_models:metadata", "--tenant", "acme",
                 "--tenants-dir", str(tenants_dir)]  # fmt: skip
        assert main([*common, "status", *where, "--json"]) == 1
        out, err = capsys.readouterr()
        (col,) = [c for c in json.loads(out)["columns"] if c["kind"] == "encrypted"]
        assert (col["tenant"], col["legacy"]) == ("acme", 3)
        assert "3 of them were sealed before their column was tenant-aware" in err
        assert main([*common, "db", "init", "--db", db]) == 0
        assert main([*common, "rotate", *where, "--progress", "none"]) == 0
        capsys.readouterr()
        main([*common, "status", *where, "--json"])
        (col,) = [
            c for c in json.loads(capsys.readouterr().out)["columns"] if c["kind"] == "encrypted"
        ]
        assert (col["legacy"], col["not_primary"]) == (0, 0)
        # (the commands installed tenant keys of their own, and closed them)
        keys = T.use_tenant_keys(T.TenantKeys(T.TenantStore(tenants_dir)))
        with sealstore.tenant("acme"), engine.connect() as conn:
            got = conn.execute(select(app_models.memos.c.body).order_by(app_models.memos.c.id))
            assert [r[0] for r in got] == ["old 0", "old 1", "old 2"]
        assert main([*common, "status", "--db", db, "--models", "app_models:metadata",
                     "--tenant", "acme"]) == 2  # fmt: skip
        assert "--tenants-dir" in capsys.readouterr().err
    finally:
        keys.close()
        T.use_tenant_keys(T.TenantKeys())
        forget_keyring("default")
        forget_keyring("index")
        column_ring.close()
        engine.dispose()


def test_reindex_one_tenant_after_rotating_its_index_key(engine, live, sealstore_tables):
    from sealstore.blind_index import key_id_of as index_key_id
    from sealstore.migrations.rotation.reindex import reindex
    from sealstore.migrations.rotation.spec import specs_from_metadata

    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body="same"))
    _put_qualified(engine, "tenant_a", 1, "1", "a@x.org")
    store = T.TenantStore(live.store.directory)
    store.rotate("tenant_a")
    live.refresh()
    new_primary = T.tenant_index_keyring("tenant_a").primary.key_id
    before_b = _raw(engine, "tn_memos", "body_index", 2)
    with sealstore.tenant("tenant_a"):
        _, memo_indexes = specs_from_metadata(MEMOS)
        (result,) = reindex(engine, memo_indexes)
    # a tenant="context" table without a tenant column: the database cannot tell whose row is
    # whose, so tenant B's row does not open under tenant A's keys; reported, left as it is
    assert [f[0] for f in result.failures] == [(2,)]
    assert index_key_id(_raw(engine, "tn_memos", "body_index", 1)) == new_primary
    assert _raw(engine, "tn_memos", "body_index", 2) == before_b
    _, user_indexes = specs_from_metadata(QUALIFIED["tenant_a"])
    (result,) = reindex(engine, user_indexes)
    assert result.failed == 0
    assert index_key_id(_raw(engine, "tn_users", "email_index", 1, "tenant_a")) == new_primary
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        assert conn.execute(select(MEMOS.c.id).where(MEMOS.c.body == "same")).all() == [(1,)]
    with engine.connect() as conn:
        users = QUALIFIED["tenant_a"]
        assert conn.execute(select(users.c.id).where(users.c.email == "a@x.org")).all() == [(1,)]


def test_orm_session_with_schema_translate_map(engine, live):
    for t in TENANTS:
        with Session(engine.execution_options(schema_translate_map={None: t})) as session:
            session.add(UserRow(id=1, ssn=f"ssn {t}"[:11], email=f"{t}@x.org"))
            session.commit()
    for t in TENANTS:
        with Session(engine.execution_options(schema_translate_map={None: t})) as session:
            row = session.scalars(select(UserRow).where(UserRow.email == f"{t}@x.org")).one()
            assert row.ssn == f"ssn {t}"[:11]
            row.email = f"new-{t}@x.org"  # an ORM update: index recomputed for the tenant
            session.commit()
            assert session.scalars(
                select(UserRow.id).where(UserRow.email == f"new-{t}@x.org")
            ).all() == [1]
    with Session(engine.execution_options(schema_translate_map={None: "tenant_b"})) as session:
        assert (
            session.scalars(select(UserRow.id).where(UserRow.email == "new-tenant_a@x.org")).all()
            == []
        )


def test_no_key_material_in_messages_records_or_reprs(engine, live, store):
    import base64
    import json

    materials = []
    for f in store.directory.glob("*.json"):
        doc = json.loads(f.read_text())
        for k in doc.get("keys", ()):
            if k.get("material"):
                raw = base64.b64decode(k["material"])
                materials += [k["material"], raw.hex(), repr(raw)]
    assert materials
    texts = [repr(store), repr(live), repr(T.tenant_keyring("tenant_a"))]
    for exc_type, call in (
        (TenantRequired, lambda: T.resolve_tenant(None)),
        (UnknownTenant, lambda: live.keyrings("nobody")),
    ):
        with pytest.raises(exc_type) as info:
            call()
        texts.append(str(info.value))
    with engine.begin() as conn, pytest.raises(REFUSED) as info:
        conn.execute(insert(MEMOS).values(id=1, body="plaintext-marker"))
    texts.append(str(info.value))
    record = store.shred("tenant_b", by="ops")
    texts += [repr(record), (store.directory / T.SHRED_LOG).read_text()]
    for text_ in texts:
        assert "plaintext-marker" not in text_
        assert not any(m in text_ for m in materials)


_WORKER = """
import os, sys, time
import sealstore
from sqlalchemy import create_engine, insert, select
from sealstore import tenants as T
from sealstore.errors import SealstoreError, TenantShredded
from sealstore.keyring import Keyring, use_keyring
sys.path.insert(0, sys.argv[4])
from test_sqlalchemy_tenants import MEMOS

url, directory, role = sys.argv[1], sys.argv[2], sys.argv[3]
use_keyring(Keyring.generate())
use_keyring(Keyring.generate(), name="index")
keys = T.use_tenant_keys(T.TenantKeys(T.TenantStore(directory)))
keys.start(0.05)
engine = create_engine(url)
if role == "writer":  # tenant A, until the stop file appears; every value read back
    n = 0
    stop = os.path.join(directory, "..", "stop-writer")
    while not os.path.exists(stop):
        key = 10_000 + n
        with sealstore.tenant("tenant_a"), engine.begin() as conn:
            conn.execute(insert(MEMOS).values(id=key, body=f"p{key}"))
        with sealstore.tenant("tenant_a"), engine.connect() as conn:
            assert conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == key)).scalar() == f"p{key}"
        n += 1
        if n == 5:
            print("ready", flush=True)
    print("wrote", n, flush=True)
else:  # reads tenant B until its shredding reaches this process
    print("ready", flush=True)
    for _ in range(2000):
        try:
            with sealstore.tenant("tenant_b"), engine.connect() as conn:
                conn.execute(select(MEMOS.c.body).where(MEMOS.c.id == 1)).scalar()
        except SealstoreError as exc:
            cause = exc
            while not isinstance(cause, TenantShredded) and cause.__context__ is not None:
                cause = cause.__context__
            print("refused", type(cause).__name__, flush=True)
            break
        time.sleep(0.02)
keys.close()
"""


def test_shred_while_other_processes_work(engine, live, store):
    """Other processes: one writes and reads tenant A throughout, one reads tenant B; tenant B
    is shredded by a third party.  A's writer never fails; B's reader is refused once its
    refresh thread has seen the shredding."""
    import subprocess
    import sys as _sys

    with sealstore.tenant("tenant_b"), engine.begin() as conn:
        conn.execute(insert(MEMOS).values(id=1, body="b"))
    url = engine.url.render_as_string(hide_password=False)
    here = str(Path(__file__).resolve().parent)

    def spawn(role):
        return subprocess.Popen(
            [_sys.executable, "-c", _WORKER, url, str(store.directory), role, here],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    writer, reader = spawn("writer"), spawn("reader")
    try:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
        assert reader.stdout.readline().strip() == "ready", reader.stderr.read()
        T.TenantStore(store.directory).shred("tenant_b", by="test")
        assert reader.stdout.readline().split() == ["refused", "TenantShredded"], (
            reader.stderr.read()
        )
        (store.directory.parent / "stop-writer").touch()  # it wrote throughout, and still does
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert out.split()[0] == "wrote" and int(out.split()[1]) > 5
    finally:
        for proc in (writer, reader):
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)


# ---- tenant binding combined with row binding -----------------------------------------------


def _translated(engine, tenant: str):
    return engine.execution_options(schema_translate_map={None: tenant})


def test_row_bound_value_copied_between_tenant_schemas_with_equal_keys_is_refused(engine, live):
    """The issue's case: bind_row=True, equal primary keys, a value copied with plain SQL from
    tenant_a.tn_rusers.ssn into tenant_b.tn_rusers.ssn no longer opens in tenant B."""
    from sealstore.format import column_context, key_id_of

    for t, ssn in (("tenant_a", "111-22-3333"), ("tenant_b", "999-88-7777")):
        with Session(_translated(engine, t)) as session:  # ORM, schema_translate_map
            session.add(RowUser(id=1, ssn=ssn))
            session.commit()
    for t, ssn in (("tenant_a", "111-22-3333"), ("tenant_b", "999-88-7777")):
        with Session(_translated(engine, t)) as session:
            assert session.get(RowUser, 1).ssn == ssn
        with engine.connect() as conn:  # Core, the schema-qualified model of the same schema
            got = conn.execute(select(ROW_QUALIFIED[t].c.ssn)).scalar()
            assert isinstance(got, SealedRowValue)
            assert got.open(1) == ssn
            assert ssn not in repr(got)
    stored = _raw(engine, "tn_rusers", "ssn", 1, "tenant_a")
    ring_a = T.tenant_keyring("tenant_a")
    assert key_id_of(stored) == ring_a.primary.key_id
    ctx = column_context("tn_rusers", "ssn", (1,), tenant="tenant_a", schema="tenant_a")
    assert ctx.startswith(
        len(b"sealstore/v1/tenant-row").to_bytes(4, "big") + b"sealstore/v1/tenant-row"
    )
    assert ring_a.open(stored, ctx) == b"111-22-3333"

    _write_raw(engine, "tn_rusers", "ssn", 1, stored, "tenant_b")
    with Session(_translated(engine, "tenant_b")) as session, pytest.raises(REFUSED) as info:
        session.get(RowUser, 1)
    assert "111-22-3333" not in str(info.value)
    _refused(info.value)
    with engine.connect() as conn:
        got = conn.execute(select(ROW_QUALIFIED["tenant_b"].c.ssn)).scalar()
    with pytest.raises(SealstoreError) as info:
        got.open(1)
    assert "111-22-3333" not in str(info.value)
    with Session(_translated(engine, "tenant_a")) as session:  # the source row still opens
        assert session.get(RowUser, 1).ssn == "111-22-3333"


def test_row_bound_core_writes_seal_under_the_statements_tenant(engine, live):
    """seal_for_row() only records the row: the bind step seals under the tenant of the
    statement (schema-qualified table, or schema_translate_map), so a value prepared once
    cannot be bound to the wrong tenant."""
    for t in TENANTS:
        with engine.begin() as conn:
            conn.execute(insert(ROW_QUALIFIED[t]).values(
                id=5, ssn=seal_for_row(ROW_QUALIFIED[t].c.ssn, f"ssn {t[-1]}", 5)
            ))  # fmt: skip
    with engine.begin() as conn:
        conn = conn.execution_options(schema_translate_map={None: "tenant_a"})
        conn.execute(insert(ROW_USERS).values(id=6, ssn=seal_for_row(ROW_USERS.c.ssn, "six", 6)))
        with pytest.raises(REFUSED) as info:  # a plain value: no row, nothing written
            conn.execute(insert(ROW_USERS).values(id=7, ssn="plain"))
        _refused(info.value)
    for t in TENANTS:
        with engine.connect() as conn:
            conn = conn.execution_options(schema_translate_map={None: t})
            rows = conn.execute(select(ROW_USERS.c.id, ROW_USERS.c.ssn).order_by(ROW_USERS.c.id))
            opened = [(key, value.open(key)) for key, value in rows]
        expected = [(5, f"ssn {t[-1]}")] + ([(6, "six")] if t == "tenant_a" else [])
        assert opened == expected
    # the value sealed for row 5 copied to row 6 of the same tenant: refused
    _write_raw(engine, "tn_rusers", "ssn", 6, _raw(engine, "tn_rusers", "ssn", 5, "tenant_a"),
               "tenant_a")  # fmt: skip
    with Session(_translated(engine, "tenant_a")) as session, pytest.raises(REFUSED):
        session.get(RowUser, 6)


def test_row_bound_context_tenancy_refuses_copies_between_rows_and_tenants(engine, live):
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        session.add_all([RowMemo(id=1, body="a one"), RowMemo(id=2, body="a two")])
        session.commit()
    with Session(engine.execution_options(sealstore_tenant="tenant_b")) as session:
        session.add(RowMemo(id=3, body="b three"))
        session.commit()
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        mine = select(RowMemo).where(RowMemo.id < 3).order_by(RowMemo.id)
        assert [m.body for m in session.scalars(mine)] == ["a one", "a two"]
    with Session(engine.execution_options(sealstore_tenant="tenant_b")) as session:
        assert session.get(RowMemo, 3).body == "b three"
        # an ORM update and a primary-key change re-seal under the tenant, for the new row
        memo = session.get(RowMemo, 3)
        memo.body, memo.id = "b four", 4
        session.commit()
    with sealstore.tenant("tenant_b"), Session(engine) as session:
        assert session.get(RowMemo, 4).body == "b four"
    # copy between rows of one tenant: refused
    _write_raw(engine, "tn_rmemos", "body", 2, _raw(engine, "tn_rmemos", "body", 1))
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        with pytest.raises(REFUSED) as info:
            session.get(RowMemo, 2)
        assert "a one" not in str(info.value)
        _refused(info.value)
        assert session.get(RowMemo, 1).body == "a one"
    # tenant B's row 4 read as tenant A: refused (the tenant's key and context)
    with sealstore.tenant("tenant_a"), Session(engine) as session, pytest.raises(REFUSED):
        session.get(RowMemo, 4)
    # copy A's row 1 into B's row 4: refused in B
    _write_raw(engine, "tn_rmemos", "body", 4, _raw(engine, "tn_rmemos", "body", 1))
    with sealstore.tenant("tenant_b"), Session(engine) as session, pytest.raises(REFUSED):
        session.get(RowMemo, 4)


def test_row_bound_tenant_column_round_trip_and_copies_refused(engine, live):
    for key, t in ((1, "tenant_a"), (2, "tenant_b")):
        with sealstore.tenant(t), Session(engine) as session:
            session.add(RowNote(id=key, tenant_id=t, body=f"note {t}"))
            session.commit()
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        assert session.get(RowNote, 1).body == "note tenant_a"
        session.add(RowNote(id=3, tenant_id="tenant_b", body="forged"))
        with pytest.raises(TenantMismatch):
            session.commit()
    assert _count(engine, "tn_rnotes") == 2
    _write_raw(engine, "tn_rnotes", "body", 2, _raw(engine, "tn_rnotes", "body", 1))
    with sealstore.tenant("tenant_b"), Session(engine) as session, pytest.raises(REFUSED):
        session.get(RowNote, 2)


def test_row_bound_legacy_values_open_and_rotate_to_the_tenant_binding(
    engine, live, sealstore_tables
):
    from sealstore.format import key_id_of
    from sealstore.migrations.rotation.reseal import rotate
    from sealstore.migrations.rotation.spec import ColumnSpec
    from sealstore.migrations.rotation.status import status
    from sealstore.migrations.rotation.verify import verify

    with engine.begin() as conn:  # row-bound values written before tenancy
        for key in range(1, 5):
            value = seal_for_row(ROW_LEGACY.c.body, f"old {key}", key)
            conn.execute(insert(ROW_LEGACY).values(id=key, body=value))
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        session.add(RowMemo(id=10, body="new"))
        session.commit()
        assert session.get(RowMemo, 2).body == "old 2"  # ORM
    with sealstore.tenant("tenant_a"), engine.connect() as conn:  # Core
        got = conn.execute(select(ROW_MEMOS.c.body).where(ROW_MEMOS.c.id == 3)).scalar()
        assert got.open(3) == "old 3"
        with pytest.raises(SealstoreError):
            got.open(2)  # the legacy row context still binds the row
        strict = conn.execute(select(ROW_STRICT.c.body).where(ROW_STRICT.c.id == 3)).scalar()
        with pytest.raises(SealstoreError):
            strict.open(3)
    with sealstore.tenant("tenant_a"):
        spec = ColumnSpec.from_column(ROW_MEMOS.c.body)
        assert spec.row_bound
        (checked,) = verify(engine, [spec])
        assert (checked.checked, checked.failed) == (5, 0)
        (col,) = [c for c in status(engine, [spec]).columns if c.kind == "encrypted"]
        assert (col.tenant, col.legacy, col.not_primary) == ("tenant_a", 4, 4)
        (result,) = rotate(engine, [spec])
        assert result.failed == 0
        (col,) = [c for c in status(engine, [spec]).columns if c.kind == "encrypted"]
        assert (col.legacy, col.not_primary) == (0, 0)
    assert key_id_of(_raw(engine, "tn_rmemos", "body", 3)) == (
        T.tenant_keyring("tenant_a").primary.key_id
    )
    with sealstore.tenant("tenant_a"), engine.connect() as conn:
        strict = conn.execute(select(ROW_STRICT.c.body).where(ROW_STRICT.c.id == 3)).scalar()
        assert strict.open(3) == "old 3"  # now tenant-row bound
    with sealstore.tenant("tenant_a"), Session(engine) as session:
        assert [m.body for m in session.scalars(select(RowMemo).order_by(RowMemo.id))] == [
            "old 1", "old 2", "old 3", "old 4", "new"
        ]  # fmt: skip
    # re-sealed values are bound to their row: a copy between rows is refused
    _write_raw(engine, "tn_rmemos", "body", 2, _raw(engine, "tn_rmemos", "body", 1))
    with sealstore.tenant("tenant_a"), Session(engine) as session, pytest.raises(REFUSED):
        session.get(RowMemo, 2)
    with sealstore.tenant("tenant_b"), Session(engine) as session, pytest.raises(REFUSED):
        session.get(RowMemo, 1)


def test_row_bound_tenant_seal_and_open_outside_a_statement(engine, live):
    from sealstore.errors import ColumnBindingError

    body = ROW_MEMOS.c.body.type
    with sealstore.tenant("tenant_a"):
        sealed = body.seal("by hand", 9)
        assert body.open(sealed, 9) == "by hand"
        with pytest.raises(SealstoreError):
            body.open(sealed, 8)  # another row
        with pytest.raises(ColumnBindingError):
            body.seal("no row")
    with sealstore.tenant("tenant_b"), pytest.raises(SealstoreError):
        body.open(sealed, 9)  # another tenant
    with pytest.raises(TenantRequired):
        body.seal("no tenant", 9)
    # a value prepared for one row-bound column is refused by another, nothing written
    other = seal_for_row(ROW_QUALIFIED["tenant_a"].c.ssn, "123", 1)
    with sealstore.tenant("tenant_a"), engine.begin() as conn, pytest.raises(REFUSED) as info:
        conn.execute(insert(ROW_MEMOS).values(id=1, body=other))
    assert isinstance(_refused(info.value), ColumnBindingError)
    assert _count(engine, "tn_rmemos") == 0
