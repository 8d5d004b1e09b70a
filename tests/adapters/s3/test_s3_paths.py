"""Nothing leaves an encrypted client in clear: boto3's CRT transfer manager is never used for
it (awscrt installed, ``preferred_transfer_client="crt"`` or a CRT-optimized instance), presigned
uploads and downloads are refused, and aiobotocore clients are refused whole.

The stored bytes are read back with a plain client over HTTP (moto's server)."""

from __future__ import annotations

import asyncio
import io
import os
import urllib.request

import awscrt
import awscrt.s3
import boto3
import boto3.s3.transfer as boto3_transfer
import pytest
from boto3.s3.transfer import S3Transfer, TransferConfig, create_transfer_manager
from fixtures_s3 import REGION, make_client
from s3transfer.crt import CRTTransferManager
from sealstore.adapters.s3 import encrypt_client
from sealstore.errors import UnsealedPath, UnsupportedClient, UnsupportedOperation
from sealstore.keyring import Keyring

SEG = 4096
CRT = TransferConfig(preferred_transfer_client="crt", multipart_threshold=5 << 20)


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128L", 32)


@pytest.fixture
def s3(s3_endpoint, keyring):
    return encrypt_client(make_client(s3_endpoint), keyring, segment_size=SEG)


@pytest.fixture
def data():
    return b"PLAINTEXT-MARKER" + os.urandom(6 << 20)  # above the multipart threshold


def assert_sealed(raw_s3, bucket, key, data):
    stored = raw_s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert stored.startswith(b"SSOB")
    assert b"PLAINTEXT-MARKER" not in stored and data[100:200] not in stored


class TestCrtIsNeverUsed:
    def test_uploads_with_crt_preferred_are_sealed(self, s3, raw_s3, bucket, data, tmp_path):
        path = tmp_path / "f.bin"
        path.write_bytes(data)
        s3.upload_file(str(path), bucket, "file", Config=CRT)
        s3.upload_fileobj(io.BytesIO(data), bucket, "fileobj", Config=CRT)
        for key in ("file", "fileobj"):
            assert_sealed(raw_s3, bucket, key, data)
            assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data

    def test_downloads_with_crt_preferred_are_opened(self, s3, bucket, data, tmp_path):
        s3.put_object(Bucket=bucket, Key="k", Body=data)
        out = tmp_path / "out.bin"
        s3.download_file(bucket, "k", str(out), Config=CRT)
        assert out.read_bytes() == data
        buf = io.BytesIO()
        s3.download_fileobj(bucket, "k", buf, Config=CRT)
        assert buf.getvalue() == data

    def test_resource_api_with_crt_preferred(self, s3, raw_s3, bucket, data, tmp_path):
        path = tmp_path / "f.bin"
        path.write_bytes(data)
        resource = boto3.resource("s3", region_name=REGION)
        resource.meta.client = s3  # how an app shares one encrypted client with a resource
        resource.Bucket(bucket).upload_file(str(path), "res", Config=CRT)
        assert_sealed(raw_s3, bucket, "res", data)

    def test_crt_optimized_instance_still_sealed(
        self, s3, raw_s3, bucket, data, tmp_path, monkeypatch
    ):
        monkeypatch.setattr(awscrt.s3, "is_optimized_for_system", lambda: True)
        assert boto3_transfer._should_use_crt(TransferConfig())  # boto3 would pick the CRT
        path = tmp_path / "f.bin"
        path.write_bytes(data)
        s3.upload_file(str(path), bucket, "auto")  # default config: "auto"
        with S3Transfer(s3) as transfer:  # boto3's own class, not the client's methods
            transfer.upload_file(str(path), bucket, "s3transfer")
            out = tmp_path / "out.bin"
            transfer.download_file(bucket, "s3transfer", str(out))
        for key in ("auto", "s3transfer"):
            assert_sealed(raw_s3, bucket, key, data)
        assert out.read_bytes() == data

    def test_transfer_manager_of_an_encrypted_client_is_classic(self, s3, raw_s3):
        with create_transfer_manager(raw_s3, CRT) as manager:  # the check is real...
            if not isinstance(manager, CRTTransferManager):  # e.g. boto3 1.35 with today's awscrt
                pytest.skip(
                    f"boto3 {boto3.__version__} with awscrt {awscrt.__version__} never picks the CRT "
                    "manager, even for a plain client: nothing to refuse"
                )
        with create_transfer_manager(s3, CRT) as manager:  # ...and says no for sealstore
            assert not isinstance(manager, CRTTransferManager)


class TestPresigned:
    @pytest.mark.parametrize(
        "method, params",
        [
            ("put_object", {}),
            ("get_object", {}),
            ("upload_part", {"UploadId": "u", "PartNumber": 1}),
            ("create_multipart_upload", {}),
            ("complete_multipart_upload", {"UploadId": "u"}),
        ],
    )
    def test_refused(self, s3, bucket, method, params):
        with pytest.raises(UnsealedPath) as info:
            s3.generate_presigned_url(method, Params={"Bucket": bucket, "Key": "k", **params})
        assert isinstance(info.value, UnsupportedOperation)

    def test_post_refused(self, s3, bucket):
        with pytest.raises(UnsealedPath, match="presigned_post"):
            s3.generate_presigned_post(bucket, "k")
        with pytest.raises(UnsealedPath, match="presigned_post"):
            s3.generate_presigned_post(bucket, "k", Conditions=[["content-length-range", 0, 9]])
        s3.generate_presigned_url("create_bucket", Params={"Bucket": "other"})  # no body

    def test_presigned_put_stores_nothing(self, s3, raw_s3, bucket):
        """The URL is never made, so no upload can land unsealed under sealstore metadata."""
        with pytest.raises(UnsealedPath):
            s3.generate_presigned_url(
                "put_object", Params={"Bucket": bucket, "Key": "k", "Body": b"x"}
            )
        assert raw_s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0

    @pytest.mark.parametrize("method, http", [("head_object", "PUT"), ("delete_object", "PUT"),
                                              ("head_object", "GET"), ("head_object", "POST")])  # fmt: skip
    def test_method_override_refused(self, s3, raw_s3, bucket, method, http):
        """``HttpMethod`` re-targets a harmless operation's URL at the object's body."""
        with pytest.raises(UnsealedPath):
            s3.generate_presigned_url(
                method, Params={"Bucket": bucket, "Key": "k"}, HttpMethod=http
            )
        # the same override on a plain client does make a working upload URL
        url = raw_s3.generate_presigned_url(
            "head_object", Params={"Bucket": bucket, "Key": "k"}, HttpMethod="PUT"
        )
        req = urllib.request.Request(
            url, data=b"in clear", method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )  # fmt: skip
        with urllib.request.urlopen(req) as resp:  # noqa: S310 - the local moto server
            assert resp.status == 200
        assert raw_s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"in clear"

    def test_others_and_raw_still_presign(self, s3, bucket):
        s3.put_object(Bucket=bucket, Key="k", Body=b"secret")
        s3.generate_presigned_url("delete_object", Params={"Bucket": bucket, "Key": "k"})
        with s3.sealstore.raw():  # deliberately the sealed bytes
            url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
        with urllib.request.urlopen(url) as resp:  # noqa: S310 - the local moto server
            body = resp.read()
        assert body.startswith(b"SSOB") and b"secret" not in body


def test_aiobotocore_client_is_refused(s3_endpoint, raw_s3, bucket, keyring):
    # in the test extra; only CI's lowest-versions venv leaves it out (it pins its own botocore)
    get_session = pytest.importorskip("aiobotocore.session").get_session

    async def run():
        session = get_session()
        async with session.create_client(
            "s3", endpoint_url=s3_endpoint, region_name=REGION,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        ) as client:  # fmt: skip
            with pytest.raises(UnsupportedClient, match="aiobotocore") as info:
                encrypt_client(client, keyring)
            assert isinstance(info.value, TypeError)
            assert getattr(client, "sealstore", None) is None
            # nothing was half-installed: the client stores what it is given, as before
            await client.put_object(Bucket=bucket, Key="k", Body=b"as given")

    asyncio.run(run())
    assert raw_s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"as given"
