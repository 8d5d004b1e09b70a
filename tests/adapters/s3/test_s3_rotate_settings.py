"""``sealstore s3 rotate`` keeps everything an object had, on moto and on LocalStack: content
headers, user metadata, tags, storage class, SSE-S3 and SSE-KMS (key id, bucket key), the ACL,
object-lock retention and legal hold; on each way rotation writes (a re-seal with PutObject, a
metadata repair with CopyObject, and both above the single-request limit as multipart uploads,
scaled down here to 6 MiB)."""

from __future__ import annotations

import datetime as dt
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError
from fixtures_s3 import REGION, make_client
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3 import settings
from sealstore.adapters.s3.rotate import rotate_objects
from sealstore.errors import UnsupportedOperation
from sealstore.keyring import Keyring
from test_s3_backends import MARK, plaintext

SEG = 4096
MiB = 1 << 20
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
CONTENT = {
    "ContentType": "x/y",
    "ContentDisposition": 'attachment; filename="a.bin"',
    "ContentLanguage": "fr",
    "CacheControl": "max-age=60",
    "ContentEncoding": "identity",
    "WebsiteRedirectLocation": "/elsewhere",
    "Expires": dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
}
# path -> (outcome, plaintext size): re-seal / metadata repair, single request / multipart
PATHS = {
    "reseal": ("resealed", 3 * SEG + 5),
    "repair": ("repaired", 3 * SEG + 5),
    "large-reseal": ("resealed", 7 * MiB),
    "large-repair": ("repaired", 7 * MiB),
}


@pytest.fixture(params=list(PATHS))
def path(request, monkeypatch):
    if request.param.startswith("large"):
        from test_s3_rotate import scale_down

        scale_down(monkeypatch)
    return request.param


class Setup:
    """A bucket on one backend, and objects written by a plain client with given settings."""

    def __init__(self, url: str, **bucket_args) -> None:
        self.url = url
        self.raw = make_client(url)
        self.bucket = f"t-{uuid.uuid4().hex[:20]}"
        self.raw.create_bucket(Bucket=self.bucket, **bucket_args)
        self.keyring = Keyring.generate()
        self.s3 = encrypt_client(make_client(url), self.keyring, segment_size=SEG)

    def write(self, key: str, path: str, settings: dict) -> bytes:
        """``key`` sealed (under an old key for a re-seal, without its sealstore metadata for a
        repair), written by the plain client with ``settings``; returns its plaintext."""
        outcome, size = PATHS[path]
        data = plaintext(size)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)  # sealed for where it stays
        stage = self.raw.get_object(Bucket=self.bucket, Key=key)
        meta = {**settings.pop("Metadata", {})}
        if outcome == "resealed":
            meta.update(stage["Metadata"])
        self.raw.put_object(
            Bucket=self.bucket, Key=key, Body=stage["Body"].read(), Metadata=meta, **settings
        )
        if outcome == "resealed":
            self.keyring.rotate()
        return data

    def rotate(self, key: str, path: str) -> dict:
        """Rotate ``key``; check it was written the way ``path`` says; its HeadObject after."""
        report = rotate_objects(self.s3, self.bucket, key)
        assert report.failures == [] and getattr(report, PATHS[path][0]) == 1, report
        head = self.raw.head_object(Bucket=self.bucket, Key=key)
        assert head["Metadata"]["sealstore-key-id"] == self.keyring.primary.id_hex
        return head

    def check_plaintext(self, key: str, data: bytes) -> None:
        assert self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read() == data
        sealed = self.raw.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        assert sealed.startswith(b"SSOB") and MARK not in sealed


def test_headers_metadata_tags_storage_class_acl(s3_backend, path):
    setup = Setup(s3_backend[1])
    owner = setup.raw.get_bucket_acl(Bucket=setup.bucket)["Owner"]["ID"]
    data = setup.write("k", path, {
        **CONTENT, "Metadata": {"app": "kept"}, "Tagging": "team=blue&note=a%20b&odd=a%3Db%2Bc%2Fd%3Ae%40f",
        "StorageClass": "STANDARD_IA", "GrantRead": f'uri="{ALL_USERS}"',
        "GrantFullControl": f'id="{owner}"',
    })  # fmt: skip
    head = setup.rotate("k", path)
    for name, value in CONTENT.items():
        assert head.get(name) == value, name
    assert head["Metadata"]["app"] == "kept"
    assert head.get("StorageClass") == "STANDARD_IA"
    tags = setup.raw.get_object_tagging(Bucket=setup.bucket, Key="k")["TagSet"]
    assert sorted((t["Key"], t["Value"]) for t in tags) == [
        ("note", "a b"),
        ("odd", "a=b+c/d:e@f"),
        ("team", "blue"),
    ]
    grants = setup.raw.get_object_acl(Bucket=setup.bucket, Key="k")["Grants"]
    assert {(g["Grantee"].get("URI") or g["Grantee"].get("ID"), g["Permission"]) for g in grants} == {
        (ALL_USERS, "READ"), (owner, "FULL_CONTROL")
    }  # fmt: skip
    setup.check_plaintext("k", data)


def test_private_acl_and_no_tags_stay_so(s3_backend):
    """Nothing is added: an object with the default ACL, no tags and STANDARD keeps them."""
    setup = Setup(s3_backend[1])
    data = setup.write("k", "reseal", {})
    setup.rotate("k", "reseal")
    assert setup.raw.get_object_tagging(Bucket=setup.bucket, Key="k")["TagSet"] == []
    grants = setup.raw.get_object_acl(Bucket=setup.bucket, Key="k")["Grants"]
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]
    assert setup.raw.head_object(Bucket=setup.bucket, Key="k").get("StorageClass") in (
        None,
        "STANDARD",
    )
    setup.check_plaintext("k", data)


@pytest.mark.parametrize("sse", ["AES256", "aws:kms"])
def test_server_side_encryption(s3_backend, path, sse):
    if s3_backend[0] == "moto" and sse == "aws:kms" and path.startswith("large"):
        pytest.skip("moto's CreateMultipartUpload drops BucketKeyEnabled (LocalStack keeps it)")
    setup = Setup(s3_backend[1])
    settings = {"ServerSideEncryption": sse}
    if sse == "aws:kms":
        kms = boto3.client("kms", endpoint_url=setup.url, region_name=REGION,
                           aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
        key = kms.create_key(Description="sealstore test")["KeyMetadata"]["Arn"]
        settings.update(SSEKMSKeyId=key, BucketKeyEnabled=True)
    data = setup.write("k", path, dict(settings))
    head = setup.rotate("k", path)
    assert head["ServerSideEncryption"] == sse
    if sse == "aws:kms":
        assert head["SSEKMSKeyId"] == key
        assert head.get("BucketKeyEnabled") is True
    setup.check_plaintext("k", data)


@pytest.mark.parametrize("mode", ["GOVERNANCE", "COMPLIANCE"])
def test_object_lock_and_legal_hold(s3_backend, path, mode):
    if s3_backend[0] == "moto" and path != "reseal":
        pytest.skip(
            "moto's CreateMultipartUpload drops object-lock settings and its CopyObject asks for "
            "a Content-MD5 to set them (LocalStack, like S3, takes both)"
        )
    setup = Setup(s3_backend[1], ObjectLockEnabledForBucket=True)
    until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).replace(microsecond=0)
    data = setup.write("k", path, {
        "ObjectLockMode": mode, "ObjectLockRetainUntilDate": until, "ObjectLockLegalHoldStatus": "ON",
    })  # fmt: skip
    before = setup.raw.head_object(Bucket=setup.bucket, Key="k")["VersionId"]
    head = setup.rotate("k", path)
    assert head["VersionId"] != before  # a new version; the locked one stays as it was
    assert head["ObjectLockMode"] == mode
    assert head["ObjectLockRetainUntilDate"] == until
    assert head["ObjectLockLegalHoldStatus"] == "ON"
    setup.check_plaintext("k", data)


class FakeAcl:
    """A client whose GetObjectAcl answers ``grants`` (or raises ``error``)."""

    def __init__(self, grants=(), error=None) -> None:
        self.grants, self.error = list(grants), error

    def get_object_acl(self, **kw):
        if self.error:
            raise ClientError({"Error": {"Code": self.error}}, "GetObjectAcl")
        return {"Owner": {"ID": "me"}, "Grants": self.grants}


@pytest.mark.parametrize("code", ["AccessDenied", "AccessControlListNotSupported"])
def test_unreadable_acl_keeps_the_default(code):
    assert settings._grants(FakeAcl(error=code), "b", "k", {}) == {}
    with pytest.raises(ClientError):  # any other error is the run's to report
        settings._grants(FakeAcl(error="InternalError"), "b", "k", {})


def test_acl_grant_a_write_cannot_repeat_is_refused():
    grant = {"Grantee": {"Type": "CanonicalUser", "ID": "other"}, "Permission": "WRITE"}
    with pytest.raises(UnsupportedOperation):
        settings._grants(FakeAcl([grant]), "b", "k", {})


def test_acl_grantee_kinds():
    grants = [
        {"Grantee": {"Type": "CanonicalUser", "ID": "me"}, "Permission": "FULL_CONTROL"},
        {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"},
        {
            "Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": "a@b.c"},
            "Permission": "READ",
        },
        {"Grantee": {"Type": "CanonicalUser", "ID": "other"}, "Permission": "WRITE_ACP"},
    ]
    assert settings._grants(FakeAcl(grants), "b", "k", {}) == {
        "GrantFullControl": 'id="me"',
        "GrantRead": f'uri="{ALL_USERS}", emailAddress="a@b.c"',
        "GrantWriteACP": 'id="other"',
    }
