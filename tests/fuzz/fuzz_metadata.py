"""Fuzz target: the ``x-amz-meta-sealstore-*`` fields of a sealed S3 object
(``sealstore.adapters.objects.metadata``), as a reader gets them back from S3.

The input is decoded as metadata: lines of ``name=value`` (Latin-1, so every byte string is a
valid input; S3 metadata is ASCII but a hostile store or proxy can return anything).
Properties, for any input:
* ``header_from_metadata`` returns None (no sealstore field), or a header whose repeated
  fields all agree with the header copy, or raises MalformedObject;
* ``stored_length`` returns None or a non-negative int, or raises MalformedObject;
* ``declared_length`` (request side) returns None or a non-negative int, or raises
  UnsupportedOperation; ``reject_reserved`` raises only UnsupportedOperation;
* ``split_user_metadata`` and ``sealstore_fields`` never raise and partition the fields.

Run: ``python tests/fuzz/fuzz_metadata.py -max_total_time=30``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore.adapters.objects import metadata as md  # noqa: E402
from sealstore.errors import MalformedObject, UnsupportedOperation  # noqa: E402
from sealstore.stream import ObjectHeader  # noqa: E402

TARGET = "metadata"


def decode(data: bytes) -> dict[str, str]:
    meta = {}
    for line in data.decode("latin-1").split("\n"):
        name, sep, value = line.partition("=")
        if sep:
            meta[name] = value
    return meta


def decode_field(meta: dict[str, str], name: str) -> str:
    return {k.lower(): v for k, v in meta.items()}[name]


def check(data: bytes) -> None:
    meta = decode(data)
    try:
        got = md.header_from_metadata(meta)
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, (MalformedObject,), "header_from_metadata")
    else:
        if got is not None:
            header, raw = got
            assert isinstance(header, ObjectHeader) and header.pack() == raw
            fields = md.object_metadata(header, None)
            lowered = {k.lower(): v for k, v in meta.items()}
            for name in (md.VERSION, md.SUITE, md.KEY_ID, md.SEGMENT_SIZE):
                assert lowered.get(name) == fields[name], f"{name} accepted while it disagrees"
    try:
        n = md.stored_length(meta)
        assert n is None or (isinstance(n, int) and n >= 0)
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, (MalformedObject,), "stored_length")
    try:
        n = md.declared_length(dict(meta))
        assert n is None or (isinstance(n, int) and n >= 0)
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, (UnsupportedOperation,), "declared_length")
    try:
        md.reject_reserved(meta)
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, (UnsupportedOperation,), "reject_reserved")
    user, ours = md.split_user_metadata(meta), md.sealstore_fields(meta)
    assert not any(k.lower().startswith(md.PREFIX) for k in user)
    assert set(ours) <= {k.lower() for k in meta}


def make_seeds():
    """Metadata of real objects (every suite and tag size), and edited copies."""
    import io

    from sealstore.stream import parse_object_header, seal_stream

    out = []
    for primary in (1, 2, 3):
        ring = harness.keyring(primary)
        body = b"".join(seal_stream(io.BytesIO(b"x" * 300), ring, context=harness.CONTEXT))
        header = parse_object_header(body)
        meta = md.object_metadata(header, 300)
        text = "\n".join(f"{k}={v}" for k, v in meta.items())
        out.append(text.encode())
        out.append(text.replace("sealstore-length=300", "sealstore-length=-1").encode())
        out.append(text.replace(md.SUITE, md.SUITE.upper()).encode() + b"\nx-user=1")
    out.append(b"sealstore-header=!!!\nsealstore-version=1")
    out.append(b"content-type=text/plain")
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
