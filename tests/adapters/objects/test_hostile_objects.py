"""Hostile stored objects through the object engine (issue 27): whatever bytes and metadata a
store returns -- a body cut, extended, with bytes flipped or replaced, sealstore metadata fields
edited, dropped, made non-ASCII or huge -- every engine entry point that reads a stored object
(``header``, ``size``, ``open`` whole and by range, ``copy``, ``object_key_id``,
``rotate_object``) raises only ``sealstore.errors`` exceptions, and any plaintext it returns is
the plaintext that was sealed (for the bytes asked for).  Run on the in-memory store, so that
hypothesis can try many shapes; the GCS store's own metadata path is checked in
tests/adapters/gcs/test_gcs.py."""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sealstore.adapters.objects import MemoryStore, ObjectSealing
from sealstore.adapters.objects import metadata as M
from sealstore.adapters.objects.references import object_key_id
from sealstore.adapters.objects.rotation import rotate_object
from sealstore.errors import SealstoreError
from sealstore.keyring import Keyring

SEG = 1024
PLAINS = {"empty": b"", "small": os.urandom(100), "segments": os.urandom(3 * SEG + 17)}
KEYRING = Keyring.generate("AEGIS-128L", 16)
FIELDS = [M.VERSION, M.SUITE, M.KEY_ID, M.SEGMENT_SIZE, M.LENGTH, M.HEADER]


def _sealed(name: str, bind: bool) -> tuple[bytes, dict[str, str]]:
    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(KEYRING, segment_size=SEG, bind_location=bind)
    sealing.seal(store, "b", "k", PLAINS[name], metadata={"user": "kept"})
    return store.get("b", "k").read(), store.head("b", "k").metadata


# sealed under the first key; the keyring then rotates, so that rotate_object re-seals them
SEALED = {(name, bind): _sealed(name, bind) for name in PLAINS for bind in (False, True)}
KEYRING.rotate()


def _world(name: str, bind: bool) -> tuple[MemoryStore, ObjectSealing, bytes, dict[str, str]]:
    store = MemoryStore()
    store.create_bucket("b")
    sealing = ObjectSealing(KEYRING, segment_size=SEG, bind_location=bind)
    data, meta = SEALED[(name, bind)]
    return store, sealing, data, meta


values = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "0", "-1", "1" * 25, "4096", "²", "AAAA", "===", "ff" * 8, "1e3"]),
    st.integers(-(2**70), 2**70).map(str),
    st.binary(max_size=120).map(lambda b: base64.b64encode(b).decode()),
)

body_edits = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("extend"), st.integers(1, 300), st.integers(0, 255)),
    st.tuples(st.just("replace"), st.integers(0, 10_000), st.integers(0, 2**32)),
    st.tuples(st.just("none"), st.just(0), st.just(0)),
)

meta_edits = st.lists(
    st.tuples(st.sampled_from([*FIELDS, "sealstore-other", "user"]), st.none() | values),
    max_size=4,
)


def _edit_body(data: bytes, edit: tuple[str, int, int]) -> bytes:
    kind, at, arg = edit
    if kind == "flip" and data:
        i = at % len(data)
        return data[:i] + bytes([data[i] ^ arg]) + data[i + 1 :]
    if kind == "cut":
        return data[: at % (len(data) + 1)]
    if kind == "extend":
        return data + bytes([arg]) * at
    if kind == "replace":
        return os.urandom(at % 400) if arg % 2 else data[: at % 100] + os.urandom(arg % 300)
    return data


def _edit_meta(meta: dict[str, str], edits: list[tuple[str, str | None]]) -> dict[str, str]:
    out = dict(meta)
    for name, value in edits:
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def _calls(store: MemoryStore, sealing: ObjectSealing):
    """Every reading entry point, as (name, call returning its plaintext or None)."""

    def opened(**span):
        with sealing.open(store, "b", "k", **span) as r:
            return r.read()

    def copy():
        sealing.copy(store, "b", "k", "b", "copy")
        return sealing.open(store, "b", "copy").read()

    def rotated():
        outcome = rotate_object(sealing, store, "b", "k")
        assert outcome in ("resealed", "current", "repaired", "not_sealed")
        return sealing.open(store, "b", "k").read()

    yield "header", lambda: (sealing.header(store, store.head("b", "k")), None)[1]
    yield "size", lambda: (sealing.size(store, "b", "k"), None)[1]
    yield "key_id", lambda: (object_key_id(store, store.head("b", "k")), None)[1]
    yield "whole", opened
    for first, last in [(0, 0), (5, 40), (SEG - 3, SEG + 3), (2 * SEG, None)]:
        yield f"range {first}-{last}", lambda f=first, la=last: opened(first=f, last=la)
    yield "suffix", lambda: opened(suffix=10)
    yield "copy", copy
    yield "rotate", rotated


@settings(
    max_examples=int(os.environ.get("HOSTILE_OBJECT_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(sorted(PLAINS)),
    bind=st.booleans(),
    body=body_edits,
    meta=meta_edits,
)
def test_hostile_stored_objects_raise_only_sealstore_errors(name, bind, body, meta):
    store, sealing, data, stored_meta = _world(name, bind)
    hostile = _edit_body(data, body)
    hostile_meta = _edit_meta(stored_meta, meta)
    plain = PLAINS[name]
    spans = {
        "whole": plain,
        "suffix": plain[-10:],
        "copy": plain,
        "rotate": plain,
        **{f"range {f}-{la}": plain[f : None if la is None else la + 1] for f, la in
           [(0, 0), (5, 40), (SEG - 3, SEG + 3), (2 * SEG, None)]},
    }  # fmt: skip
    for what, call in _calls(store, sealing):
        store.put("b", "k", hostile, length=len(hostile), metadata=hostile_meta)
        try:
            got = call()
        except SealstoreError:
            continue
        except Exception as exc:  # pragma: no cover - the failure this test looks for
            pytest.fail(f"{what}: {type(exc).__module__}.{type(exc).__name__}: {exc}")
        if got is not None:
            assert got == spans[what], f"{what} returned bytes that were not sealed"


@pytest.mark.parametrize("bind", [False, True])
def test_unmodified_objects_open_through_every_entry_point(bind):
    """The control: with no edit, every call above succeeds (so the hostile runs exercise the
    opening paths, not an early refusal)."""
    for name, plain in PLAINS.items():
        store, sealing, data, meta = _world(name, bind)
        for what, call in _calls(store, sealing):
            store.put("b", "k", data, length=len(data), metadata=meta)
            if what.startswith(("range", "suffix")) and len(plain) < 2 * SEG + 1:
                continue  # outside a short object: RangeNotSatisfiable, checked elsewhere
            call()
