"""Fuzz target: loading a key file (``sealstore.keysources.file.KeyFile.load``).

Properties, for any file content (written with mode 0600):
* ``load`` returns a Keyring or raises ConfigError, InvalidKeyring or KeySourceError;
* no exception message contains key material: the base64 value of any ``material`` or
  ``wrapped`` field of the input (unless the same text is also another field's value, which a message
  may quote, e.g. an unknown suite name), nor the hex of the seeds' material.

Run: ``python tests/fuzz/fuzz_keyfile.py -max_total_time=30``.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore import Keyring  # noqa: E402
from sealstore.errors import ConfigError, InvalidKeyring, KeySourceError  # noqa: E402
from sealstore.keysources.file import KeyFile  # noqa: E402

TARGET = "keyfile"
ERRORS = (ConfigError, InvalidKeyring, KeySourceError)
SECRETS = [harness.material(key_id).hex() for key_id, _suite, _state in harness.KEYS]
# a material/wrapped value that looks like key material (base64 of 18 bytes or more)
_SECRET_FIELD = re.compile(rb'"(?:material|wrapped)"\s*:\s*"([A-Za-z0-9+/]{24,}=*)"')
_ANY_STRING = re.compile(rb'"([^"\\]*)"')
_DIR = tempfile.mkdtemp(prefix="sealstore-fuzz-keyfile-")
PATH = os.path.join(_DIR, "keys.json")
atexit.register(shutil.rmtree, _DIR, True)


def check(data: bytes) -> None:
    fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        ring = KeyFile(PATH).load()
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, ERRORS, "KeyFile.load")
        text = f"{exc} {exc!r}"
        leaked = [s for s in SECRETS if s in text]
        secret = {m.decode("latin-1") for m in _SECRET_FIELD.findall(data)}
        others = [v.decode("latin-1") for v in _ANY_STRING.findall(data)]
        for value in secret:
            if value in text and not any(value in o and o != value for o in others):
                if sum(o == value for o in others) <= 1:  # only ever a secret field's value
                    leaked.append(value)
        assert not leaked, f"KeyFile.load error message shows key material: {text[:200]}"
    else:
        assert isinstance(ring, Keyring)


def make_seeds():
    def entry(key_id, suite, state, **extra):
        e = {
            "id": f"{key_id:08x}",
            "suite": suite,
            "state": state,
            "created_at": "2026-01-01T00:00:00Z",
        }
        if state != "destroyed":
            e["material"] = base64.b64encode(harness.material(key_id)).decode()
        e.update(extra)
        return e

    keys = [entry(*k) for k in harness.KEYS]
    docs = [
        {"sealstore_keyring": 1, "wrapping": {"type": "none"}, "keys": keys},
        {"sealstore_keyring": 1, "keys": keys[:1]},
        {"sealstore_keyring": 1, "keys": [dict(keys[0], material=keys[0]["material"][:-4])]},
        {"sealstore_keyring": 1, "keys": [dict(keys[1], state="primary"), keys[0]]},
        {"sealstore_keyring": 1, "keys": [dict(keys[0], wrapped="AAAA")]},
        {"sealstore_keyring": 2, "keys": []},
    ]
    return [json.dumps(d, indent=1).encode() for d in docs] + [b"{", b""]


if __name__ == "__main__":
    harness.main(TARGET, check)
