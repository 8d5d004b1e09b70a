"""Fuzz target: the rows of the database key registry (``sealstore_keys``) as a hostile or
mistaken editor of the table leaves them, read by ``DatabaseKeySource.load`` on SQLite.

SQLite keeps any value in any column, so the input is decoded as rows of six SQLite values
(``key_id, suite, state, created_at, rotated_at, wrapped_key``), each NULL, an integer, a real,
text, a blob, or one of a dictionary of meaningful values (valid suites, states, dates, the
wrapped blobs of a real store); the first byte picks the table: sealstore's own (typed
columns, which SQLite does not enforce) or one without types and constraints.
Properties, for any input:

* ``load`` returns a Keyring or raises KeySourceError (KeyMetadataTampered included) or
  InvalidKeyring, never another exception (OverflowError on a key id of 2**32, TypeError,
  ValueError or AttributeError on a value of the wrong type...); ``exists`` returns a bool;
* no exception message holds a blob of the input (hex or base64), such as a wrapped key.

The seeds are the rows of a real store (``make_seeds``: wrapped under the fixed master key
``WRAPPER_KEY``), so the corpus reaches the unwrapping and the metadata tag.

Run: ``python tests/fuzz/fuzz_registry.py -max_total_time=30``.
"""

from __future__ import annotations

import base64
import os
import struct
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore import Keyring  # noqa: E402
from sealstore.errors import InvalidKeyring, KeySourceError  # noqa: E402
from sealstore.keysources.database import DatabaseKeySource, metadata  # noqa: E402
from sealstore.wrapping import MasterKeyWrapper  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.pool import StaticPool  # noqa: E402

TARGET = "registry"
ERRORS = (KeySourceError, InvalidKeyring)
COLUMNS = ("key_id", "suite", "state", "created_at", "rotated_at", "wrapped_key")
WRAPPER_KEY = bytes(range(32))
ENGINE = create_engine("sqlite://", poolclass=StaticPool)
UNTYPED = "CREATE TABLE sealstore_keys (key_id, suite, state, created_at, rotated_at, wrapped_key)"


def _real_rows() -> list[tuple]:
    """The rows of a real store (three keys, format 2) under WRAPPER_KEY."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    src = DatabaseKeySource(engine, MasterKeyWrapper(WRAPPER_KEY))
    ring = src.init()
    src.rotate(ring)
    src.rotate(ring)
    ring.close()
    with engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM sealstore_keys")]


# values that mean something to the reader (the decoder's tag 5 picks one); fixed, so an input
# decodes the same in every process
DICTIONARY: list[object] = [
    -1, 0, 1, 2**32 - 1, 2**32, 2**40, -5, 2**63 - 1, -(2**63),
    "AEGIS-128X4", "AEGIS-128L", "AES-256-GCM", "AEGIS-256X2", "metadata",
    "primary", "active", "retired", "destroyed", "format-2", "format-1",
    "2026-01-01 00:00:00.000000", "2026-01-01 00:00:00", "9999-12-31 23:59:59",
    "0001-01-01 00:00:00", "2026-13-45 99:99:99", "", "x",
    datetime(2026, 1, 1, tzinfo=timezone.utc).isoformat(), b"", b"\x01",
]  # fmt: skip


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise EOFError
        self.pos += 1
        return self.data[self.pos - 1]

    def take(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def decode(data: bytes) -> tuple[bool, list[tuple]]:
    """(untyped table?, rows) from the fuzz input."""
    if not data:
        return False, []
    r, rows = _Reader(data[1:]), []
    try:
        while len(rows) < 16:
            row = []
            for _ in COLUMNS:
                tag = r.byte() % 6
                if tag == 0:
                    row.append(None)
                elif tag == 1:
                    row.append(int.from_bytes(r.take(8).ljust(8, b"\0"), "big", signed=True))
                elif tag == 2:
                    row.append(struct.unpack(">d", r.take(8).ljust(8, b"\0"))[0])
                elif tag == 3:
                    row.append(r.take(r.byte()).decode("utf-8", "replace"))
                elif tag == 4:
                    row.append(r.take(r.byte()))
                else:
                    row.append(DICTIONARY[r.byte() % len(DICTIONARY)])
            rows.append(tuple(row))
    except EOFError:
        pass
    return bool(data[0] & 1), rows


def encode(rows: list[tuple], *, untyped: bool = False) -> bytes:
    """The fuzz input that decodes to ``rows`` (values of the types above)."""
    out = bytearray([int(untyped)])
    for row in rows:
        for v in row:
            if type(v) in (int, str) and v in DICTIONARY:
                out += bytes([5, [type(d) is type(v) and d == v for d in DICTIONARY].index(True)])
            elif v is None:
                out.append(0)
            elif isinstance(v, bool) or isinstance(v, int):
                out += bytes([1]) + int(v).to_bytes(8, "big", signed=True)
            elif isinstance(v, float):
                out += bytes([2]) + struct.pack(">d", v)
            elif isinstance(v, str):
                b = v.encode()[:255]
                out += bytes([3, len(b)]) + b
            else:
                b = bytes(v)[:255]
                out += bytes([4, len(b)]) + b
    return bytes(out)


def load_rows(untyped: bool, rows: list[tuple]) -> None:
    with ENGINE.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS sealstore_keys")
        if untyped:
            conn.exec_driver_sql(UNTYPED)
        else:
            metadata.create_all(conn)
        for row in rows:
            conn.exec_driver_sql(
                "INSERT OR IGNORE INTO sealstore_keys VALUES (?, ?, ?, ?, ?, ?)", row
            )


def check(data: bytes) -> None:
    untyped, rows = decode(data)
    try:
        load_rows(untyped, rows)
    except Exception:  # noqa: BLE001 - a constraint refused the rows: nothing to read
        return
    src = DatabaseKeySource(ENGINE, MasterKeyWrapper(WRAPPER_KEY))
    try:
        assert isinstance(src.exists(), bool)
        ring = src.load()
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, ERRORS, "DatabaseKeySource.load")
        text = f"{exc} {exc!r}"
        blobs = {v for row in rows for v in row if isinstance(v, bytes) and len(v) >= 16}
        shown = [b for b in blobs if b.hex() in text or base64.b64encode(b).decode() in text]
        assert not shown, f"message shows a wrapped blob: {text[:200]}"
    else:
        assert isinstance(ring, Keyring)
        ring.close()


def make_seeds():
    real = _real_rows()
    meta = [r for r in real if r[0] == -1]
    keys = [r for r in real if r[0] != -1]
    variants = [
        real,
        keys,  # the metadata row deleted: format 1, blobs of format 2
        meta + keys[:1],
        [(2**32, *keys[0][1:])] + keys[1:] + meta,
        [(-5, *keys[0][1:])] + meta,
        [(2**40, *keys[0][1:])] + meta,
        [(keys[0][0], b"AEGIS-128X4", *keys[0][2:])] + meta,
        [(keys[0][0], keys[0][1], None, *keys[0][3:])] + meta,
        [(keys[0][0], keys[0][1], keys[0][2], 5, *keys[0][4:])] + meta,
        [(*keys[0][:5], "not a blob")] + meta,
        [(str(keys[0][0]), *keys[0][1:])] + meta,
        [(float(keys[0][0]), *keys[0][1:])] + meta,
    ]
    return [encode(v) for v in variants] + [encode(real, untyped=True), encode(keys, untyped=True)]


if __name__ == "__main__":
    harness.main(TARGET, check)
