"""``sealstore keys retire --s3`` in versioned buckets: noncurrent versions, and versions behind
a delete marker, still name their key and are counted."""

from __future__ import annotations

import json

import pytest
from fixtures_s3 import make_client
from sealstore.adapters.s3 import encrypt_client
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.adapters.s3.store import S3Store
from sealstore.migrations.rotation.retire import object_references


@pytest.fixture
def keys(tmp_path, monkeypatch):
    """A key file configuration in a fresh directory (no database)."""
    import os

    for name in list(os.environ):
        if name.startswith("SEALSTORE_") and name != "SEALSTORE_KERNEL":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.json").write_text(
        json.dumps({"key_source": {"type": "file", "path": str(tmp_path / "k.json")}})
    )
    assert main(["--config", "main.json", "keys", "init"]) == 0
    return tmp_path / "main.json"


@pytest.fixture
def versioned(raw_s3, bucket):
    raw_s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def retire(capsys, endpoint, bucket, key_hex) -> tuple[int, str]:
    code = main(
        ["--config", "main.json", "keys", "retire", key_hex, "--s3", f"s3://{bucket}/data",
         "--endpoint-url", endpoint, "--region", "us-east-1"]
    )  # fmt: skip
    return code, capsys.readouterr().err


def test_noncurrent_versions_block_retirement(keys, capsys, s3_endpoint, raw_s3, versioned):
    old_kr = load_config(keys).load_keyring()
    old = old_kr.primary.id_hex
    s3 = encrypt_client(make_client(s3_endpoint), old_kr)
    s3.put_object(Bucket=versioned, Key="data/a", Body=b"version one, old key")
    s3.put_object(Bucket=versioned, Key="data/b", Body=b"deleted later, old key")
    raw_s3.delete_object(Bucket=versioned, Key="data/b")  # a delete marker on top
    assert main(["--config", "main.json", "keys", "rotate"]) == 0
    capsys.readouterr()
    new_kr = load_config(keys).load_keyring()
    new_s3 = encrypt_client(make_client(s3_endpoint), new_kr)
    new_s3.put_object(Bucket=versioned, Key="data/a", Body=b"version two, new key")
    # every current object is under the new key: only the old versions name the old one
    listed = raw_s3.list_objects_v2(Bucket=versioned, Prefix="data")["Contents"]
    assert [o["Key"] for o in listed] == ["data/a"]

    code, err = retire(capsys, s3_endpoint, versioned, old)
    assert code == 1, err
    assert f"2 values still use it (s3://{versioned}/data: 2 objects)" in err
    assert object_references(S3Store(raw_s3), f"s3://{versioned}/data", new_kr.primary.key_id) == 1

    # the old versions are what would break: they open now, under the old key
    versions = raw_s3.list_object_versions(Bucket=versioned, Prefix="data")["Versions"]
    old_versions = [v for v in versions if not (v["Key"] == "data/a" and v["IsLatest"])]
    assert len(old_versions) == 2
    opened = {
        new_s3.get_object(Bucket=versioned, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
        for v in old_versions
    }
    assert opened == {b"version one, old key", b"deleted later, old key"}

    for v in old_versions:
        raw_s3.delete_object(Bucket=versioned, Key=v["Key"], VersionId=v["VersionId"])
    code, err = retire(capsys, s3_endpoint, versioned, old)
    assert code == 0, err


def test_versioning_suspended_null_version_is_counted(keys, s3_endpoint, raw_s3, bucket):
    """An object written before versioning was enabled is version ``null``; once overwritten it
    is noncurrent and must be looked up by that id, not as the current object."""
    kr = load_config(keys).load_keyring()
    s3 = encrypt_client(make_client(s3_endpoint), kr)
    s3.put_object(Bucket=bucket, Key="data/a", Body=b"before versioning")
    raw_s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    raw_s3.put_object(Bucket=bucket, Key="data/a", Body=b"a plain current version")
    assert object_references(S3Store(raw_s3), f"s3://{bucket}/data", kr.primary.key_id) == 1
