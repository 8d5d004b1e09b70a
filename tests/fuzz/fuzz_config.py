"""Fuzz target: loading a configuration file (``sealstore.config.load_config``), JSON and TOML.

The first byte of the input picks the format (even: ``.toml``, odd: ``.json``) and, with its
bit 1, whether the file is one others could have written (mode 0666); the rest is the file's
content.  Properties, for any input:

* ``load_config`` returns a SealstoreConfig or raises ConfigError (InsecureConfig included),
  never another exception (RecursionError on deep nesting, ValueError past Python's integer
  digit limit, MemoryError...);
* a file others could have written never yields a configuration whose key source, wrapping,
  ``allow_retired``, ``accept_short_tags`` or ``tag_size`` differ from the defaults;
* no message is longer than a few kilobytes (messages quote at most a bounded excerpt).

Run: ``python tests/fuzz/fuzz_config.py -max_total_time=30``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore.config import SealstoreConfig, load_config  # noqa: E402
from sealstore.errors import ConfigError  # noqa: E402

TARGET = "config"
ERRORS = (ConfigError,)
_DIR = tempfile.mkdtemp(prefix="sealstore-fuzz-config-")
os.chmod(_DIR, 0o700)
PATHS = {suffix: os.path.join(_DIR, "sealstore" + suffix) for suffix in (".toml", ".json")}
atexit.register(shutil.rmtree, _DIR, True)
DEFAULTS = SealstoreConfig()
GUARDED = ("key_source", "allow_retired", "accept_short_tags", "tag_size")
MAX_MESSAGE = 8192


def encode(content: bytes, *, json_format: bool, untrusted: bool = False) -> bytes:
    """The fuzz input that loads ``content`` (the seeds and the hypothesis tests use it)."""
    return bytes([int(json_format) | (2 if untrusted else 0)]) + content


def check(data: bytes) -> None:
    if not data:
        return
    path = PATHS[".json" if data[0] & 1 else ".toml"]
    untrusted = bool(data[0] & 2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data[1:])
    os.chmod(path, 0o666 if untrusted else 0o644)
    try:
        cfg = load_config(path, env={})
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, ERRORS, "load_config")
        assert len(str(exc)) <= MAX_MESSAGE, f"load_config message of {len(str(exc))} chars"
    else:
        assert isinstance(cfg, SealstoreConfig)
        if untrusted:
            for name in GUARDED:
                assert getattr(cfg, name) == getattr(DEFAULTS, name), (
                    f"a file others could write set {name}"
                )


def make_seeds():
    toml = [
        b'suite = "AEGIS-128X4"\ntag_size = 32\n',
        b'[key_source]\ntype = "file"\npath = "keys.json"\n[key_source.wrapping]\ntype = "none"\n',
        b'[key_source]\ntype = "database"\nurl = "postgresql+psycopg://app@db/app"\n'
        b'[key_source.wrapping]\ntype = "aws-kms"\nkms_key_id = "alias/sealstore"\n'
        b'endpoint_url = "http://localhost:4566"\ncache_max_age = 30.5\n',
        b'[key_source]\ntype = "file"\n[key_source.wrapping]\ntype = "master-key"\npath = "m.key"\n',
        b"allow_retired = true\naccept_short_tags = false\ntag_size = 16\n",
        b"a = [[[[[[[[1]]]]]]]]\n",
        b"tag_size = 99999999999999999999999\n",
        b'suite = """\nmulti\nline"""\n',
    ]
    js = [
        {"suite": "AEGIS-256X2", "tag_size": 16},
        {"key_source": {"type": "file", "path": "/var/lib/app/keys.json"}},
        {
            "key_source": {
                "type": "database",
                "url": "sqlite:///keys.db",
                "wrapping": {"type": "aws-kms", "kms_key_id": "k", "region": "eu-west-1"},
            }
        },
        {"key_source": {"type": "file", "wrapping": {"type": "master-key", "path": "m"}}},
        {"allow_retired": True, "accept_short_tags": True},
        {"key_source": [1, 2, {"x": None}]},
        [1, 2, 3],
    ]
    out = [encode(t, json_format=False) for t in toml]
    out += [encode(json.dumps(d).encode(), json_format=True) for d in js]
    out += [encode(toml[2], json_format=False, untrusted=True)]
    out += [encode(json.dumps(js[0]).encode(), json_format=True, untrusted=True)]
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
