"""A sealed GET whose connection drops mid-body resumes from the next unread byte: an If-Match
ranged GET of the same ETag, so the caller gets the exact plaintext, an object replaced
meanwhile fails with 412 instead of mixing two versions, and a body that keeps dropping raises
once the attempts are spent.  The drops are real: a TCP proxy between the client and the
server (moto's and LocalStack's) closes the connection after so many response bytes."""

from __future__ import annotations

import io
import os
import re
import socket
import threading
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError
from fixtures_s3 import make_client
from sealstore.adapters.s3 import encrypt_client
from sealstore.adapters.s3.body import DROPPED
from sealstore.keyring import Keyring

SEG = 64 * 1024
SIZE = 1024 * 1024 + 12345
CUT_AFTER = 300_000  # response bytes on one connection before the proxy cuts it


class CuttingProxy:
    """127.0.0.1 TCP proxy to ``upstream`` that closes a connection once more than
    ``cut_after`` response bytes went through it, ``cuts`` times in all (then it passes
    everything); ``on_cut`` runs just before a cut.  ``sent`` holds every request byte."""

    def __init__(self, upstream: str, cut_after: int, cuts: int = 1, on_cut=None) -> None:
        u = urlsplit(upstream)
        self._upstream = (u.hostname, u.port)
        self._cut_after, self.cuts_left, self._on_cut = cut_after, cuts, on_cut
        self.cut = 0
        self.sent = bytearray()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client) -> None:
        up = socket.create_connection(self._upstream)
        threading.Thread(target=self._requests, args=(client, up), daemon=True).start()
        seen = 0
        try:
            while chunk := up.recv(65536):
                seen += len(chunk)
                with self._lock:
                    cut = self.cuts_left > 0 and seen > self._cut_after
                    if cut:
                        self.cuts_left -= 1
                        self.cut += 1
                if cut:
                    if self._on_cut:
                        self._on_cut()
                    return
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _requests(self, client, up) -> None:
        try:
            while chunk := client.recv(65536):
                with self._lock:
                    self.sent += chunk
                up.sendall(chunk)
        except OSError:
            pass

    def request_heads(self) -> list[str]:
        """Every request line and headers (bodies too: only header lines are searched)."""
        return self.sent.decode("latin-1").split("\r\n\r\n")

    def close(self) -> None:
        self._server.close()


@pytest.fixture(scope="module")
def keyring():
    return Keyring.generate("AEGIS-128X2")


@pytest.fixture
def backend(s3_backend):
    name, url = s3_backend
    raw = make_client(url)
    bucket = f"resume-{os.urandom(6).hex()}"
    raw.create_bucket(Bucket=bucket)
    return url, raw, bucket


def _through(proxy, keyring):
    return encrypt_client(make_client(proxy.url), keyring, segment_size=SEG)


def _stored(backend, keyring, data: bytes, key: str = "big") -> None:
    url, _, bucket = backend
    encrypt_client(make_client(url), keyring, segment_size=SEG).put_object(
        Bucket=bucket, Key=key, Body=data
    )


def _ranges_asked(proxy) -> list[str]:
    return [m.group(1) for h in proxy.request_heads()
            for m in [re.search(r"(?im)^range:\s*(bytes=\S+)", h)] if m]  # fmt: skip


def test_a_whole_get_cut_short_resumes_with_an_if_match_range(backend, keyring):
    url, _, bucket = backend
    data = os.urandom(SIZE)
    _stored(backend, keyring, data)
    proxy = CuttingProxy(url, CUT_AFTER)
    try:
        body = _through(proxy, keyring).get_object(Bucket=bucket, Key="big")["Body"]
        assert body.read() == data
    finally:
        proxy.close()
    assert proxy.cut == 1
    resumed = _ranges_asked(proxy)
    assert len(resumed) == 1 and re.fullmatch(r"bytes=\d+-\d+", resumed[0]), resumed
    first = int(resumed[0][6:].split("-")[0])
    assert 0 < first <= CUT_AFTER  # from the next unread byte, not from the start
    heads = "\n".join(proxy.request_heads())
    assert re.search(r"(?im)^if-match:", heads)


@pytest.mark.parametrize("rng", ["bytes=100000-900000", "bytes=500-", "bytes=-700000"])
def test_a_ranged_get_cut_short_resumes(backend, keyring, rng):
    url, _, bucket = backend
    data = os.urandom(SIZE)
    _stored(backend, keyring, data)
    proxy = CuttingProxy(url, CUT_AFTER)
    try:
        got = (
            _through(proxy, keyring).get_object(Bucket=bucket, Key="big", Range=rng)["Body"].read()
        )
    finally:
        proxy.close()
    first, last = rng[6:].split("-")
    if not first:
        expected = data[-int(last) :]
    else:
        expected = data[int(first) : int(last) + 1 if last else None]
    assert got == expected
    assert proxy.cut == 1


def test_download_fileobj_cut_short_gets_the_exact_plaintext(backend, keyring):
    url, _, bucket = backend
    data = os.urandom(SIZE)
    _stored(backend, keyring, data)
    proxy = CuttingProxy(url, CUT_AFTER)
    out = io.BytesIO()
    try:
        _through(proxy, keyring).download_fileobj(bucket, "big", out)
    finally:
        proxy.close()
    assert out.getvalue() == data
    assert proxy.cut == 1


def test_an_object_replaced_before_the_resume_fails_rather_than_mixing_versions(backend, keyring):
    url, _, bucket = backend
    first_version, second_version = os.urandom(SIZE), os.urandom(SIZE)
    _stored(backend, keyring, first_version)
    proxy = CuttingProxy(url, CUT_AFTER, on_cut=lambda: _stored(backend, keyring, second_version))
    try:
        body = _through(proxy, keyring).get_object(Bucket=bucket, Key="big")["Body"]
        with pytest.raises(ClientError) as e:
            body.read()
    finally:
        proxy.close()
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


def test_a_body_that_keeps_dropping_raises_once_the_attempts_are_spent(backend, keyring):
    url, _, bucket = backend
    data = os.urandom(SIZE)
    _stored(backend, keyring, data)
    proxy = CuttingProxy(url, 100_000, cuts=100)  # every response above 100 kB is cut
    try:
        body = _through(proxy, keyring).get_object(Bucket=bucket, Key="big")["Body"]
        with pytest.raises(DROPPED):
            body.read()
    finally:
        proxy.close()
    assert (
        1 + 4 <= proxy.cut <= 1 + 4 + 2
    )  # the first GET, four resumes (and botocore's own retries)


def test_small_bodies_and_uncut_reads_ask_nothing_more(backend, keyring):
    url, _, bucket = backend
    data = os.urandom(SIZE)
    _stored(backend, keyring, data)
    proxy = CuttingProxy(url, CUT_AFTER, cuts=0)
    try:
        assert _through(proxy, keyring).get_object(Bucket=bucket, Key="big")["Body"].read() == data
    finally:
        proxy.close()
    assert _ranges_asked(proxy) == []
