"""Secret hygiene: keys are wiped in C before their memory is freed, and no key or plaintext
shows up in an exception message, a repr, a log record or printed output."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sealstore import AEGIS128L, AEGIS128X2, AEGIS128X4, AESGCM, Keyring
from sealstore.keyring import Key, KeyState

pytestmark = pytest.mark.wheel  # run on the built wheel too (.ci/run, the 3.13 step)

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
IN_CI = os.environ.get("CI", "").lower() == "true"


def kernel_sources() -> list[str]:
    sys.path.insert(0, str(NATIVE))
    try:
        import build_ffi
    finally:
        sys.path.pop(0)
    return [str(ROOT / p) for p in build_ffi.kernel_sources()]


@pytest.fixture(scope="module")
def wipe_exe(tmp_path_factory) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        if IN_CI:
            pytest.fail("no C compiler in CI")
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("wipe") / "wipe"
    r = subprocess.run(
        [
            cc,
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{NATIVE / 'include'}",
            str(ROOT / "tests" / "native" / "wipe.c"),
            *kernel_sources(),
            "-Wl,--wrap=free",
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode and "--wrap" in r.stderr:
        pytest.skip("the linker has no --wrap")
    assert r.returncode == 0, r.stderr
    return exe


def test_c_contexts_are_wiped_before_free(wipe_exe):
    r = subprocess.run([str(wipe_exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) >= 6 and all(line.endswith(": wiped") for line in lines), r.stdout


def test_wipe_check_catches_a_plain_free(wipe_exe):
    r = subprocess.run([str(wipe_exe), "control"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert all(line.endswith("NOT WIPED") for line in r.stdout.splitlines()), r.stdout


# ---- Python: messages, reprs, logs, output --------------------------------------------------

KEY16 = bytes.fromhex("5ec2e7c0ffee5ec2e7c0ffee5ec2e7c0")
KEY32 = bytes.fromhex("c0ffee" * 10 + "5ec2")
ROOT_MATERIAL = bytes.fromhex("a11ce5" * 10 + "b0b5")
PLAINTEXT = b"TOP-SECRET-PLAINTEXT-0123456789"


def forms(secret: bytes) -> list[str]:
    """How a secret could show up in text."""
    return [
        secret.hex(),
        secret.hex().upper(),
        base64.b64encode(secret).decode(),
        repr(secret)[2:-1],
        secret.decode("latin-1"),
        "".join(f"\\x{b:02x}" for b in secret[:8]),
    ]


SECRET_FORMS = [f for s in (KEY16, KEY32, ROOT_MATERIAL, PLAINTEXT) for f in forms(s)]


def leaks(text: str) -> list[str]:
    return [f for f in SECRET_FORMS if len(f) >= 8 and f in text]


def failing_operations():
    """Every kind of failure a caller can meet, with secrets in play."""
    ciphers = [AEGIS128L(KEY16), AEGIS128X2(KEY16, 32), AEGIS128X4(KEY16), AESGCM(KEY32)]
    ring = Keyring(
        [
            Key(7, "AEGIS-128X4", ROOT_MATERIAL, state=KeyState.PRIMARY),
            Key(8, "AEGIS-128L", ROOT_MATERIAL[::-1], state=KeyState.RETIRED),
        ]
    )
    sealed = ring.seal(PLAINTEXT, b"ctx")
    ops = []
    for c in ciphers:
        n = bytes(c.nonce_size)
        ct = c.encrypt(n, PLAINTEXT)
        ops += [
            lambda c=c, n=n, ct=ct: c.decrypt(n, ct[:-1] + bytes([ct[-1] ^ 1])),
            lambda c=c, n=n, ct=ct: c.decrypt(n, ct, PLAINTEXT),
            lambda c=c, n=n: c.decrypt(n, PLAINTEXT[:3]),
            lambda c=c: c.encrypt(bytes(3), PLAINTEXT),
            lambda c=c, n=n, ct=ct: c.decrypt_into(n, ct, None, bytearray(2)),
        ]
    ops += [
        lambda: AEGIS128L(KEY32),
        lambda: AESGCM(KEY16 + KEY16[:3]),
        lambda: ring.open(sealed, b"other"),
        lambda: ring.open(sealed[:-1]),
        lambda: ring.open(sealed[:2] + b"\0\0\0\x08" + sealed[6:], b"ctx"),
        lambda: ring.open_many([sealed, PLAINTEXT], b"ctx"),
        lambda: ring.seal(PLAINTEXT, "ctx"),
        lambda: Key(9, "AEGIS-128L", ROOT_MATERIAL[:31]),
        lambda: Keyring([Key(7, "AEGIS-128L", ROOT_MATERIAL)]),
    ]
    return ciphers, ring, ops


def test_no_secret_in_exceptions_reprs_logs_or_output(caplog, capsys):
    caplog.set_level(logging.DEBUG)
    ciphers, ring, ops = failing_operations()
    texts = []
    for op in ops:
        with pytest.raises(Exception) as info:
            op()
        exc = info.value
        texts += [str(exc), repr(exc), " ".join(map(repr, exc.args))]
        texts += [str(n) for n in getattr(exc, "__notes__", [])]
        chained = exc.__cause__ or exc.__context__
        if chained is not None:
            texts += [str(chained), repr(chained)]
    texts += [repr(c) for c in ciphers] + [str(c) for c in ciphers]
    texts += [repr(ring), str(ring)] + [repr(k) for k in ring.keys] + [str(k) for k in ring.keys]
    texts += [caplog.text]
    out = capsys.readouterr()
    texts += [out.out, out.err]
    found = {f for t in texts for f in leaks(t)}
    assert not found, f"secrets visible: {sorted(found)}"


def test_the_search_would_see_a_leak():
    assert leaks(f"oops {KEY16.hex()}") and leaks(repr(PLAINTEXT))
