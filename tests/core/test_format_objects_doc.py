"""docs/FORMAT.md's object section specifies every suite's objects (issue 27): its suite table
(object key, nonce, nonce prefix and tag sizes) lists exactly the registry's suites with the
sizes the object key derivation uses, and every suite seals and opens objects."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from sealstore import stream as S
from sealstore.keyring import Keyring
from sealstore.stream import object_key
from sealstore.suites import Suite

ROOT = Path(__file__).resolve().parents[2]


def object_table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "FORMAT.md").read_text()
    objects = text[text.index("# Objects: the sealed stream format") :]
    section = objects[objects.index("## O1.") : objects.index("## O2.")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"0x[0-9a-f]{2}", cells[1]):
            rows[cells[0]] = cells[1:]
    return rows


def test_the_object_suite_table_is_the_registry():
    rows = object_table()
    assert set(rows) == {str(s) for s in Suite}
    for suite in Suite:
        spec = suite.spec
        key_len, prefix_len = object_key._key_and_prefix_sizes(suite)
        assert key_len == spec.key_size
        assert rows[str(suite)] == [
            f"0x{spec.id:02x}",
            f"{key_len} B",
            f"{spec.nonce_size} B",
            f"{prefix_len} B",
            ", ".join(str(t) for t in sorted(spec.tag_sizes)),
        ], suite


@pytest.mark.parametrize("suite", list(Suite), ids=str)
def test_every_suite_seals_objects_under_its_own_id(suite):
    for tag in suite.spec.tag_sizes:
        ring = Keyring.generate(suite, tag)
        for n in (0, 10, 3000):
            data = bytes(range(256)) * (n // 256) + bytes(n % 256)
            sealed = b"".join(S.seal_stream(data, ring, segment_size=1024))
            header = S.parse_object_header(sealed[: S.HEADER_SIZE])
            assert sealed[5] == suite.spec.id and header.suite is suite
            assert header.tag_size == tag
            assert len(sealed) == S.sealed_size(n, 1024, tag)
            assert b"".join(S.open_stream(io.BytesIO(sealed), ring)) == data
