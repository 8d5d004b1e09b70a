"""Fuzz target: the sealed object (S3 body) format: ``stream.parse_object_header`` and
``stream.open_stream`` (unbound objects, and objects bound to ``LOCATION``).

Every seed object's plaintext is a prefix of one fixed byte string ``PLAIN``.  Properties, for
any input bytes:
* ``parse_object_header`` returns an ObjectHeader or raises NotSealedObject/MalformedObject;
* ``open_stream`` raises only NotSealedObject, MalformedObject, UnknownKeyId, KeyNotUsable or
  InvalidTag (KeyCommitmentMismatch and TruncatedObject are InvalidTags); whatever it yielded
  before failing is verified plaintext, so a prefix of ``PLAIN``; and it completes only for an
  unmodified seed.

Run: ``python tests/fuzz/fuzz_object.py -max_total_time=30 -max_len=16384``.
"""

from __future__ import annotations

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore.errors import (  # noqa: E402
    InvalidTag,
    KeyNotUsable,
    MalformedObject,
    NotSealedObject,
    UnknownKeyId,
)
from sealstore.stream import ObjectHeader, open_stream, parse_object_header, seal_stream  # noqa: E402

TARGET = "object"
HEADER_ERRORS = (NotSealedObject, MalformedObject)
OPEN_ERRORS = (NotSealedObject, MalformedObject, UnknownKeyId, KeyNotUsable, InvalidTag)
PLAIN = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(6000))
KEYRING = harness.keyring()
LOCATION = b"fuzz/bucket/key"  # bound seeds are sealed for it (unbound ones ignore it)
SEEDS = harness.seeds(TARGET)


def check(data: bytes) -> None:
    try:
        assert isinstance(parse_object_header(data), ObjectHeader)
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, HEADER_ERRORS, "parse_object_header")

    got = bytearray()
    try:
        for chunk in open_stream(
            io.BytesIO(data), KEYRING, context=harness.CONTEXT, location=LOCATION
        ):
            got += chunk
            assert PLAIN.startswith(got), "open_stream yielded bytes that were never sealed"
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, OPEN_ERRORS, "open_stream")
        return
    assert data in SEEDS, "open_stream completed on an input it never sealed"
    assert PLAIN.startswith(got)


def make_seeds():
    out = []
    for primary in (1, 2, 3):
        for tag in (16, 32):
            ring = harness.keyring(primary, tag)
            for n in (0, 1, 1023, 1024, 1025, 3000):
                out.append(
                    b"".join(
                        seal_stream(PLAIN[:n], ring, segment_size=1024, context=harness.CONTEXT)
                    )
                )
    for tag in (32, 16):  # objects bound to a location (flag bit 1)
        ring = harness.keyring(1, tag)
        for n in (0, 1025, 3000):
            out.append(
                b"".join(
                    seal_stream(
                        PLAIN[:n],
                        ring,
                        segment_size=1024,
                        context=harness.CONTEXT,
                        location=LOCATION,
                    )
                )
            )
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
