"""Key sources: the local key file, master-key and AWS KMS wrapping (moto), the database registry."""

from __future__ import annotations

import base64
import json
import os
import stat

import boto3
import pytest
from moto import mock_aws
from sealstore.errors import (
    ConcurrentKeyChange,
    ConfigError,
    InsecureKeyFile,
    InvalidKeyring,
    KeyNotUsable,
    KeySourceError,
    UnknownKeyId,
)
from sealstore.format import Suite
from sealstore.keysources.file import KeyFile
from sealstore.keyring import KeyState
from sealstore.wrapping.kms import KmsWrapper
from sealstore.keysources.database import DatabaseKeySource, sealstore_keys, sealstore_keys_columns
from sealstore.wrapping import MasterKeyWrapper
from sqlalchemy import create_engine, select

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- local key file ---------------------------------------------------------------------------------


@posix_only
def test_key_file_written_0600_and_round_trips(tmp_path):
    path = tmp_path / "keys.json"
    old_umask = os.umask(0)  # even a permissive umask must not widen the file
    try:
        kr = KeyFile(path).init(suite="AEGIS-128X2", tag_size=16)
    finally:
        os.umask(old_umask)
    assert mode(path) == 0o600
    value = kr.seal(b"dev data", b"ctx")
    loaded = KeyFile(path).load(tag_size=16)
    assert loaded.primary.key_id == kr.primary.key_id and loaded.primary.suite is Suite.AEGIS_128X2
    assert loaded.open(value, b"ctx") == b"dev data"
    doc = json.loads(path.read_text())
    assert doc["sealstore_keyring"] == 1 and doc["wrapping"] == {"type": "none"}
    assert doc["keys"][0]["id"] == kr.primary.id_hex
    assert base64.b64decode(doc["keys"][0]["material"]) == kr.primary.reveal_material()


@posix_only
@pytest.mark.parametrize("bad_mode", [0o640, 0o604, 0o644, 0o660, 0o602, 0o610])
def test_key_file_refused_when_group_or_world_can_access(tmp_path, bad_mode):
    path = tmp_path / "keys.json"
    KeyFile(path).init()
    os.chmod(path, bad_mode)
    with pytest.raises(InsecureKeyFile, match=f"{bad_mode:04o}.*chmod 600") as info:
        KeyFile(path).load()
    assert isinstance(info.value, PermissionError)
    os.chmod(path, 0o600)
    KeyFile(path).load()
    os.chmod(path, 0o400)  # read-only for the owner is fine
    KeyFile(path).load()


def test_key_file_rotate_persists_and_rewrites_0600(tmp_path):
    path = tmp_path / "keys.json"
    source = KeyFile(path)
    kr = source.init()
    v = kr.seal(b"one")
    new = source.rotate(kr)
    assert mode(path) == 0o600
    again = KeyFile(path).load()
    assert again.primary.key_id == new.key_id
    assert again.get(fmt_id(v)).state is KeyState.ACTIVE
    assert again.open(v) == b"one"
    assert again.get(fmt_id(v)).rotated_at is not None
    kr.retire(fmt_id(v))
    kr.destroy(fmt_id(v))
    source.save(kr)
    reloaded = KeyFile(path).load()
    assert reloaded.get(fmt_id(v)).state is KeyState.DESTROYED
    with pytest.raises(KeyNotUsable):
        reloaded.open(v)
    assert "material" not in json.loads(path.read_text())["keys"][0]


def fmt_id(value: bytes) -> int:
    return int.from_bytes(value[2:6], "big")


def test_key_file_init_refuses_overwrite_and_missing_file_errors(tmp_path):
    path = tmp_path / "keys.json"
    KeyFile(path).init()
    with pytest.raises(KeySourceError, match="already"):
        KeyFile(path).init()
    with pytest.raises(KeySourceError, match="does not exist"):
        KeyFile(tmp_path / "missing.json").load()


def _write(path, doc) -> None:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    os.chmod(path, 0o600)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d["keys"][0].update(material="AAAA"), r"keys\.0\.material: .*32 bytes"),
        (
            lambda d: d["keys"][0].update(material="!!notbase64"),
            r"keys\.0\.material: not valid base64",
        ),
        (lambda d: d["keys"][0].update(id="XYZ"), r"keys\.0\.id: must be 8 lowercase hex"),
        (lambda d: d["keys"][0].update(suite="AEGIS-512"), r"keys\.0\.suite: unknown suite"),
        (lambda d: d["keys"][0].update(state="sleeping"), r"keys\.0\.state"),
        (lambda d: d["keys"][0].update(created_at="yesterday"), r"keys\.0\.created_at"),
        (lambda d: d["keys"][0].pop("material"), r"keys\.0: .*exactly one of"),
        (lambda d: d.update(sealstore_keyring=3), r"sealstore_keyring"),
        (lambda d: d.update(sealstore_keyring=2), r"format 2 needs .metadata_key"),
        (lambda d: d.update(extra=1), r"extra: Extra inputs"),
        (lambda d: d["keys"].append(dict(d["keys"][0])), r"duplicate key id"),
    ],
)
def test_key_file_validation_names_the_field(tmp_path, edit, match):
    path = tmp_path / "keys.json"
    KeyFile(path).init()
    doc = json.loads(path.read_text())
    edit(doc)
    _write(path, doc)
    with pytest.raises(ConfigError, match=match) as info:
        KeyFile(path).load()
    assert str(path) in str(info.value)


def test_key_file_not_json_and_two_primaries(tmp_path):
    path = tmp_path / "keys.json"
    _write(path, "{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        KeyFile(path).load()
    KeyFile(tmp_path / "k2.json").init()
    doc = json.loads((tmp_path / "k2.json").read_text())
    second = dict(doc["keys"][0], id="00000001")
    doc["keys"].append(second)
    _write(path, doc)
    with pytest.raises(InvalidKeyring, match="exactly one primary"):
        KeyFile(path).load()


# ---- master-key wrapping ----------------------------------------------------------------------------


def test_master_key_wrapped_file(tmp_path):
    mk = MasterKeyWrapper.create_file(tmp_path / "master.key")
    assert mode(mk) == 0o600
    wrapper = MasterKeyWrapper.from_file(mk)
    path = tmp_path / "keys.json"
    kr = KeyFile(path, wrapper).init()
    v = kr.seal(b"wrapped")
    doc = json.loads(path.read_text())
    assert doc["wrapping"] == {"type": "master-key"}
    assert "material" not in doc["keys"][0] and "wrapped" in doc["keys"][0]
    assert kr.primary.reveal_material().hex() not in path.read_text()
    assert KeyFile(path, MasterKeyWrapper.from_file(mk)).load().open(v) == b"wrapped"
    with pytest.raises(KeySourceError, match="does not unwrap"):
        KeyFile(path, MasterKeyWrapper(os.urandom(32))).load()
    with pytest.raises(KeySourceError, match="'master-key'.*'none'"):
        KeyFile(path).load()
    with pytest.raises(KeySourceError, match="already exists"):
        MasterKeyWrapper.create_file(mk)


def test_master_key_blob_bound_to_key_id():
    w = MasterKeyWrapper(os.urandom(32))
    blob = w.wrap(1, bytes(32))
    assert w.unwrap(1, blob) == bytes(32)
    with pytest.raises(KeySourceError):
        w.unwrap(2, blob)
    with pytest.raises(KeySourceError, match="not a master-key blob"):
        w.unwrap(1, blob[:-1])
    with pytest.raises(ValueError):
        MasterKeyWrapper(b"short")


def test_master_key_file_checks(tmp_path):
    p = tmp_path / "m.key"
    p.write_text("not base64 !")
    os.chmod(p, 0o600)
    with pytest.raises(ConfigError, match="not base64"):
        MasterKeyWrapper.from_file(p)
    p.write_text(base64.b64encode(b"x" * 16).decode())
    with pytest.raises(ConfigError, match="32 bytes"):
        MasterKeyWrapper.from_file(p)
    os.chmod(p, 0o644)
    with pytest.raises(InsecureKeyFile):
        MasterKeyWrapper.from_file(p)


def test_plain_file_rewrapped_to_master_key_keeps_values(tmp_path):
    path = tmp_path / "keys.json"
    source = KeyFile(path)
    kr = source.init()
    v = kr.seal(b"keep me")
    w = MasterKeyWrapper(os.urandom(32))
    assert source.rewrap(w) == 1
    assert json.loads(path.read_text())["wrapping"] == {"type": "master-key"}
    assert KeyFile(path, w).load().open(v) == b"keep me"


# ---- AWS KMS (moto) ---------------------------------------------------------------------------------


@pytest.fixture
def kms():
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        calls = []
        client.meta.events.register(
            "before-call.kms.*", lambda model, **kw: calls.append(model.name)
        )
        client.calls = calls
        yield client


def test_kms_envelope_flow(kms, tmp_path):
    kek = kms.create_key(Description="sealstore kek")["KeyMetadata"]["KeyId"]
    path = tmp_path / "keys.json"
    kms.calls.clear()
    kr = KeyFile(path, KmsWrapper(kek, client=kms)).init()
    # material generated by KMS, not locally: the key and the store's metadata key
    assert kms.calls == ["GenerateDataKey", "GenerateDataKey"]
    doc = json.loads(path.read_text())
    assert doc["wrapping"] == {"type": "aws-kms", "kms_key_id": kek}
    assert "material" not in doc["keys"][0]
    values = [kr.seal(b"value %d" % i) for i in range(50)]

    kms.calls.clear()
    wrapper = KmsWrapper(kek, client=kms)
    source = KeyFile(path, wrapper)
    loaded = source.load()
    assert [loaded.open(v) for v in values] == [b"value %d" % i for i in range(50)]
    assert kms.calls == ["Decrypt", "Decrypt"]  # one unwrap per data key (+ metadata key)
    source.load()
    assert kms.calls == ["Decrypt", "Decrypt"]  # cached in the wrapper and the source

    kms.calls.clear()
    new = source.rotate(loaded)
    assert kms.calls == ["GenerateDataKey"]
    v2 = loaded.seal(b"after rotation")
    kms.calls.clear()
    fresh = KeyFile(path, KmsWrapper(kek, client=kms)).load()
    assert sorted(kms.calls) == ["Decrypt"] * 3
    assert fresh.primary.key_id == new.key_id
    assert fresh.open(v2) == b"after rotation" and fresh.open(values[0]) == b"value 0"
    wrapper.forget()


def test_kms_kek_rotation_rewraps_without_touching_values(kms, tmp_path):
    old_kek = kms.create_key()["KeyMetadata"]["KeyId"]
    new_kek = kms.create_key()["KeyMetadata"]["KeyId"]
    path = tmp_path / "keys.json"
    source = KeyFile(path, KmsWrapper(old_kek, client=kms))
    kr = source.init()
    source.rotate(kr)
    values = [kr.seal(b"v%d" % i) for i in range(5)]
    before = json.loads(path.read_text())

    kms.calls.clear()
    assert source.rewrap(KmsWrapper(new_kek, client=kms)) == 2
    # key material never leaves KMS in plaintext; a new metadata key is made under the new KEK
    assert kms.calls == ["ReEncrypt", "ReEncrypt", "GenerateDataKey"]
    after = json.loads(path.read_text())
    assert after["wrapping"]["kms_key_id"] == new_kek
    assert [k["wrapped"] for k in after["keys"]] != [k["wrapped"] for k in before["keys"]]
    kms.disable_key(KeyId=old_kek)
    reloaded = KeyFile(path, KmsWrapper(new_kek, client=kms)).load()
    assert [reloaded.open(v) for v in values] == [b"v%d" % i for i in range(5)]
    with pytest.raises(KeySourceError, match="KMS decrypt failed"):
        KeyFile(path, KmsWrapper(old_kek, client=kms)).load()


def test_kms_blob_bound_to_key_id_and_errors(kms):
    kek = kms.create_key()["KeyMetadata"]["KeyId"]
    w = KmsWrapper(kek, client=kms)
    material, blob = w.generate(7)
    assert len(material) == 32
    fresh = KmsWrapper(kek, client=kms)
    assert fresh.unwrap(7, blob) == material
    with pytest.raises(KeySourceError, match="KMS decrypt failed"):
        KmsWrapper(kek, client=kms).unwrap(8, blob)  # encryption context names the key id
    with pytest.raises(KeySourceError, match="KMS generate_data_key failed"):
        KmsWrapper("alias/missing", client=kms).generate(1)
    assert material.hex() not in repr(w) and kek in repr(w)
    with pytest.raises(ValueError):
        KmsWrapper("", client=kms)


def test_kms_wrapping_refused_without_wrapper(kms, tmp_path):
    kek = kms.create_key()["KeyMetadata"]["KeyId"]
    path = tmp_path / "keys.json"
    KeyFile(path, KmsWrapper(kek, client=kms)).init()
    with pytest.raises(KeySourceError, match="'aws-kms'"):
        KeyFile(path).load()


# ---- database registry ----------------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path):
    return create_engine(f"sqlite:///{tmp_path / 'app.db'}")


def test_registry_table_has_exactly_the_issue_columns():
    assert [c.name for c in sealstore_keys.columns] == [
        "key_id",
        "suite",
        "state",
        "created_at",
        "rotated_at",
        "wrapped_key",
    ]
    assert [c.name for c in sealstore_keys_columns()] == [c.name for c in sealstore_keys.columns]
    assert sealstore_keys_columns()[0] is not sealstore_keys.c.key_id  # fresh copies


def test_database_registry_shared_by_two_servers(engine):
    wrapper = MasterKeyWrapper(os.urandom(32))
    a = DatabaseKeySource(engine, wrapper)
    assert not a.exists()
    with pytest.raises(KeySourceError, match="does not exist"):
        a.load()
    ring_a = a.init(suite="AEGIS-128X4")
    assert a.exists()
    b = DatabaseKeySource(engine, wrapper)
    ring_b = b.load()
    v = ring_a.seal(b"from a", b"ctx")
    assert ring_b.open(v, b"ctx") == b"from a"

    with engine.connect() as conn:
        row = conn.execute(select(sealstore_keys).where(sealstore_keys.c.key_id >= 0)).one()
    assert row.state == "primary" and row.suite == "AEGIS-128X4"
    assert ring_a.primary.reveal_material() not in bytes(row.wrapped_key)

    new = a.rotate(ring_a)  # server A rotates; B learns it through refresh()
    v2 = ring_a.seal(b"new key", b"ctx")
    with pytest.raises(UnknownKeyId):
        ring_b.open(v2, b"ctx")
    b.refresh(ring_b)
    assert ring_b.primary.key_id == new.key_id and ring_b.open(v2, b"ctx") == b"new key"
    assert ring_b.seal(b"b writes").__getitem__(slice(2, 6)) == new.key_id.to_bytes(4, "big")

    old = fmt_id(v)
    ring_a.retire(old)
    a.save(ring_a)
    b.refresh(ring_b)
    with pytest.raises(KeyNotUsable):
        ring_b.open(v, b"ctx")
    ring_a.destroy(old)
    a.save(ring_a)
    b.refresh(ring_b)
    assert ring_b.get(old).state is KeyState.DESTROYED
    with engine.connect() as conn:
        assert (
            conn.execute(
                select(sealstore_keys.c.wrapped_key).where(sealstore_keys.c.key_id == old)
            ).scalar()
            is None
        )
    with pytest.raises(KeySourceError, match="already holds"):
        a.init()


def test_database_registry_concurrent_rotation_keeps_both_keys(engine):
    wrapper = MasterKeyWrapper(os.urandom(32))
    a, b = DatabaseKeySource(engine, wrapper), DatabaseKeySource(engine, wrapper)
    ring_a = a.init()
    ring_b = b.load()
    first = a.rotate(ring_a)
    second = b.rotate(ring_b)  # b's stale view is brought up to date under the lock first
    stored = DatabaseKeySource(engine, wrapper).load()
    assert stored.primary.key_id == second.key_id
    assert {first.key_id, second.key_id} <= {k.key_id for k in stored.keys}
    assert first.key_id in ring_b  # b learnt a's key on the way


def test_database_registry_stale_save_of_a_second_primary_is_refused(engine):
    wrapper = MasterKeyWrapper(os.urandom(32))
    a, b = DatabaseKeySource(engine, wrapper), DatabaseKeySource(engine, wrapper)
    ring_a = a.init()
    ring_b = b.load()
    a.rotate(ring_a)
    ring_b.rotate()  # in memory only, then a stale save
    with pytest.raises(ConcurrentKeyChange, match="2 primary keys"):
        b.save(ring_b)
    assert DatabaseKeySource(engine, wrapper).load().primary.key_id == ring_a.primary.key_id


def test_database_registry_with_kms_and_url(kms, tmp_path):
    kek = kms.create_key()["KeyMetadata"]["KeyId"]
    url = f"sqlite:///{tmp_path / 'reg.db'}"
    kr = DatabaseKeySource(url, KmsWrapper(kek, client=kms)).init()
    v = kr.seal(b"kms+db")
    assert DatabaseKeySource(url, KmsWrapper(kek, client=kms)).load().open(v) == b"kms+db"
    assert "reg.db" in repr(DatabaseKeySource(url, KmsWrapper(kek, client=kms)))
    with pytest.raises(ValueError, match="wrapped keys only"):
        DatabaseKeySource(url, None)


def test_wrapper_and_record_reprs_hold_no_secrets(tmp_path):
    master = os.urandom(32)
    w = MasterKeyWrapper(master)
    source = KeyFile(tmp_path / "k.json", w)
    kr = source.init()
    material = kr.primary.reveal_material()
    records = source._read()
    for text in (repr(w), str(w), repr(source), repr(records), repr(kr)):
        for secret in (master, material, records[0].wrapped):
            assert secret.hex() not in text and repr(secret)[2:-1] not in text
