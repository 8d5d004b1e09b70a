"""Object rotation and key retirement over Google Cloud Storage (the emulator): the engine's
rotation coordinated by the job tables re-seals objects an encrypted client wrote, keeping their
content headers, puts lost metadata back, reports another tool's copy as a failure; and
``sealstore rotate --objects gs://... --objects s3://...`` rotates both stores in one command."""

from __future__ import annotations

import json
import os

import sqlalchemy as sa
from fixtures_gcs import make_gcs_client
from fixtures_s3 import make_client
from sealstore.adapters import s3 as s3_adapter
from sealstore.adapters.gcs import encrypt_client
from sealstore.adapters.gcs.store import GCSStore
from sealstore.adapters.objects import ObjectSealing
from sealstore.cli import main
from sealstore.config import load_config
from sealstore.keyring import Keyring
from sealstore.migrations import create_tables
from sealstore.migrations.rotation.objects import rotate_prefix


def test_rotate_prefix_on_gcs(tmp_path, gcs_emulator, raw_gcs, gcs_bucket):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    create_tables(engine)
    kr = Keyring.generate("AEGIS-128L", 16)
    gcs = encrypt_client(make_gcs_client(gcs_emulator), kr, segment_size=4096)
    data = {f"p/{i:02d}": os.urandom(3000 + i) for i in range(12)}
    for key, value in data.items():
        gcs.bucket(gcs_bucket).blob(key).upload_from_string(value, content_type="text/x-mine")
    plain = raw_gcs.bucket(gcs_bucket)
    plain.copy_blob(plain.blob("p/00"), plain, "p/zz-copied")  # bound to p/00: a failure
    kr.rotate()
    store = GCSStore(make_gcs_client(gcs_emulator))
    result = rotate_prefix(engine, ObjectSealing(kr), store, f"gs://{gcs_bucket}/p/",
                           batch_size=5)  # fmt: skip
    assert result.complete and result.resealed == 12
    assert [f["key"] for f in result.failures] == ["p/zz-copied"]
    assert "WrongLocation" in result.failures[0]["error"]
    for key, value in data.items():
        blob = raw_gcs.bucket(gcs_bucket).get_blob(key)
        assert blob.metadata["sealstore-key-id"] == kr.primary.id_hex
        assert blob.content_type == "text/x-mine"
        assert gcs.bucket(gcs_bucket).blob(key).download_as_bytes() == value
    again = rotate_prefix(engine, ObjectSealing(kr), store, f"gs://{gcs_bucket}/p/")
    assert (again.resealed, again.current) == (0, 12)


def test_rotate_objects_command_over_gcs_and_s3(tmp_path, monkeypatch, capsys, gcs_emulator,
                                                gcs_bucket, s3_endpoint, bucket):  # fmt: skip
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
    keyring = load_config(str(config)).load_keyring()
    gcs = encrypt_client(make_gcs_client(gcs_emulator), keyring)
    s3 = s3_adapter.encrypt_client(make_client(s3_endpoint), keyring)
    for i in range(4):
        gcs.bucket(gcs_bucket).blob(f"d/{i}").upload_from_string(b"g" * i)
        s3.put_object(Bucket=bucket, Key=f"d/{i}", Body=b"s" * i)
    assert main(["-c", str(config), "keys", "rotate"]) == 0
    capsys.readouterr()
    code = main(["-c", str(config), "rotate", "--objects", f"gs://{gcs_bucket}/d/",
                 "--objects", f"s3://{bucket}/d/", "--json"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    docs = json.loads(out)["objects"]
    assert sorted((d["resealed"], d["complete"]) for d in docs) == [(4, True), (4, True)]
    rotated = load_config(str(config)).load_keyring()
    reader = encrypt_client(make_gcs_client(gcs_emulator), rotated)
    for i in range(4):
        blob = reader.bucket(gcs_bucket).get_blob(f"d/{i}")
        assert blob.metadata["sealstore-key-id"] == rotated.primary.id_hex
        assert blob.download_as_bytes() == b"g" * i


def test_rotate_objects_without_google_credentials_is_one_line_and_exit_1(
    tmp_path, monkeypatch, capsys
):
    """No Application Default Credentials (and no emulator): google.auth's error is the
    environment's, one line and exit 1, not an unexpected error (70) -- as botocore's
    NoCredentialsError is for s3:// (issue 27)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def no_credentials(*args, **kwargs):
        raise DefaultCredentialsError("Your default credentials were not found.")

    config = tmp_path / "sealstore.toml"
    config.write_text(f'[key_source]\ntype = "file"\npath = "{tmp_path / "keys.json"}"\n')
    for name in list(os.environ):
        if name.startswith(("SEALSTORE_", "STORAGE_EMULATOR", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(google.auth, "default", no_credentials)
    assert main(["-c", str(config), "keys", "init"]) == 0
    capsys.readouterr()
    assert main(["-c", str(config), "rotate", "--objects", "gs://no-bucket/p/"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "default credentials were not found" in err, err
    assert "unexpected" not in err


def test_key_retirement_counts_gcs_objects(gcs_emulator, raw_gcs, gcs_bucket):
    from sealstore.migrations.rotation.retire import object_references

    kr = Keyring.generate("AEGIS-128L", 16)
    gcs = encrypt_client(make_gcs_client(gcs_emulator), kr)
    old = kr.primary.key_id
    for name in ("data/a", "data/b", "other/c"):
        gcs.bucket(gcs_bucket).blob(name).upload_from_string(b"sealed")
    raw_gcs.bucket(gcs_bucket).blob("data/plain").upload_from_string(b"not sealed")
    store = GCSStore(raw_gcs)
    assert object_references(store, f"gs://{gcs_bucket}/data", old) == 2
    kr.rotate()
    gcs.bucket(gcs_bucket).blob("data/a").upload_from_string(b"under the new key")
    assert object_references(store, f"gs://{gcs_bucket}/data", old) == 1
    assert object_references(store, f"gs://{gcs_bucket}/data", kr.primary.key_id) == 1


def test_listing_after_a_name_asks_the_server_to_start_there():
    """A rotation claim lists from the last claimed name: GCS must start there (start_offset),
    not list the prefix from its first name and skip on the client (quadratic in the objects)."""
    from types import SimpleNamespace

    from sealstore.adapters.gcs.store import GCSStore

    calls = []
    names = ["p/a", "p/b", "p/c", "p/d"]

    class Client:
        project = "test"

        def list_blobs(self, bucket, **kw):
            calls.append(kw)
            offset = kw.get("start_offset")  # inclusive, as GCS's startOffset
            return [SimpleNamespace(name=n, generation=1, _properties={"size": "3"})
                    for n in names if offset is None or n >= offset]  # fmt: skip

    store = GCSStore(Client(), check_conditions=False)
    assert [o.key for o in store.list("b", "p/", start_after="p/b")] == ["p/c", "p/d"]
    assert calls[-1]["start_offset"] == "p/b"
    assert [o.key for o in store.list("b", "p/")] == names
    assert calls[-1]["start_offset"] is None
