"""S3 test fixtures: one moto S3 server over HTTP for the session, and boto3 clients for it.

The server is ``moto.server.ThreadedMotoServer`` on 127.0.0.1 and a free port, so every test
talks real HTTP (signing, streaming bodies, ranged responses) rather than an in-process mock.
Clients use dummy credentials and path-style addressing.  Registered through ``pytest_plugins``
in ``conftest.py``.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import uuid

import boto3
import pytest
from botocore.config import Config
from fixtures_pg import _in_ci

REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_client(endpoint: str, **config):
    """A plain boto3 S3 client for ``endpoint`` with dummy credentials."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}, **config),
    )


def start_server(port: int | None = None):
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log per request
    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def s3_endpoint():
    """URL of the session's moto S3 server."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "testing")
    server, url = start_server()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_endpoint_process():
    """A moto S3 server in a child process: its memory is not this process's (tracemalloc)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail("the moto server process exited")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def raw_s3(s3_endpoint):
    """A plain client (no sealing), for creating buckets and inspecting stored bytes."""
    return make_client(s3_endpoint)


@pytest.fixture
def bucket(raw_s3):
    """A fresh, empty bucket per test."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    raw_s3.create_bucket(Bucket=name)
    return name


# ---- LocalStack: a second, independent S3 implementation --------------------------------------
#
# ``localstack_endpoint`` (session scope) runs LocalStack's S3 provider and its KMS (for SSE-KMS
# objects) from PyPI localstack-core, installed by tools/localstack.sh in a venv of its own, in
# the foreground of a child process on 127.0.0.1 and a free port, waits for
# ``/_localstack/health`` to report S3 up, and stops it at the end of the session.  ``SEALSTORE_LOCALSTACK_PY`` names that venv's python (default
# /opt/sealstore-localstack/bin/python); ``SEALSTORE_TEST_LOCALSTACK_URL`` points at a server
# already running instead.  Without it the LocalStack tests are skipped, except in CI (CI=true),
# where that is a failure.

LOCALSTACK_PY = "/opt/sealstore-localstack/bin/python"
LOCALSTACK_START_TIMEOUT = 90.0


def _localstack_unavailable(reason: str):
    if _in_ci():
        pytest.fail(f"LocalStack is required in CI (CI=true): {reason}", pytrace=False)
    pytest.skip(f"LocalStack not available: {reason}")


def localstack_env(port: int, root: str) -> dict:
    """The environment of a LocalStack runtime serving S3 only, on 127.0.0.1:``port``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LOCALSTACK_"))}
    env.update(
        GATEWAY_LISTEN=f"127.0.0.1:{port}",
        GATEWAY_SERVER="hypercorn",  # binds what GATEWAY_LISTEN says, nothing else
        SERVICES="s3,kms",  # KMS for SSE-KMS objects
        EAGER_SERVICE_LOADING="1",  # S3 is ready when health says so
        SKIP_SSL_CERT_DOWNLOAD="1",
        OVERRIDE_IN_DOCKER="0",
        DNS_ADDRESS="0",  # no DNS server (it would listen on port 53 of every address)
        DISABLE_EVENTS="1",  # no analytics
        FILESYSTEM_ROOT=root,
        LS_LOG="warn",
    )
    return env


def _localstack_ready(url: str) -> bool:
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/_localstack/health", timeout=2) as resp:
            services = json.load(resp).get("services", {})
    except (OSError, ValueError):
        return False
    return all(services.get(name) in ("available", "running") for name in ("s3", "kms"))


class LocalStackServer:
    """One LocalStack runtime in a child process (see above)."""

    def __init__(self, python: str) -> None:
        import tempfile

        self.python = python
        self.root = tempfile.mkdtemp(prefix="sealstore-localstack-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.root, "localstack.log"), "w+b")
        self.proc = None

    def start(self) -> str:
        self.proc = subprocess.Popen(
            [self.python, "-m", "localstack.runtime.main"],
            env=localstack_env(self.port, self.root),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + LOCALSTACK_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"LocalStack exited ({self.proc.returncode}):\n{self.tail()}")
            if _localstack_ready(self.url):
                return self.url
            time.sleep(0.2)
        raise RuntimeError(
            f"LocalStack did not report S3 up in {LOCALSTACK_START_TIMEOUT} s:\n{self.tail()}"
        )

    def tail(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-3000:].decode(errors="replace")

    def stop(self) -> None:
        import shutil

        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)  # it waits for idle client connections; nothing to keep
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def localstack_endpoint():
    """URL of the session's LocalStack S3 (started on first use)."""
    given = os.environ.get("SEALSTORE_TEST_LOCALSTACK_URL")
    if given:
        if not _localstack_ready(given.rstrip("/")):
            _localstack_unavailable(f"{given} does not report S3 up")
        yield given.rstrip("/")
        return
    python = os.environ.get("SEALSTORE_LOCALSTACK_PY", LOCALSTACK_PY)
    if not os.access(python, os.X_OK):
        _localstack_unavailable(f"no {python} (install it with tools/localstack.sh)")
    server = LocalStackServer(python)
    try:
        try:
            url = server.start()
        except (OSError, RuntimeError) as exc:
            _localstack_unavailable(str(exc))
        yield url
    finally:
        server.stop()


@pytest.fixture(params=["moto", "localstack"])
def s3_backend(request):
    """``(name, endpoint)`` of each S3 implementation: moto's server and LocalStack."""
    fixture = "s3_endpoint" if request.param == "moto" else "localstack_endpoint"
    return request.param, request.getfixturevalue(fixture)
