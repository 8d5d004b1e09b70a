"""Package logging: the key, KMS, S3 and rotation paths log their lifecycle events and I/O
(docs/LOGGING.md), and no record -- message or arguments -- carries key material (raw, hex,
base64), a wrapped key, plaintext or ciphertext bytes.  The value path logs nothing."""

from __future__ import annotations

import base64
import logging
import os

import boto3
import pytest
import sqlalchemy as sa
from moto import mock_aws
from sealstore.keysources.file import KeyFile
from sealstore.keyring import forget_keyring, use_keyring
from sealstore.wrapping.kms import KmsWrapper
from sealstore.wrapping import MasterKeyWrapper


def forms(secret: bytes) -> list[str]:
    """The ways ``secret`` (or a 16-byte run of it) could show up in text."""
    raw = bytes(secret)
    out = [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(), repr(raw)[2:-1]]
    if len(raw) > 16:
        out += [raw[:16].hex(), base64.b64encode(raw[:15]).decode(), repr(raw[:16])[2:-1]]
    return [f for f in out if len(f) >= 16]


def record_texts(records) -> list[str]:
    texts = []
    for r in records:
        texts.append(r.getMessage())
        args = r.args if isinstance(r.args, tuple) else (r.args,)
        for a in args:
            texts.append(repr(a))
            texts.append(str(a))
            if isinstance(a, (bytes, bytearray, memoryview)):
                texts.append(bytes(a).hex())
    return texts


def assert_no_secrets(records, secrets: list[bytes]) -> None:
    texts = record_texts(records)
    for secret in secrets:
        for form in forms(secret):
            for text in texts:
                assert form not in text


def logged(records, logger: str, level: int, needle: str) -> bool:
    return any(
        r.name == logger and r.levelno == level and needle in r.getMessage() for r in records
    )


def materials(keyring) -> list[bytes]:
    return [k.reveal_material() for k in keyring.keys if k.state.value != "destroyed"]


@pytest.fixture
def debug(caplog):
    caplog.set_level(logging.DEBUG, logger="sealstore")
    return caplog


def test_key_file_flow(debug, tmp_path):
    path = tmp_path / "keys.json"
    kr = KeyFile(path).init()
    first = kr.primary.id_hex
    secrets = materials(kr)
    plain = [os.urandom(24) for _ in range(50)]
    debug.clear()
    sealed = [kr.seal(p) for p in plain]  # the value path logs nothing
    assert [kr.open(v) for v in sealed] == plain
    assert debug.records == []

    source = KeyFile(path)
    loaded = source.load()
    new = source.rotate(loaded)
    loaded.retire(int(first, 16))
    source.save(loaded)
    secrets += materials(loaded)
    loaded.close()
    kr.close()
    records = debug.records
    assert logged(records, "sealstore.keysources.file", logging.DEBUG, f"reading key file {path}")
    assert logged(records, "sealstore.keysources.file", logging.DEBUG, f"wrote key file {path}")
    assert logged(records, "sealstore.keysources.base", logging.DEBUG, "loaded 1 keys from KeyFile")
    assert logged(
        records, "sealstore.keysources.base", logging.INFO, f"new primary key {new.id_hex}"
    )
    assert logged(records, "sealstore.keyring.ring", logging.INFO, f"key {new.id_hex} added")
    assert logged(
        records, "sealstore.keyring.ring", logging.INFO, f"key {first}: active -> retired"
    )
    assert logged(records, "sealstore.keyring.ring", logging.DEBUG, "keyring closed")
    assert_no_secrets(records, secrets + plain + sealed)


def test_master_key_wrapped_flow(debug, tmp_path):
    master_path = MasterKeyWrapper.create_file(tmp_path / "master.key")
    master = base64.b64decode(master_path.read_text())
    source = KeyFile(tmp_path / "keys.json", MasterKeyWrapper.from_file(master_path))
    kr = source.init()
    key = source.rotate(kr)
    kr.destroy(next(k.key_id for k in kr.keys if k.key_id != key.key_id))
    source.save(kr)
    secrets = [master, *materials(kr)]
    doc = (tmp_path / "keys.json").read_text()
    import json

    stored = json.loads(doc)
    secrets += [base64.b64decode(k["wrapped"]) for k in stored["keys"] if "wrapped" in k]
    secrets.append(base64.b64decode(stored["metadata_key"]))
    kr.close()
    records = debug.records
    assert logged(records, "sealstore.wrapping.master", logging.INFO, "created master key file")
    assert logged(records, "sealstore.wrapping.master", logging.DEBUG, "reading master key file")
    assert logged(records, "sealstore.keysources.base", logging.INFO, "wrapping master-key")
    assert logged(records, "sealstore.keyring.ring", logging.INFO, "active -> destroyed")
    assert_no_secrets(records, secrets)


def test_kms_flow(debug, tmp_path):
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        kek = client.create_key(Description="log test")["KeyMetadata"]["KeyId"]
        source = KeyFile(tmp_path / "keys.json", KmsWrapper(kek, client=client))
        kr = source.init()
        fresh = KeyFile(tmp_path / "keys.json", KmsWrapper(kek, client=client)).load()
        value = fresh.seal(b"kms sealed value")
        secrets = [*materials(kr), b"kms sealed value", value]
        kr.close()
        fresh.close()
    records = debug.records
    key_id = f"{kr.primary.key_id:08x}"
    assert logged(
        records, "sealstore.wrapping.kms", logging.DEBUG, f"KMS generate_data_key for key {key_id}"
    )
    assert logged(records, "sealstore.wrapping.kms", logging.DEBUG, f"KMS decrypt for key {key_id}")
    assert_no_secrets(records, secrets)


def test_column_rotation_flow(debug, tmp_path):
    from sealstore.adapters.sqlalchemy import EncryptedString
    from sealstore.migrations import rotate
    from sealstore.migrations.schema import create_tables

    table = sa.Table("logged", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("v", EncryptedString(80)))  # fmt: skip
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    table.metadata.create_all(engine)
    create_tables(engine)
    source = KeyFile(tmp_path / "keys.json")
    kr = use_keyring(source.init())
    plain = [f"row secret {i} {os.urandom(8).hex()}" for i in range(40)]
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(table), [{"id": i, "v": p} for i, p in enumerate(plain)])
        source.rotate(kr)
        with engine.connect() as conn:
            before = [bytes(v) for (v,) in conn.exec_driver_sql("SELECT v FROM logged")]
        debug.clear()
        (result,) = rotate(engine, table, batch_size=8)
        with engine.connect() as conn:
            after = [bytes(v) for (v,) in conn.exec_driver_sql("SELECT v FROM logged")]
        secrets = [*materials(kr), *(p.encode() for p in plain), *before, *after]
    finally:
        forget_keyring()
        kr.close()
        engine.dispose()
    assert result.resealed == 40
    records = debug.records
    assert logged(records, "sealstore.migrations", logging.INFO, "logged.v")
    assert len(records) < 40  # per job and batch, not per value
    assert_no_secrets(records, secrets)


def test_s3_flow(debug, tmp_path, s3_endpoint, raw_s3, bucket):
    from fixtures_s3 import make_client
    from sealstore.adapters.s3 import encrypt_client
    from sealstore.adapters.s3.rotate import rotate_objects

    source = KeyFile(tmp_path / "keys.json")
    kr = source.init()
    s3 = encrypt_client(make_client(s3_endpoint), kr, segment_size=1024)
    bodies = {f"obj/{i}": os.urandom(3000 + i) for i in range(4)}
    for key, body in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/obj/1")
    got = s3.get_object(Bucket=bucket, Key="obj/0", Range="bytes=100-2000")["Body"].read()
    assert got == bodies["obj/0"][100:2001]
    old_stored = [raw_s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in bodies]
    source.rotate(kr)
    report = rotate_objects(s3, bucket, "obj/", checkpoint=str(tmp_path / "cp.json"))
    assert report.resealed == 4
    assert s3.get_object(Bucket=bucket, Key="obj/3")["Body"].read() == bodies["obj/3"]
    new_stored = [raw_s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in bodies]
    secrets = [*materials(kr), *bodies.values(), *old_stored, *new_stored]
    primary = kr.primary.id_hex
    kr.close()
    records = debug.records
    up, down = "sealstore.adapters.s3.uploads", "sealstore.adapters.s3.downloads"
    assert logged(records, up, logging.DEBUG, f"PutObject {bucket}/obj/0: sealed under key")
    assert logged(records, down, logging.DEBUG, f"GetObject {bucket}/obj/0: opening under key")
    copied = f"CopyObject {bucket}/obj/1 -> {bucket}/copied: re-sealed"
    assert logged(records, "sealstore.adapters.s3.copying", logging.DEBUG, copied)
    assert logged(records, "sealstore.adapters.objects.rotation", logging.INFO, f"to key {primary}")
    assert logged(records, "sealstore.adapters.objects.rotation", logging.DEBUG, "obj/2: resealed")
    assert logged(records, "sealstore.adapters.objects.rotation", logging.INFO, "done: 4 objects")
    assert_no_secrets(records, secrets)
