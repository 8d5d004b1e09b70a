"""Doors that would move an object's body around an encrypted client's sealing are refused with
``UnsealedPath`` before anything is sent (compose, resumable session URLs, signed URLs and post
policies, the XML API, media links fetched with the client's session, ``transfer_manager``'s XML
multipart upload and process pools); ``transfer_manager``'s thread pools seal; plain clients in
the same process are untouched."""

from __future__ import annotations

import datetime
import io
import os
import pickle

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fixtures_gcs import make_gcs_client
from google.cloud.storage import Client, transfer_manager
from sealstore.adapters.gcs import encrypt_client
from sealstore.adapters.gcs.doors import DOORS, moves_body
from sealstore.errors import UnsealedPath, UnsupportedClient, UnsupportedOperation
from sealstore.keyring import Keyring

SEG = 4096


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-256", 16)


@pytest.fixture
def gcs(gcs_emulator, keyring):
    return encrypt_client(make_gcs_client(gcs_emulator), keyring, segment_size=SEG)


@pytest.fixture
def sealed_blob(gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob("k")
    blob.upload_from_string(b"secret" * 1000)
    return blob


def objects(raw_gcs, bucket) -> list[str]:
    return sorted(b.name for b in raw_gcs.list_blobs(bucket))


def test_encrypt_client_checks_its_argument(gcs, keyring):
    with pytest.raises(TypeError):
        encrypt_client(object(), keyring)
    with pytest.raises(ValueError, match="already encrypted"):
        encrypt_client(gcs, keyring)
    assert not issubclass(UnsupportedClient, UnsealedPath)
    assert isinstance(gcs, Client) and "Keyring" not in repr(gcs.sealstore).split("=")[0]


def test_compose_and_resumable_sessions_are_refused(gcs, raw_gcs, gcs_bucket, sealed_blob):
    target = gcs.bucket(gcs_bucket).blob("composed")
    with pytest.raises(UnsealedPath):
        target.compose([sealed_blob, sealed_blob])
    with pytest.raises(UnsealedPath):
        gcs.bucket(gcs_bucket).blob("session").create_resumable_upload_session()
    assert objects(raw_gcs, gcs_bucket) == ["k"]
    with gcs.sealstore.raw():  # on purpose: the sealed bytes, concatenated
        target.compose([sealed_blob])
    assert "composed" in objects(raw_gcs, gcs_bucket)


def _signing_credentials():
    """Service-account credentials with a fresh RSA key: signing happens offline."""
    from google.oauth2 import service_account

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "client_email": "signer@sealstore-test.iam.gserviceaccount.com",
        "private_key": pem,
        "private_key_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    return service_account.Credentials.from_service_account_info(info)


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "RESUMABLE", "get"])
def test_signed_urls_that_move_a_body_are_refused(sealed_blob, method):
    creds = _signing_credentials()
    with pytest.raises(UnsealedPath, match="signed"):
        sealed_blob.generate_signed_url(
            expiration=datetime.timedelta(minutes=5), method=method, credentials=creds, version="v4"
        )


def test_signed_urls_without_a_body_and_raw_ones_are_allowed(gcs, sealed_blob):
    creds = _signing_credentials()
    for method in ("HEAD", "DELETE"):
        url = sealed_blob.generate_signed_url(
            expiration=datetime.timedelta(minutes=5), method=method, credentials=creds, version="v4"
        )
        assert "X-Goog-Signature" in url
    with gcs.sealstore.raw():
        assert sealed_blob.generate_signed_url(
            expiration=datetime.timedelta(minutes=5), credentials=creds, version="v4"
        )
    with pytest.raises(UnsealedPath):
        gcs.generate_signed_post_policy_v4(
            "b", "k", expiration=datetime.timedelta(minutes=5), credentials=creds
        )


def test_the_transport_refuses_bodies_around_the_doors(gcs, raw_gcs, gcs_bucket, sealed_blob):
    base = gcs._connection.API_BASE_URL
    session = gcs._http
    stored_before = raw_gcs.bucket(gcs_bucket).blob("k").download_as_bytes()
    attempts = [
        ("GET", sealed_blob.reload() or sealed_blob.media_link, None),  # a raw media link
        ("GET", f"{base}/{gcs_bucket}/k", None),  # the XML API
        ("PUT", f"{base}/{gcs_bucket}/k", b"plain"),
        ("POST", f"{base}/{gcs_bucket}/k?uploads", None),  # XML multipart
        ("POST", f"{base}/upload/storage/v1/b/{gcs_bucket}/o?uploadType=media&name=k", b"p"),
        ("GET", f"{base}/storage/v1/b/{gcs_bucket}/o/k?alt=media", None),
        ("POST", f"{base}/storage/v1/b/{gcs_bucket}/o/k/copyTo/b/{gcs_bucket}/o/k2", None),
        ("POST", f"{base}/storage/v1/b/{gcs_bucket}/o/k/rewriteTo/b/{gcs_bucket}/o/k2", None),
    ]
    for method, url, data in attempts:
        with pytest.raises(UnsealedPath):
            session.request(method, url, data=data)
    assert raw_gcs.bucket(gcs_bucket).blob("k").download_as_bytes() == stored_before
    assert objects(raw_gcs, gcs_bucket) == ["k"]
    # metadata requests pass
    assert session.request("GET", f"{base}/storage/v1/b/{gcs_bucket}/o/k").status_code == 200


def test_moves_body_classification():
    assert moves_body("GET", "http://h/storage/v1/b/b/o/x%2FcopyTo%2Fb", None) is False
    assert moves_body("GET", "http://h/storage/v1/b/b/o", None) is False
    assert moves_body("POST", "http://h/batch/storage/v1", b"DELETE /storage/v1/b/b/o/k") is False
    assert moves_body("POST", "http://h/batch/storage/v1", b"POST /b/b/o/k/copyTo/b/c/o/k")
    assert moves_body("POST", "http://h/storage/v1/b/b/o/k/compose", None)
    assert moves_body("GET", "http://h/download/storage/v1/b/b/o/k", None)


def test_transfer_manager_xml_multipart_is_refused(gcs, raw_gcs, gcs_bucket, tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(3 * SEG))
    blob = gcs.bucket(gcs_bucket).blob("xml")
    with pytest.raises(UnsealedPath):
        transfer_manager.upload_chunks_concurrently(
            str(path), blob, chunk_size=SEG, max_workers=2, worker_type=transfer_manager.THREAD
        )
    assert objects(raw_gcs, gcs_bucket) == []


def test_transfer_manager_threads_seal_and_processes_are_refused(
    gcs, raw_gcs, gcs_bucket, tmp_path
):
    files = {}
    for i in range(4):
        files[f"f{i}"] = os.urandom(SEG * i + 7)
        (tmp_path / f"f{i}").write_bytes(files[f"f{i}"])
    bucket = gcs.bucket(gcs_bucket)
    results = transfer_manager.upload_many_from_filenames(
        bucket, sorted(files), source_directory=str(tmp_path), max_workers=2,
        worker_type=transfer_manager.THREAD,
    )  # fmt: skip
    assert results == [None] * 4
    for name, data in files.items():
        assert raw_gcs.bucket(gcs_bucket).blob(name).download_as_bytes()[:4] == b"SSOB"
        assert bucket.blob(name).download_as_bytes() == data
    out = tmp_path / "chunked.bin"
    big = bucket.get_blob("f3")
    transfer_manager.download_chunks_concurrently(
        big, str(out), chunk_size=SEG, max_workers=2, worker_type=transfer_manager.THREAD
    )
    assert out.read_bytes() == files["f3"]
    with pytest.raises(UnsealedPath):
        transfer_manager.upload_many_from_filenames(
            bucket, ["f1"], source_directory=str(tmp_path), blob_name_prefix="p/",
            worker_type=transfer_manager.PROCESS, raise_exception=True,
        )  # fmt: skip
    with pytest.raises(UnsealedPath):
        pickle.dumps(gcs)
    assert not any(n.startswith("p/") for n in objects(raw_gcs, gcs_bucket))


def test_plain_clients_are_untouched(gcs, raw_gcs, gcs_bucket):
    """Installing the doors changes nothing for clients that are not encrypted."""
    data = os.urandom(5000)
    plain = raw_gcs.bucket(gcs_bucket).blob("plain")
    plain.upload_from_string(data)
    assert plain.size == 5000
    assert (
        raw_gcs.bucket(gcs_bucket).blob("plain").download_as_bytes(start=10, end=19)
        == (data[10:20])
    )
    with raw_gcs.bucket(gcs_bucket).blob("plain").open("rb") as f:
        assert f.read() == data
    url = raw_gcs._connection.API_BASE_URL
    assert raw_gcs._http.request("GET", f"{url}/{gcs_bucket}/plain").content == data
    for owner, name, _ in DOORS:
        assert getattr(owner, name).sealstore_original


def test_raw_block_gives_the_stored_bytes(gcs, sealed_blob):
    with gcs.sealstore.raw():
        stored = sealed_blob.download_as_bytes()
        assert sealed_blob.size == len(stored)
    assert stored[:4] == b"SSOB" and b"secret" not in stored


def test_unsupported_arguments_are_refused(gcs, gcs_bucket, sealed_blob):
    with pytest.raises(UnsupportedOperation):
        sealed_blob.download_as_bytes(if_metageneration_match=1)
    with pytest.raises(UnsupportedOperation):
        gcs.bucket(gcs_bucket).copy_blob(
            sealed_blob, gcs.bucket(gcs_bucket), "x", if_source_metageneration_match=1
        )
    with pytest.raises(UnsupportedOperation):
        gcs.bucket(gcs_bucket).blob("n").upload_from_file(
            io.BytesIO(b"x"), predefined_acl="private"
        )


def test_customer_supplied_keys_are_refused_not_dropped(gcs, raw_gcs, gcs_bucket, sealed_blob):
    csek = os.urandom(32)
    blob = gcs.bucket(gcs_bucket).blob("csek", encryption_key=csek)
    with pytest.raises(UnsupportedOperation, match="customer-supplied") as err:
        blob.upload_from_string(b"x")
    assert csek.hex() not in str(err.value) and repr(csek) not in str(err.value)
    with pytest.raises(UnsupportedOperation, match="customer-supplied"):
        gcs.bucket(gcs_bucket).blob("k", encryption_key=csek).download_as_bytes()
    assert objects(raw_gcs, gcs_bucket) == ["k"]


def test_kms_key_name_is_carried(gcs, raw_gcs, gcs_bucket):
    blob = gcs.bucket(gcs_bucket).blob(
        "kms", kms_key_name="projects/p/locations/l/keyRings/r/cryptoKeys/k"
    )
    blob.upload_from_string(b"under a KMS key too")
    assert blob.download_as_bytes() == b"under a KMS key too"
