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
        config=Config(
            s3={"addressing_style": "path"}, retries={"max_attempts": 2}, **config
        ),
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
