"""The LocalStack fixture itself: in CI a missing server fails, the runtime it starts listens
on 127.0.0.1 only and serves S3."""

from __future__ import annotations

import json
import socket
import urllib.request
from urllib.parse import urlparse

import pytest

import fixtures_s3


def test_missing_localstack_skips_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        fixtures_s3._localstack_unavailable("not installed")


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_missing_localstack_fails_in_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        fixtures_s3._localstack_unavailable("not installed")


def test_runtime_settings_bind_loopback_only():
    env = fixtures_s3.localstack_env(4566, "/tmp/x")
    assert env["GATEWAY_LISTEN"] == "127.0.0.1:4566" and env["GATEWAY_SERVER"] == "hypercorn"
    assert env["DNS_ADDRESS"] == "0" and env["OVERRIDE_IN_DOCKER"] == "0"
    assert not any(k.startswith("AWS_") for k in env)


def test_localstack_serves_s3_on_loopback(localstack_endpoint):
    url = urlparse(localstack_endpoint)
    assert url.hostname == "127.0.0.1"
    client = fixtures_s3.make_client(localstack_endpoint)
    client.create_bucket(Bucket="fixture-check")
    client.put_object(Bucket="fixture-check", Key="k", Body=b"v")
    assert client.get_object(Bucket="fixture-check", Key="k")["Body"].read() == b"v"
    with urllib.request.urlopen(f"{localstack_endpoint}/_localstack/health") as resp:
        assert json.load(resp)["version"] == "4.4.0"  # LocalStack's own S3, not moto's
    with socket.socket() as s:  # nothing on another address of this host for that port
        s.settimeout(1)
        assert s.connect_ex(("127.0.0.2", url.port)) != 0
