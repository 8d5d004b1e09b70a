"""Part planning without a store: ``check_parts_tile`` (a completion's part list against what was
sealed) and the engine's part streams, which concatenate to the object one request would hold."""

from __future__ import annotations

import io
import os

import pytest
from sealstore.adapters.objects.engine import opened_whole, sealed_body, sealed_part
from sealstore.adapters.objects.parts import check_parts_tile, part_ends_object
from sealstore.errors import UnsupportedOperation
from sealstore.keyring import Keyring
from sealstore.stream import HEADER_SIZE, ObjectCipher, parse_object_header

SEG = 1024


def test_parts_tile_the_object():
    assert check_parts_tile([2, 1, 3], {1: False, 2: False, 3: True}, {1: 5, 2: 5, 3: 2}) == (
        [3],
        12,
    )
    assert check_parts_tile([1, 2], {1: False, 2: False}, {1: 5, 2: 5}) == ([], 10)
    with pytest.raises(UnsupportedOperation, match="without gaps"):
        check_parts_tile([1, 3], {1: False, 3: True}, {})
    with pytest.raises(UnsupportedOperation, match=r"parts \[2\] were not sealed"):
        check_parts_tile([1, 2], {1: False}, {})
    with pytest.raises(UnsupportedOperation, match="part 1 ended the object"):
        check_parts_tile([1, 2], {1: True, 2: True}, {})


def test_sealed_parts_are_the_single_request_object():
    kr = Keyring.generate("AEGIS-128L", 16)
    cipher = ObjectCipher.create(kr, segment_size=SEG)
    data = os.urandom(5 * SEG + 17)
    part = 2 * SEG
    whole, size = sealed_body(cipher, data, len(data))
    expected = whole.read()
    assert len(expected) == size
    pieces = []
    for number, first in enumerate(range(0, len(data), part), 1):
        chunk = data[first : first + part]
        final = part_ends_object(number, len(chunk), part, len(data))
        pieces.append(sealed_part(cipher, chunk, len(chunk), number, part, final=final).read())
    assert b"".join(pieces) == expected
    opener = ObjectCipher.from_header(kr, parse_object_header(expected[:HEADER_SIZE]))
    body = io.BytesIO(expected[HEADER_SIZE:])
    assert opened_whole(opener, body).read() == data


def test_a_body_header_against_its_metadata_copy():
    from sealstore.adapters.objects.engine import body_header
    from sealstore.errors import MalformedObject, NotSealedObject, TruncatedObject

    kr = Keyring.generate("AEGIS-128L", 16)
    sealed = sealed_body(ObjectCipher.create(kr, segment_size=SEG), b"x" * 10, 10)[0].read()
    head = sealed[:HEADER_SIZE]
    other = sealed_body(ObjectCipher.create(kr, segment_size=SEG), b"y", 1)[0].read()
    assert body_header(head, head) == parse_object_header(head)
    assert body_header(head, None) == parse_object_header(head)
    assert body_header(b"plain bytes, not sealed", None) is None
    with pytest.raises(MalformedObject, match="body is not"):
        body_header(b"plain bytes, claims to be sealed", head)
    with pytest.raises(TruncatedObject):
        body_header(head[:40], head)
    with pytest.raises(MalformedObject, match="differs"):
        body_header(other[:HEADER_SIZE], head)
    with pytest.raises(NotSealedObject):
        body_header(b"x" * HEADER_SIZE, b"x" * HEADER_SIZE)  # a metadata copy that is no header
