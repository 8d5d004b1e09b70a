"""The GCS emulator fixture itself: in CI a missing emulator fails (locally it skips), the
emulator it starts listens on 127.0.0.1 only, keeps objects on disk where the tests scan them,
and clients reach it through STORAGE_EMULATOR_HOST."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

import fixtures_gcs


def test_missing_emulator_skips_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        fixtures_gcs._gcs_unavailable("not installed")


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_missing_emulator_fails_in_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        fixtures_gcs._gcs_unavailable("not installed")


def test_emulator_serves_on_loopback_and_stores_on_disk(gcs_emulator, raw_gcs, gcs_bucket):
    url = urlparse(gcs_emulator.url)
    assert url.hostname == "127.0.0.1"
    assert os.environ["STORAGE_EMULATOR_HOST"] == gcs_emulator.url
    raw_gcs.bucket(gcs_bucket).blob("k").upload_from_string(b"fixture-check-bytes")
    assert any(p.read_bytes() == b"fixture-check-bytes" for p in gcs_emulator.stored_files())
    with socket.socket() as s:  # nothing on another address of this host for that port
        s.settimeout(1)
        assert s.connect_ex(("127.0.0.2", url.port)) != 0
