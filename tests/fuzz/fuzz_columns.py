"""Fuzz target: the column fast path, ``keyring.named_sealer``/``named_opener`` and ``map_columns``.

Byte 0 picks the value kind and the options, byte 1 a length limit and the row count, the rest
is the value.  Properties, for any input:
* ``named_sealer`` (raw bytes, raw ASCII str with an encoder for the rest, bytes or bytearray
  out, an optional ``max_length``) returns a value that ``Keyring.open`` and ``named_opener``
  open to the input, raises ValueTooLong exactly when the value is over the limit, and the
  opener refuses any one-bit change (InvalidTag, or a header error from the fallback);
* the name is looked up on every call: the same callables work after the keyring registered
  under it is replaced by one with another tag size;
* ``map_columns`` over rows of (index, sealed, expected) opens every row to its expected value,
  also when the callable empties the rows list or the rows (lists) while the loop runs: then the
  result is the same or the documented IndexError, never a crash or a wrong pairing.

Run: ``python tests/fuzz/fuzz_columns.py -max_total_time=30``.
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
    UnknownKeyId,
    ValueTooLong,
)
from sealstore.keyring import named_opener, named_sealer, use_keyring  # noqa: E402
from sealstore.rowmap import map_columns  # noqa: E402

TARGET = "columns"
NAME = "fuzz-columns"
RINGS = (harness.keyring(1, 16), harness.keyring(1, 32))
REFUSE = (InvalidTag, MalformedCiphertext, UnknownKeyId, KeyNotUsable)
state = {"ring": RINGS[0]}


def _ring():
    return state["ring"]


def _limit(value, limit):
    if limit is not None and len(value) > limit:
        raise ValueTooLong(f"value of {len(value)} exceeds the column limit {limit}")
    return value


def _callables(kind: int, limit):
    """(sealer, opener, value transform) for one value kind."""
    ctx = harness.CONTEXT
    if kind == 0:  # exact bytes, raw
        fall = lambda v: _ring().seal(_limit(bytes(v), limit), ctx)  # noqa: E731
        return (
            named_sealer(NAME, ctx, fall, raw=bytes, max_length=limit),
            named_opener(NAME, ctx, lambda v: _ring().open(v, ctx)),
            bytes,
        )
    if kind == 1:  # bytes, bytearray out
        fall = lambda v: bytearray(_ring().seal(_limit(bytes(v), limit), ctx))  # noqa: E731
        return (
            named_sealer(NAME, ctx, fall, raw=bytes, max_length=limit, out=bytearray),
            named_opener(NAME, ctx, lambda v: _ring().open(v, ctx)),
            bytes,
        )
    # str: ASCII raw, anything else through the encoder
    enc = lambda s: _limit(s, limit).encode("utf-8")  # noqa: E731
    fall = lambda s: _ring().seal(enc(s), ctx)  # noqa: E731
    return (
        named_sealer(NAME, ctx, fall, raw=str, max_length=limit, encode=enc),
        named_opener(NAME, ctx, lambda v: _ring().open(v, ctx).decode("utf-8"), text=True),
        lambda b: b.decode("utf-8", "replace"),
    )


def _check_seal(sealer, opener, value, limit) -> bytes | None:
    try:
        sealed = sealer(value)
    except ValueTooLong:
        assert limit is not None and len(value) > limit, "ValueTooLong within the limit"
        return None
    assert limit is None or len(value) <= limit, "a value over the limit was sealed"
    assert opener(sealed) == value, "named_opener did not give back what named_sealer sealed"
    plain = _ring().open(bytes(sealed), harness.CONTEXT)
    assert plain == (value.encode("utf-8") if isinstance(value, str) else value)
    return bytes(sealed)


def _check_tamper(opener, sealed: bytes, pos: int) -> None:
    bad = bytearray(sealed)
    bad[pos % len(bad)] ^= 1 << (pos % 8)
    try:
        opener(bytes(bad))
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
        harness.expect(exc, REFUSE, "named_opener of a modified value")
    else:
        raise AssertionError("named_opener opened a modified value")


def _check_rows(opener, value, nrows: int, mutate: int) -> None:
    chunks = [value[i::nrows] for i in range(nrows)] if nrows else []
    base = [[i, _ring().seal(c, harness.CONTEXT), c] for i, c in enumerate(chunks)]
    rows = [list(r) for r in base]

    def open_and_mutate(v):
        if mutate == 1:
            rows.clear()
        elif mutate == 2:
            for r in rows:
                r.clear()
        elif mutate == 3:
            rows.extend([[-1, b"", b""]] * 50)
        return opener(v)

    try:
        got = map_columns(rows, ((1, open_and_mutate),))
    except IndexError:
        assert mutate == 2, "IndexError from map_columns with intact rows"
        return
    assert got == [(i, c, c) for i, c in enumerate(chunks)], "map_columns paired rows wrongly"


def check(data: bytes) -> None:
    if len(data) < 2:
        return
    opts, lim = data[0], data[1]
    kind = opts % 3
    limit = None if opts & 0x04 else lim % 64
    sealer, opener, shape = _callables(kind, limit)
    state["ring"] = RINGS[(opts >> 3) & 1]
    use_keyring(state["ring"], NAME)
    value = shape(data[2:])
    sealed = _check_seal(sealer, opener, value, limit)
    if sealed is not None:
        _check_tamper(opener, sealed, lim * 131 + len(data))
        state["ring"] = RINGS[1 - ((opts >> 3) & 1)]  # swap the registered keyring
        use_keyring(state["ring"], NAME)
        _check_seal(sealer, opener, value, limit)
    _check_rows(
        named_opener(NAME, harness.CONTEXT, lambda v: _ring().open(v, harness.CONTEXT)),
        data[2:],
        lim % 9,
        (opts >> 4) & 3,
    )


def make_seeds():
    out = []
    for opts in (0, 1, 2, 4, 5, 6, 12, 13, 14, 0x14, 0x26, 0x3C):
        for lim, body in (
            (3, b"ab"),
            (40, b"x" * 100),
            (7, "h\u00e9llo w\u00f6rld".encode()),
            (8, bytes(range(256))),
        ):
            out.append(bytes([opts, lim]) + body)
    return out


if __name__ == "__main__":
    harness.main(TARGET, check)
