"""Tenants for objects, as an adversary, on S3 (moto and LocalStack) and Google Cloud Storage
(the emulator): a tenant's objects are sealed under its own keys and bound to it; copied with
a plain client under another tenant's prefix, or read under another tenant's context, they are
refused (WrongTenant); no tenant, or two that disagree, is refused before anything is sent;
objects written before tenancy keep opening and rotation binds them; one shredding erases the
tenant's objects on both stores (other tenants' readers and writers see nothing); a restored
pre-shredding backup of plain key files opens them again, and of KMS-wrapped keys does not."""

from __future__ import annotations

import shutil
import threading
import time
import uuid

import pytest
import sealstore
from sealstore import tenants as T
from sealstore.adapters.objects.tenancy import ObjectTenancy
from sealstore.errors import (
    KeySourceError,
    TenantMismatch,
    TenantRequired,
    TenantShredded,
    UnknownKeyId,
    WrongLocation,
    WrongTenant,
)
from sealstore.keyring import Keyring
from sealstore.stream import parse_object_header

TENANTS = ("tenant_a", "tenant_b")
SECRET = b"tenant-object-secret-5d1e"


# ---- the stores: one interface over S3 and GCS -----------------------------------------------


class S3Side:
    def __init__(self, name: str, endpoint: str) -> None:
        from fixtures_s3 import make_client

        self.name, self.endpoint, self._make = name, endpoint, make_client
        self.raw = make_client(endpoint)
        self.bucket = f"t-{uuid.uuid4().hex[:20]}"
        self.raw.create_bucket(Bucket=self.bucket)

    def client(self, keyring, **kw):
        from sealstore.adapters.s3 import encrypt_client

        return encrypt_client(self._make(self.endpoint), keyring, **kw)

    def put(self, c, key, data):
        c.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, c, key):
        return c.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def stored(self, key):
        return self.raw.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def exists(self, key):
        from botocore.exceptions import ClientError

        try:
            self.raw.head_object(Bucket=self.bucket, Key=key)
        except ClientError:
            return False
        return True

    def raw_copy(self, src, dst):
        self.raw.copy_object(Bucket=self.bucket, Key=dst,
                             CopySource={"Bucket": self.bucket, "Key": src})  # fmt: skip

    def copy(self, c, src, dst):
        c.copy_object(Bucket=self.bucket, Key=dst, CopySource={"Bucket": self.bucket, "Key": src})

    def rotate(self, c, prefix):
        from sealstore.adapters.s3.rotate import rotate_objects

        return rotate_objects(c, self.bucket, prefix)


class GcsSide:
    name = "gcs"

    def __init__(self, emulator) -> None:
        from fixtures_gcs import make_gcs_client

        self.emulator, self._make = emulator, make_gcs_client
        self.raw = make_gcs_client(emulator)
        self.bucket = f"t-{uuid.uuid4().hex[:20]}"
        self.raw.create_bucket(self.bucket)

    def client(self, keyring, **kw):
        from sealstore.adapters.gcs import encrypt_client

        return encrypt_client(self._make(self.emulator), keyring, **kw)

    def put(self, c, key, data):
        c.bucket(self.bucket).blob(key).upload_from_string(data)

    def get(self, c, key):
        return c.bucket(self.bucket).blob(key).download_as_bytes()

    def stored(self, key):
        return self.raw.bucket(self.bucket).blob(key).download_as_bytes()

    def exists(self, key):
        return self.raw.bucket(self.bucket).blob(key).exists()

    def raw_copy(self, src, dst):
        b = self.raw.bucket(self.bucket)
        b.copy_blob(b.blob(src), b, dst)

    def copy(self, c, src, dst):
        b = c.bucket(self.bucket)
        b.copy_blob(b.blob(src), b, dst)

    def rotate(self, c, prefix):
        from sealstore.adapters.objects.rotation import rotate_objects

        return rotate_objects(c.sealstore.engine, c.sealstore.store, self.bucket, prefix)


@pytest.fixture(params=["moto", "localstack", "gcs"])
def side(request):
    if request.param == "gcs":
        return GcsSide(request.getfixturevalue("gcs_emulator"))
    fixture = "s3_endpoint" if request.param == "moto" else "localstack_endpoint"
    return S3Side(request.param, request.getfixturevalue(fixture))


@pytest.fixture
def store(tmp_path):
    """A plain tenant store with tenant_a and tenant_b, served by this process's TenantKeys."""
    s = T.TenantStore(tmp_path / "tenant-keys")
    for t in TENANTS:
        s.create(t)
    keys = T.use_tenant_keys(T.TenantKeys(s))
    try:
        yield s
    finally:
        keys.close()
        T.use_tenant_keys(T.TenantKeys())


@pytest.fixture(scope="module")
def own():
    """The clients' own keyring: objects from before tenancy."""
    return Keyring.generate()


def key_id(side, key) -> int:
    return parse_object_header(side.stored(key)[:76]).key_id


# ---- sealed under the tenant's keys, bound to the tenant ------------------------------------


def test_objects_are_sealed_under_their_tenants_keys(side, store, own):
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    for t in TENANTS:
        side.put(c, f"tenants/{t}/doc", SECRET + t.encode())
    for t in TENANTS:
        assert side.get(c, f"tenants/{t}/doc") == SECRET + t.encode()
        assert SECRET not in side.stored(f"tenants/{t}/doc")
    ring_a, ring_b = (T.tenant_keyring(t) for t in TENANTS)
    a = key_id(side, "tenants/tenant_a/doc")
    assert a in ring_a and a not in ring_b and a not in own
    assert key_id(side, "tenants/tenant_b/doc") in ring_b


@pytest.mark.parametrize("bind_location", [True, False])
def test_copy_to_another_tenants_prefix_with_a_plain_client_is_refused(
    side, store, own, bind_location
):
    c = side.client(own, tenant_prefix="tenants/{tenant}/", bind_location=bind_location)
    side.put(c, "tenants/tenant_a/doc", SECRET)
    side.raw_copy("tenants/tenant_a/doc", "tenants/tenant_b/doc")
    with pytest.raises(WrongTenant) as info:
        side.get(c, "tenants/tenant_b/doc")
    assert "tenant_b" in str(info.value) and SECRET.decode() not in str(info.value)
    # the same bytes under the same tenant at another key: the location binding refuses
    side.raw_copy("tenants/tenant_a/doc", "tenants/tenant_a/moved")
    if bind_location:
        with pytest.raises(WrongLocation):
            side.get(c, "tenants/tenant_a/moved")
    assert side.get(c, "tenants/tenant_a/doc") == SECRET


def test_the_same_key_under_another_tenant_via_the_context_is_refused(side, store, own):
    c = side.client(own, tenant=True)
    with sealstore.tenant("tenant_a"):
        side.put(c, "shared/doc", SECRET)
    with sealstore.tenant("tenant_b"), pytest.raises(WrongTenant):
        side.get(c, "shared/doc")
    b_client = side.client(own, tenant="tenant_b")
    with pytest.raises(WrongTenant):
        side.get(b_client, "shared/doc")
    with sealstore.tenant("tenant_a"):
        assert side.get(c, "shared/doc") == SECRET
    assert side.get(side.client(own, tenant="tenant_a"), "shared/doc") == SECRET


def test_a_copy_through_the_client_is_resealed_for_the_destinations_tenant(side, store, own):
    c = side.client(own, tenant_prefix="tenants/{tenant}/", bind_location=False)
    side.put(c, "tenants/tenant_a/doc", SECRET)
    side.copy(c, "tenants/tenant_a/doc", "tenants/tenant_b/doc")
    assert key_id(side, "tenants/tenant_b/doc") in T.tenant_keyring("tenant_b")
    assert side.get(c, "tenants/tenant_b/doc") == SECRET
    with sealstore.tenant("tenant_a"), pytest.raises(TenantMismatch):
        side.copy(c, "tenants/tenant_a/doc", "tenants/tenant_b/other")
    assert not side.exists("tenants/tenant_b/other")


def test_no_tenant_or_two_that_disagree_is_refused_before_anything_is_sent(side, store, own):
    ctx = side.client(own, tenant=True)
    with pytest.raises(TenantRequired):
        side.put(ctx, "x/none", SECRET)
    ruled = side.client(own, tenant_prefix="tenants/{tenant}/")
    with pytest.raises(TenantRequired):
        side.put(ruled, "elsewhere/doc", SECRET)  # the rule does not cover it, no other source
    with sealstore.tenant("tenant_b"), pytest.raises(TenantMismatch):
        side.put(ruled, "tenants/tenant_a/doc", SECRET)
    fixed = side.client(own, tenant="tenant_a")
    with sealstore.tenant("tenant_b"), pytest.raises(TenantMismatch):
        side.put(fixed, "y/doc", SECRET)
    with pytest.raises(TenantRequired):
        side.put(ruled, "tenants/bad.name/doc", SECRET)
    for key in ("x/none", "elsewhere/doc", "tenants/tenant_a/doc", "y/doc"):
        assert not side.exists(key)
    with pytest.raises(TenantRequired):
        side.get(ctx, "x/none")
    # precedence: the key rule, then the client's tenant, then the context
    with sealstore.tenant("tenant_b"):
        side.put(ruled, "elsewhere/doc", SECRET)  # outside the rule: the context's tenant
    assert key_id(side, "elsewhere/doc") in T.tenant_keyring("tenant_b")


def test_tenancy_settings_are_checked():
    with pytest.raises(ValueError, match="exactly one"):
        ObjectTenancy(prefix="tenants/")
    with pytest.raises(TypeError):
        ObjectTenancy(prefix=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ObjectTenancy(tenant="a/b")
    rule = ObjectTenancy(prefix=lambda key: key.split("-")[0] if "-" in key else None)
    assert rule.from_key("acme-report") == "acme" and rule.from_key("plain") is None
    assert ObjectTenancy.of(None, None) is None


# ---- objects written before tenancy ----------------------------------------------------------


def test_legacy_objects_open_and_rotation_binds_them_to_the_tenant(side, store, own):
    plain = side.client(own)
    for i in range(3):
        side.put(plain, f"tenants/tenant_a/old{i}", SECRET + bytes([i]))
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    strict = side.client(own, tenant_prefix="tenants/{tenant}/", tenant_legacy=False)
    assert side.get(c, "tenants/tenant_a/old0") == SECRET + b"\0"  # recognised by its key id
    with pytest.raises(WrongTenant):
        side.get(strict, "tenants/tenant_a/old0")
    report = side.rotate(c, "tenants/tenant_a/")
    assert (report.scanned, report.resealed, report.failures) == (3, 3, [])
    assert report.primary == T.tenant_keyring("tenant_a").primary.id_hex
    for i in range(3):
        assert key_id(side, f"tenants/tenant_a/old{i}") in T.tenant_keyring("tenant_a")
        assert side.get(strict, f"tenants/tenant_a/old{i}") == SECRET + bytes([i])
    again = side.rotate(c, "tenants/tenant_a/")
    assert (again.resealed, again.current) == (0, 3)
    # re-sealed, it is bound: a copy under tenant_b is refused now
    side.raw_copy("tenants/tenant_a/old1", "tenants/tenant_b/old1")
    with pytest.raises(WrongTenant):
        side.get(c, "tenants/tenant_b/old1")


# ---- one shredding erases both ---------------------------------------------------------------


def test_shredding_refuses_the_tenant_while_other_tenants_work(side, store, own):
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    for i in range(4):
        for t in TENANTS:
            side.put(c, f"tenants/{t}/doc{i}", SECRET + t.encode())
    errors: list[BaseException] = []
    done = threading.Event()
    rounds = [0]

    def worker(n: int) -> None:
        try:
            while not done.is_set() or rounds[0] < 8:
                side.put(c, f"tenants/tenant_b/w{n}", SECRET + bytes([n]))
                assert side.get(c, f"tenants/tenant_b/w{n}") == SECRET + bytes([n])
                assert side.get(c, f"tenants/tenant_b/doc{n}") == SECRET + b"tenant_b"
                rounds[0] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    record = store.shred("tenant_a", by="test")
    T.get_tenant_keys().refresh()  # what the refresh thread does
    done.set()
    for t in threads:
        t.join(120)
    assert errors == []
    assert record.key_ids
    for i in range(4):
        with pytest.raises(TenantShredded):
            side.get(c, f"tenants/tenant_a/doc{i}")
        assert side.get(c, f"tenants/tenant_b/doc{i}") == SECRET + b"tenant_b"
    with pytest.raises(TenantShredded):
        side.put(c, "tenants/tenant_a/new", SECRET)
    # a fresh process (a new TenantKeys over the same store) refuses it too
    T.use_tenant_keys(T.TenantKeys(store))
    with pytest.raises(TenantShredded):
        side.get(side.client(own, tenant="tenant_a"), "tenants/tenant_a/doc0")


def test_a_legacy_object_is_erased_by_shredding_only_once_rotated(side, store, own):
    """The documented limit: an object written before tenancy is under the client's own keys,
    which a shredding does not destroy; rotated to the tenant binding, it goes with the
    tenant."""
    plain = side.client(own)
    side.put(plain, "tenants/tenant_a/kept", SECRET)
    side.put(plain, "tenants/tenant_a/rotated", SECRET)
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    side.put(c, "tenants/tenant_a/other", b"filler")
    from sealstore.adapters.objects.engine import ObjectSealing

    if isinstance(side, S3Side):
        from sealstore.adapters.s3.rotate import sealing_of
        from sealstore.adapters.s3.store import S3Store

        engine, raw_store = sealing_of(c), S3Store(c)
    else:
        engine, raw_store = c.sealstore.engine, c.sealstore.store
    assert isinstance(engine, ObjectSealing)
    from sealstore.adapters.objects.rotation import rotate_object

    assert rotate_object(engine, raw_store, side.bucket, "tenants/tenant_a/rotated") == "resealed"
    store.shred("tenant_a")
    T.get_tenant_keys().refresh()
    for key in ("tenants/tenant_a/kept", "tenants/tenant_a/rotated"):
        with pytest.raises(TenantShredded):
            side.get(c, key)  # a tenant-aware client refuses both
    assert side.get(plain, "tenants/tenant_a/kept") == SECRET  # not erased: never rotated
    with pytest.raises(UnknownKeyId):
        side.get(plain, "tenants/tenant_a/rotated")  # erased with the tenant's keys


def test_a_live_process_refuses_a_shredded_tenant_after_its_refresh(side, store, own):
    c = side.client(own, tenant=True)
    with sealstore.tenant("tenant_a"):
        side.put(c, "doc", SECRET)
    keys = T.get_tenant_keys()
    keys.start(refresh_interval=0.05)
    store.shred("tenant_a")
    refused = None
    for _ in range(600):  # until the refresh thread has run (bounded, not timed)
        try:
            with sealstore.tenant("tenant_a"):
                side.get(c, "doc")
        except TenantShredded as exc:
            refused = exc
            break
        time.sleep(0.05)
    keys.stop()
    assert isinstance(refused, TenantShredded)


def test_shredding_covers_both_stores_at_once(store, own, s3_endpoint, gcs_emulator):
    s3 = S3Side("moto", s3_endpoint)
    gcs = GcsSide(gcs_emulator)
    clients = [(s, s.client(own, tenant_prefix="tenants/{tenant}/")) for s in (s3, gcs)]
    for s, c in clients:
        for t in TENANTS:
            s.put(c, f"tenants/{t}/doc", SECRET)
    store.shred("tenant_a")
    T.get_tenant_keys().refresh()
    for s, c in clients:
        with pytest.raises(TenantShredded):
            s.get(c, "tenants/tenant_a/doc")
        assert s.get(c, "tenants/tenant_b/doc") == SECRET


# ---- the threat model: a backup of the key files --------------------------------------------


def _restore(tmp_path, store, **kw):
    """A new process over the pre-shredding copy of the key directory."""
    restored = T.TenantStore(tmp_path / "backup-keys", **kw)
    (tmp_path / "backup-keys" / T.SHRED_LOG).unlink(missing_ok=True)
    return T.use_tenant_keys(T.TenantKeys(restored))


def test_a_backup_of_plain_key_files_opens_the_shredded_tenants_objects(side, store, own,
                                                                        tmp_path):  # fmt: skip
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    side.put(c, "tenants/tenant_a/doc", SECRET)
    shutil.copytree(store.directory, tmp_path / "backup-keys")
    store.shred("tenant_a")
    T.get_tenant_keys().refresh()
    with pytest.raises(TenantShredded):
        side.get(c, "tenants/tenant_a/doc")
    _restore(tmp_path, store)
    assert side.get(c, "tenants/tenant_a/doc") == SECRET  # the documented limit


def test_a_backup_of_kms_wrapped_keys_does_not_open_them(side, own, tmp_path, localstack_endpoint):
    """Per-tenant KMS keys: shredding disables the tenant's KMS key, and a restored backup of
    the key files no longer unwraps the tenant's keys, on S3 and GCS alike.  The KMS is
    LocalStack's, which refuses a disabled key at once (moto's does not enforce DisableKey:
    tests/adapters/sqlalchemy/test_sqlalchemy_tenants.py stands in for the end of the pending
    window there)."""
    import boto3

    kms = boto3.client(
        "kms", endpoint_url=localstack_endpoint, region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
    )  # fmt: skip
    wrapping = T.KmsTenantWrapping(kms, alias_prefix=f"alias/st-{uuid.uuid4().hex[:8]}-")
    store = T.TenantStore(tmp_path / "kms-keys", kms=wrapping)
    for t in TENANTS:
        store.create(t)
    keys = T.use_tenant_keys(T.TenantKeys(store))
    try:
        c = side.client(own, tenant_prefix="tenants/{tenant}/")
        for t in TENANTS:
            side.put(c, f"tenants/{t}/doc", SECRET)
        shutil.copytree(store.directory, tmp_path / "backup-keys")
        store.shred("tenant_a")
        keys.refresh()
        restored = T.TenantStore(tmp_path / "backup-keys", kms=wrapping)
        (tmp_path / "backup-keys" / T.SHRED_LOG).unlink(missing_ok=True)
        T.use_tenant_keys(T.TenantKeys(restored))
        with pytest.raises(KeySourceError) as info:
            side.get(c, "tenants/tenant_a/doc")
        assert SECRET.decode() not in str(info.value)
        assert side.get(c, "tenants/tenant_b/doc") == SECRET
    finally:
        T.use_tenant_keys(T.TenantKeys())


# ---- the command: sealstore rotate --objects URL --tenant NAME -------------------------------


def test_rotate_objects_command_binds_legacy_objects_to_the_tenant(
    tmp_path, monkeypatch, capsys, gcs_emulator, s3_endpoint
):
    import json
    import os

    from sealstore.cli import main
    from sealstore.config import load_config

    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "sealstore-test")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert main(["-c", str(config), "keys", "init"]) == 0
    own = load_config(str(config)).load_keyring()
    tdir = tmp_path / "tenant-keys"
    s = T.TenantStore(tdir)
    for t in TENANTS:
        s.create(t)
    sides = [S3Side("moto", s3_endpoint), GcsSide(gcs_emulator)]
    for side in sides:
        plain = side.client(own)
        for i in range(3):
            side.put(plain, f"tenants/tenant_a/{i}", SECRET + bytes([i]))
    capsys.readouterr()
    code = main(["-c", str(config), "rotate", "--objects", f"s3://{sides[0].bucket}/tenants/tenant_a/",
                 "--objects", f"gs://{sides[1].bucket}/tenants/tenant_a/", "--tenant", "tenant_a",
                 "--tenants-dir", str(tdir), "--json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    docs = json.loads(out)["objects"]
    assert [(d["resealed"], d["complete"]) for d in docs] == [(3, True), (3, True)]
    keys = T.use_tenant_keys(T.TenantKeys(s))
    try:
        for side in sides:
            strict = side.client(own, tenant_prefix="tenants/{tenant}/", tenant_legacy=False)
            for i in range(3):
                assert key_id(side, f"tenants/tenant_a/{i}") in T.tenant_keyring("tenant_a")
                assert side.get(strict, f"tenants/tenant_a/{i}") == SECRET + bytes([i])
    finally:
        keys.close()
        T.use_tenant_keys(T.TenantKeys())


@pytest.mark.parametrize("backend", ["moto", "localstack"])
def test_multipart_uploads_and_parallel_downloads_are_tenant_bound(request, backend, store, own):
    import io

    from boto3.s3.transfer import TransferConfig

    fixture = "s3_endpoint" if backend == "moto" else "localstack_endpoint"
    side = S3Side(backend, request.getfixturevalue(fixture))
    c = side.client(own, tenant_prefix="tenants/{tenant}/")
    cfg = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    data = (SECRET * ((11 << 20) // len(SECRET) + 1))[: 11 << 20]
    c.upload_fileobj(io.BytesIO(data), side.bucket, "tenants/tenant_a/big", Config=cfg)
    assert key_id(side, "tenants/tenant_a/big") in T.tenant_keyring("tenant_a")
    out = io.BytesIO()
    c.download_fileobj(side.bucket, "tenants/tenant_a/big", out, Config=cfg)
    assert out.getvalue() == data
    side.raw_copy("tenants/tenant_a/big", "tenants/tenant_b/big")
    with pytest.raises(WrongTenant):
        c.download_fileobj(side.bucket, "tenants/tenant_b/big", io.BytesIO(), Config=cfg)
    with sealstore.tenant("tenant_b"), pytest.raises(TenantMismatch):
        c.upload_fileobj(io.BytesIO(data), side.bucket, "tenants/tenant_a/big2", Config=cfg)
    assert not side.exists("tenants/tenant_a/big2")
    # a client that takes its tenant from the block: the transfer's worker threads have no
    # block of their own, the caller's tenant stands for it
    ctx = side.client(own, tenant=True)
    with sealstore.tenant("tenant_b"):
        ctx.upload_fileobj(io.BytesIO(data), side.bucket, "ctx/big", Config=cfg)
        out = io.BytesIO()
        ctx.download_fileobj(side.bucket, "ctx/big", out, Config=cfg)
        assert out.getvalue() == data
    assert key_id(side, "ctx/big") in T.tenant_keyring("tenant_b")
    with pytest.raises(TenantRequired):
        ctx.download_fileobj(side.bucket, "ctx/big", io.BytesIO(), Config=cfg)
    with sealstore.tenant("tenant_a"), pytest.raises(WrongTenant):
        ctx.download_fileobj(side.bucket, "ctx/big", io.BytesIO(), Config=cfg)
