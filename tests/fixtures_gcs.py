"""Google Cloud Storage test fixtures: one ``gcp-storage-emulator`` server for the session, and
``google.cloud.storage`` clients for it.

The emulator (PyPI ``gcp-storage-emulator``, the ``test`` extra) runs in a child process on
127.0.0.1 and a free port, storing objects on disk under a temporary directory
(``gcs_emulator.data_dir``), so tests can scan the stored bytes.  Clients reach it through
``STORAGE_EMULATOR_HOST`` with anonymous credentials, as google-cloud-storage documents for
emulators.  Without the package the GCS tests are skipped, except in CI (CI=true), where that is
a failure.  Registered through ``pytest_plugins`` in ``conftest.py``.

What the emulator (2026.7.19) serves, as the GCS tests rely on it: the JSON API's objects
(insert as ``media``, ``multipart`` and ``resumable`` uploads in chunks of 256 KiB multiples,
get, list with prefix, patch, delete, ``copyTo``, ``rewriteTo`` in one call, ``compose``), media
downloads with a ``Range`` of ``bytes=F-L`` or ``bytes=F-`` (not a suffix), and of the XML API a
single PUT and GET of ``/BUCKET/OBJECT`` (no XML multipart upload).  It ignores every
precondition (``ifGenerationMatch`` and friends are not checked) and keeps no object versions.
It serves one request at a time: a client that streams an object from it while uploading to it
(a re-sealing copy, a rotation) waits for the first answer to be sent whole, which loopback
socket buffers hold up to some MiB (a 12 MiB copy passes, a 48 MiB one times out), so the tests
copy and rotate objects below that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures_pg import _in_ci
from fixtures_s3 import free_port

EMULATOR_START_TIMEOUT = 30.0


def _gcs_unavailable(reason: str):
    if _in_ci():
        pytest.fail(f"the GCS emulator is required in CI (CI=true): {reason}", pytrace=False)
    pytest.skip(f"GCS emulator not available: {reason}")


@dataclass(frozen=True)
class GcsEmulator:
    url: str  #: http://127.0.0.1:PORT
    data_dir: Path  #: where the emulator keeps the stored bytes (under .cloudstorage/)

    def stored_files(self) -> list[Path]:
        return [p for p in self.data_dir.rglob("*") if p.is_file()]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/", timeout=2) as resp:
            return resp.read() == b"OK"
    except OSError:
        return False


@pytest.fixture(scope="session")
def gcs_emulator():
    """The session's GCS emulator (started on first use); STORAGE_EMULATOR_HOST points at it."""
    try:
        import gcp_storage_emulator  # noqa: F401
        import google.cloud.storage  # noqa: F401
    except ImportError as exc:
        _gcs_unavailable(f"{exc.name} is not installed (pip install -e '.[test]')")
    root = Path(tempfile.mkdtemp(prefix="sealstore-gcs-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(root / "emulator.log", "w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "-d", str(root / "data"), "start",
         "--host", "127.0.0.1", "--port", str(port), "-q"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    before = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        deadline = time.monotonic() + EMULATOR_START_TIMEOUT
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                _gcs_unavailable(f"the emulator did not start: {log.read()[-2000:]!r}")
            time.sleep(0.1)
        os.environ["STORAGE_EMULATOR_HOST"] = url
        yield GcsEmulator(url, root / "data")
    finally:
        if before is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = before
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def make_gcs_client(emulator: GcsEmulator):
    """A plain ``google.cloud.storage.Client`` for the emulator (anonymous credentials)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project="sealstore-test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": emulator.url},
    )


@pytest.fixture
def raw_gcs(gcs_emulator):
    """A plain client (no sealing), for creating buckets and inspecting stored bytes."""
    return make_gcs_client(gcs_emulator)


@pytest.fixture
def gcs_bucket(raw_gcs):
    """A fresh, empty bucket per test (its name)."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    raw_gcs.create_bucket(name)
    return name
