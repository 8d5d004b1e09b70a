"""Fuzz target: the sealed-value parser and ``Keyring.open``/``open_many``.

Properties, for any input bytes:
* ``format.parse_header`` returns a Header or raises MalformedCiphertext, nothing else;
* ``Keyring.open`` raises only MalformedCiphertext, UnknownKeyId, KeyNotUsable or InvalidTag,
  and returns plaintext only for an unmodified seed (a value the keyring really sealed);
* ``Keyring.open_many`` on the input and a valid value agrees with ``open`` (same exception
  class, ``.index`` naming the input's position);
* ``keyring.named_opener`` (the C path of encrypted columns, bytes and text) agrees with
  ``open``: the same plaintext, or the same exception class.

Run: ``python tests/fuzz/fuzz_sealed.py -max_total_time=30``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from sealstore.errors import (  # noqa: E402
    InvalidTag,
    KeyNotUsable,
    MalformedCiphertext,
    UndecodableValue,
    UnknownKeyId,
)
from sealstore.format import Header, parse_header  # noqa: E402
from sealstore.keyring import named_opener, use_keyring  # noqa: E402

TARGET = "sealed"
OPEN_ERRORS = (MalformedCiphertext, UnknownKeyId, KeyNotUsable, InvalidTag)
KEYRING = harness.keyring()
SEEDS = harness.seeds(TARGET)
VALID = KEYRING.seal(b"a valid neighbour", harness.CONTEXT)
use_keyring(KEYRING, "fuzz-sealed")
OPENERS = (  # the fallback is the Python path; the differential is about the native one
    (named_opener("fuzz-sealed", harness.CONTEXT, lambda v: KEYRING.open(v, harness.CONTEXT)),
     lambda pt: pt),
    (named_opener("fuzz-sealed", harness.CONTEXT,
                  lambda v: KEYRING.open(v, harness.CONTEXT).decode(), text=True),
     lambda pt: pt.decode()),
)  # fmt: skip


def check(data: bytes) -> None:
    try:
        h = parse_header(data)
        assert isinstance(h, Header) and len(data) >= h.overhead
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, (MalformedCiphertext,), "parse_header")

    opened = None
    try:
        opened = KEYRING.open(data, harness.CONTEXT)
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, OPEN_ERRORS, "Keyring.open")
        err = type(exc)
    else:
        err = None
        assert data in SEEDS, "Keyring.open returned plaintext for an input it never sealed"

    for opener, expected in OPENERS:
        try:
            named = opener(data)
        except Exception as exc:  # noqa: BLE001
            assert err is not None or isinstance(exc, (UnicodeDecodeError, UndecodableValue)), type(
                exc
            )
            assert err is None or type(exc) is err, (err, type(exc))
            if err is None:
                try:
                    expected(opened)
                except UnicodeDecodeError:
                    pass
                else:
                    raise AssertionError(
                        f"named_opener raised {type(exc).__name__}, decode did not"
                    )
        else:
            assert err is None, f"open raised {err.__name__}, named_opener did not"
            assert named == expected(opened)

    try:
        many = KEYRING.open_many([VALID, data], harness.CONTEXT)
    except Exception as exc:  # noqa: BLE001
        harness.expect(exc, OPEN_ERRORS, "Keyring.open_many")
        assert err is not None, f"open_many raised {type(exc).__name__}, open did not"
        assert getattr(exc, "index", None) == 1, f"open_many blamed index {exc.index}"
        assert issubclass(type(exc), err) or issubclass(err, type(exc)), (err, type(exc))
    else:
        assert err is None, f"open raised {err.__name__}, open_many did not"
        assert many == [b"a valid neighbour", opened]


def make_seeds():
    """Values sealed under every usable key, tag size and the adaptive small/large split."""
    out = []
    for primary in (1, 2, 3, 4):
        for tag in (16, 32):
            ring = harness.keyring(primary, tag)
            for pt in (b"", b"x", b"sixteen bytes..!", bytes(range(256)) * 5):
                out.append(ring.seal(pt, harness.CONTEXT))
    out.append(harness.keyring(1).seal(b"another context", b"other"))
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
