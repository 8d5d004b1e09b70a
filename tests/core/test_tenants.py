"""The tenant store and the ``sealstore tenants`` commands (issue #28): names, keyrings per
tenant, the shredding log, a shredding killed half-way (SIGKILL) finished by running it again,
the live cache's refresh.  Columns over tenants: tests/adapters/sqlalchemy/test_tenants.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from sealstore import tenants as T
from sealstore.errors import (
    KeyNotUsable,
    SharedIndexKey,
    TenantError,
    TenantRequired,
    TenantShredded,
    UnknownTenant,
)
from sealstore.keyring import Keyring


@pytest.fixture
def store(tmp_path):
    return T.TenantStore(tmp_path / "tenants")


def test_create_gives_each_tenant_two_keyrings_of_its_own(store):
    a_data, a_index = store.create("a")
    b_data, b_index = store.create("b")
    ids = [set(r._keys) for r in (a_data, a_index, b_data, b_index)]
    assert all(not (x & y) for i, x in enumerate(ids) for y in ids[i + 1 :])
    assert store.names() == ["a", "b"]
    with pytest.raises(TenantError):
        store.create("a")
    with pytest.raises(UnknownTenant):
        store.load("c")
    data, index = store.load("a")
    assert data.primary.key_id == a_data.primary.key_id
    assert index.primary.key_id == a_index.primary.key_id


def test_rotate_one_tenant_leaves_the_others(store):
    store.create("a")
    store.create("b")
    before_b = store.load("b")[0].primary.key_id
    key, index_key = store.rotate("a")
    data, index = store.load("a")
    assert data.primary.id_hex == key and index.primary.id_hex == index_key
    assert len(data) == 2 and len(index) == 2
    assert store.load("b")[0].primary.key_id == before_b


def test_shred_destroys_material_and_records_who_when_what(store):
    data, index = store.create("a")
    store.create("b")
    sealed = data.seal(b"secret", b"ctx")
    record = store.shred("a", by="alice")
    assert (record.tenant, record.by) == ("a", "alice")
    assert record.key_ids == (data.primary.id_hex,)
    assert record.index_key_ids == (index.primary.id_hex,)
    for name in ("a.keys.json", "a.index.json"):
        doc = json.loads((store.directory / name).read_text())
        assert all(k["state"] == "destroyed" for k in doc["keys"])
        assert all("material" not in k and "wrapped" not in k for k in doc["keys"])
    log_text = (store.directory / T.SHRED_LOG).read_text()
    assert "alice" in log_text and data.primary.id_hex in log_text
    with pytest.raises(TenantShredded):
        store.load("a")
    assert isinstance(TenantShredded("x"), KeyNotUsable)
    assert store.names() == ["b"]
    assert store.load("b")[0].primary  # untouched
    # the same record when run again (nothing left to do)
    assert store.shred("a") == record
    with pytest.raises(UnknownTenant):
        store.shred("nobody")
    assert sealed  # (the value itself is only as good as the keys: see the column tests)


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from sealstore import tenants as T
    from sealstore.keysources.file import KeyFile

    real = KeyFile._store

    def store(self, records, *, create):
        if str(self.path).endswith("a.index.json"):
            os.kill(os.getpid(), signal.SIGKILL)  # half-way: the data keys are destroyed
        return real(self, records, create=create)

    KeyFile._store = store
    T.TenantStore(sys.argv[1]).shred("a", by="killed")
    """
)


def test_shred_killed_half_way_refuses_the_tenant_and_finishes_when_run_again(store):
    store.create("a")
    store.create("b")
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(store.directory)], capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL
    record = store.shredded("a")
    assert record is not None and record.by == "killed"  # recorded before anything else
    with pytest.raises(TenantShredded):
        store.load("a")
    index_doc = json.loads((store.directory / "a.index.json").read_text())
    assert any(k["state"] != "destroyed" for k in index_doc["keys"])  # left half-way
    assert store.shred("a") == record  # finishes the job
    index_doc = json.loads((store.directory / "a.index.json").read_text())
    assert all(k["state"] == "destroyed" and "material" not in k for k in index_doc["keys"])
    assert store.load("b")


def test_live_cache_loads_once_and_drops_a_shredded_tenant(store):
    store.create("a")
    store.create("b")
    keys = T.TenantKeys(store)
    try:
        ring = keys.keyrings("a")[0]
        assert keys.keyrings("a")[0] is ring  # cached: no store read per value
        sealed = ring.seal(b"v", b"ctx")
        T.TenantStore(store.directory).shred("a")  # another process
        assert keys.keyrings("a")[0] is ring  # until the refresh
        keys.refresh()
        assert ring.closed
        with pytest.raises(TenantShredded):
            keys.keyrings("a")
        with pytest.raises(KeyNotUsable):
            ring.open(sealed, b"ctx")
        assert keys.keyrings("b")
    finally:
        keys.close()


def test_register_refuses_shared_index_keys():
    keys = T.TenantKeys()
    ring = Keyring.generate()
    with pytest.raises(SharedIndexKey):
        keys.register("a", ring, ring)
    with pytest.raises(UnknownTenant):
        keys.keyrings("a")


def test_tenant_block_nests_and_resets():
    assert T.current_tenant() is None
    with T.tenant("a"):
        with T.tenant("b"):
            assert T.current_tenant() == "b"
        assert T.current_tenant() == "a"
    assert T.current_tenant() is None
    with pytest.raises(TenantRequired):
        T.resolve_tenant(None)


def _cli(*args, env_dir=None):
    env = dict(os.environ)
    if env_dir:
        env["SEALSTORE_TENANTS_DIR"] = str(env_dir)
    return subprocess.run(
        [sys.executable, "-m", "sealstore", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip


def test_tenants_commands(tmp_path):
    d = tmp_path / "t"
    made = _cli("tenants", "create", "acme", "--json", env_dir=d)
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["tenant"] == "acme" and "warning" in made.stderr  # plain keys said loudly
    rotated = _cli("tenants", "rotate", "acme", "--json", env_dir=d)
    assert rotated.returncode == 0 and json.loads(rotated.stdout)["key"] != doc["key"]
    refused = _cli("tenants", "shred", "acme", env_dir=d)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "--yes" in refused.stderr
    shredded = _cli("tenants", "shred", "acme", "--yes", "--by", "ops", "--json", env_dir=d)
    assert shredded.returncode == 0, shredded.stderr
    assert json.loads(shredded.stdout)["key_ids"] == [doc["key"], json.loads(rotated.stdout)["key"]]
    listed = json.loads(_cli("tenants", "list", "--json", env_dir=d).stdout)
    assert listed[0]["state"] == "shredded" and listed[0]["by"] == "ops"
    bad = _cli("tenants", "create", "a/b", env_dir=d)
    assert bad.returncode == 1 and "invalid tenant name" in bad.stderr
    nodir = _cli("tenants", "list")
    assert nodir.returncode == 1 and "SEALSTORE_TENANTS_DIR" in nodir.stderr
    for out in (made, rotated, shredded):
        for f in ("acme.keys.json",):
            material = [k.get("material") for k in json.loads((d / f).read_text())["keys"]]
            assert all(m is None or m not in out.stdout + out.stderr for m in material)
