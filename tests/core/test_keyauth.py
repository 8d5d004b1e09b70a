"""Key metadata authenticated under the wrapping key (format 2 stores): edits of ids, states,
primary, suites, dates or blobs are refused at load; format 1 stores load and are upgraded on
their next write; a format 2 store stripped of its tag does not unwrap."""

from __future__ import annotations

import base64
import json
import os

import boto3
import pytest
from moto import mock_aws
from sealstore.errors import ConfigError, KeyMetadataTampered, KeySourceError
from sealstore.keysources.metadata import canonical, metadata_tag
from sealstore.keysources.file import KeyFile
from sealstore.keyring import KeyState
from sealstore.wrapping.kms import KmsWrapper
from sealstore.keysources.database import METADATA_ROW, DatabaseKeySource, sealstore_keys
from sealstore.wrapping import MasterKeyWrapper
from sqlalchemy import select, update


def _doc(path):
    return json.loads(path.read_text())


def _put(path, doc):
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o600)


@pytest.fixture
def wrapped_file(tmp_path):
    """A master-key-wrapped file with an old key (active), a retired key and a primary."""
    w = MasterKeyWrapper(os.urandom(32))
    source = KeyFile(tmp_path / "keys.json", w)
    ring = source.init()
    old = ring.primary.key_id
    source.rotate(ring)
    retired = ring.primary.key_id
    source.rotate(ring)
    ring.retire(retired)
    source.save(ring)
    return source.path, w, old, retired


def _edits(old, retired):
    def by_id(doc, key_id):
        return next(k for k in doc["keys"] if k["id"] == f"{key_id:08x}")

    def old_primary_again(doc):
        for k in doc["keys"]:
            if k["state"] == "primary":
                k["state"] = "active"
        by_id(doc, old)["state"] = "primary"

    def swap_blobs(doc):
        a, b = by_id(doc, old), by_id(doc, retired)
        a["wrapped"], b["wrapped"] = b["wrapped"], a["wrapped"]

    return {
        "old key primary again": old_primary_again,
        "retired key revived": lambda d: by_id(d, retired).update(state="active"),
        "suite changed": lambda d: by_id(d, old).update(suite="AEGIS-128L"),
        "created_at changed": lambda d: by_id(d, old).update(
            created_at="2001-01-01T00:00:00+00:00"
        ),
        "key dropped": lambda d: d["keys"].remove(by_id(d, old)),
        "version changed": lambda d: d.update(version=d["version"] + 5),
        "blobs swapped": swap_blobs,
    }


@pytest.mark.parametrize(
    "name",
    [
        "old key primary again",
        "retired key revived",
        "suite changed",
        "created_at changed",
        "key dropped",
        "version changed",
    ],
)
def test_edited_metadata_is_refused_at_load(wrapped_file, name):
    path, w, old, retired = wrapped_file
    doc = _doc(path)
    assert doc["sealstore_keyring"] == 2 and doc["metadata_tag"] and doc["metadata_key"]
    KeyFile(path, w).load(allow_retired=True)  # untouched: loads
    _edits(old, retired)[name](doc)
    _put(path, doc)
    with pytest.raises(KeyMetadataTampered, match="does not match its authentication tag"):
        KeyFile(path, w).load(allow_retired=True)


def test_swapped_blobs_are_refused(wrapped_file):
    path, w, old, retired = wrapped_file
    doc = _doc(path)
    _edits(old, retired)["blobs swapped"](doc)
    _put(path, doc)
    with pytest.raises(KeySourceError):  # the tag, or the key-id binding of the blobs
        KeyFile(path, w).load(allow_retired=True)


def test_stripping_the_tag_is_refused(wrapped_file):
    path, w, old, retired = wrapped_file
    doc = _doc(path)
    for field in ("metadata_tag", "metadata_key"):
        doc.pop(field)
    doc["sealstore_keyring"] = 1  # pretend to be an old, untagged file
    for k in doc["keys"]:
        if k["id"] == f"{retired:08x}":
            k["state"] = "active"
    _put(path, doc)
    with pytest.raises(KeySourceError, match="does not unwrap"):  # format 2 blobs
        KeyFile(path, w).load()


def test_tag_of_another_store_does_not_fit(tmp_path, wrapped_file):
    path, w, *_ = wrapped_file
    other = KeyFile(tmp_path / "other.json", w)
    other.init()
    doc, theirs = _doc(path), _doc(other.path)
    doc["metadata_key"], doc["metadata_tag"] = theirs["metadata_key"], theirs["metadata_tag"]
    _put(path, doc)
    with pytest.raises(KeyMetadataTampered):
        KeyFile(path, w).load(allow_retired=True)


def _as_format_1(path, w):
    """Rewrite a format 2 file as an earlier version wrote it: blobs under the format 1
    context, no metadata key or tag."""
    doc = _doc(path)
    for k in doc["keys"]:
        if "wrapped" in k:
            material = w.unwrap(int(k["id"], 16), base64.b64decode(k["wrapped"]), 2)
            k["wrapped"] = base64.b64encode(w.wrap(int(k["id"], 16), material, 1)).decode()
    for field in ("metadata_tag", "metadata_key", "version"):
        doc.pop(field)
    doc["sealstore_keyring"] = 1
    _put(path, doc)


def test_format_1_file_loads_and_is_upgraded_on_the_next_write(wrapped_file):
    path, w, old, retired = wrapped_file
    values_ring = KeyFile(path, w).load(allow_retired=True)
    sealed = values_ring.seal(b"kept")
    _as_format_1(path, w)
    source = KeyFile(path, w)
    ring = source.load(allow_retired=True)  # old files still load
    assert ring.open(sealed) == b"kept"
    source.rotate(ring)
    doc = _doc(path)
    assert doc["sealstore_keyring"] == 2 and doc["metadata_tag"]
    reloaded = KeyFile(path, w).load(allow_retired=True)
    assert reloaded.open(sealed) == b"kept" and len(reloaded) == 4
    doc["keys"][0]["state"] = "retired" if doc["keys"][0]["state"] != "retired" else "active"
    _put(path, doc)
    with pytest.raises(KeyMetadataTampered):
        KeyFile(path, w).load(allow_retired=True)


def test_plain_files_stay_format_1(tmp_path):
    source = KeyFile(tmp_path / "plain.json")
    source.rotate(source.init())
    doc = _doc(source.path)
    assert doc["sealstore_keyring"] == 1 and "metadata_tag" not in doc


def test_kms_wrapped_file_is_tagged_and_checked(tmp_path):
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        kek = kms.create_key()["KeyMetadata"]["KeyId"]
        path = tmp_path / "keys.json"
        source = KeyFile(path, KmsWrapper(kek, client=kms))
        source.rotate(source.init())
        doc = _doc(path)
        assert doc["sealstore_keyring"] == 2
        old = next(k for k in doc["keys"] if k["state"] == "active")
        new = next(k for k in doc["keys"] if k["state"] == "primary")
        old["state"], new["state"] = "primary", "active"
        _put(path, doc)
        with pytest.raises(KeyMetadataTampered):
            KeyFile(path, KmsWrapper(kek, client=kms)).load()


def test_canonical_encoding_covers_each_field(wrapped_file):
    path, w, *_ = wrapped_file
    source = KeyFile(path, w)
    records = source._read()
    base = canonical(records, version=3, wrapping=w.describe())
    assert canonical(records, version=4, wrapping=w.describe()) != base
    assert canonical(records, version=3, wrapping={"type": "aws-kms"}) != base
    records[0].state = (
        KeyState.RETIRED if records[0].state is not KeyState.RETIRED else KeyState.ACTIVE
    )
    assert canonical(records, version=3, wrapping=w.describe()) != base


# ---- the database registry ------------------------------------------------------------------------


def test_registry_metadata_is_authenticated(sql_engine):
    """On SQLite, PostgreSQL and MariaDB: the tag survives each database's round trip."""
    engine = sql_engine
    w = MasterKeyWrapper(os.urandom(32))
    source = DatabaseKeySource(engine, w)
    ring = source.init()
    old = ring.primary.key_id
    new = source.rotate(ring).key_id
    assert {k.key_id for k in DatabaseKeySource(engine, w).load().keys} == {old, new}
    t = sealstore_keys
    with engine.begin() as conn:  # someone with write access makes the old key primary again
        conn.execute(update(t).where(t.c.key_id == old).values(state="primary"))
        conn.execute(update(t).where(t.c.key_id == new).values(state="active"))
    with pytest.raises(KeyMetadataTampered):
        DatabaseKeySource(engine, w).load()
    with engine.begin() as conn:  # ... and then deletes the tag row: the blobs no longer unwrap
        conn.execute(t.delete().where(t.c.key_id == METADATA_ROW))
    with pytest.raises(KeySourceError, match="does not unwrap"):
        DatabaseKeySource(engine, w).load()
    with engine.connect() as conn:
        assert conn.execute(select(t.c.key_id).where(t.c.key_id == METADATA_ROW)).all() == []


def test_registry_of_format_1_loads_and_is_upgraded(sql_engine):
    w = MasterKeyWrapper(os.urandom(32))
    source = DatabaseKeySource(sql_engine, w)
    ring = source.init()
    sealed = ring.seal(b"kept")
    t = sealstore_keys
    with sql_engine.begin() as conn:  # as an earlier version wrote it: format 1 blobs, no tag
        conn.execute(t.delete().where(t.c.key_id == METADATA_ROW))
        for key_id, blob in conn.execute(select(t.c.key_id, t.c.wrapped_key)).all():
            material = w.unwrap(key_id, bytes(blob), 2)
            conn.execute(
                update(t)
                .where(t.c.key_id == key_id)
                .values(wrapped_key=w.wrap(key_id, material, 1))
            )
    old = DatabaseKeySource(sql_engine, w)
    ring = old.load()
    assert ring.open(sealed) == b"kept"
    old.rotate(ring)
    with sql_engine.connect() as conn:
        assert (
            conn.execute(select(t.c.state).where(t.c.key_id == METADATA_ROW)).scalar() == "format-2"
        )
    assert DatabaseKeySource(sql_engine, w).load().open(sealed) == b"kept"


def _sealstore_locals(tb):
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != __file__:
            for value in tb.tb_frame.f_locals.values():
                if isinstance(value, (bytes, bytearray, memoryview)):
                    yield bytes(value)
                elif isinstance(value, (tuple, list)):
                    yield from (bytes(v) for v in value if isinstance(v, (bytes, bytearray)))
        tb = tb.tb_next


def test_tamper_error_frames_hold_no_metadata_key_or_expected_tag(wrapped_file):
    path, w, old, retired = wrapped_file
    source = KeyFile(path, w)
    records = source._read()
    doc = _doc(path)
    _edits(old, retired)["retired key revived"](doc)
    _put(path, doc)
    with pytest.raises(KeyMetadataTampered) as info:
        source.load(allow_retired=True)
    meta_key = bytes(source._meta_key[1])
    # the tag the edited metadata would need: recorded by an error reporter, it is a forgery
    forged = metadata_tag(
        meta_key, canonical(source._read(), version=source.version, wrapping=w.describe())
    )
    assert records
    for value in _sealstore_locals(info.value.__traceback__):
        assert value != meta_key and value != forged


def test_bad_master_key_file_errors_hold_no_key_text(tmp_path):
    path = tmp_path / "master.key"
    for content in (b"not base64 but secret-ish!\n", base64.b64encode(os.urandom(31)) + b"\n"):
        path.write_bytes(content)
        os.chmod(path, 0o600)
        with pytest.raises(ConfigError) as info:
            MasterKeyWrapper.from_file(path)
        for value in _sealstore_locals(info.value.__traceback__):
            assert (
                content.strip() not in value
                and base64.b64decode(content.strip() + b"==", validate=False) != value
            )
