"""Native entry points called while other threads change their inputs (issue 17).

``python tests/native_stress.py SCENARIO [SECONDS]`` runs one scenario for SECONDS (default 1.5)
and prints ``ok SCENARIO calls=N`` when every call either returned the right result or raised a
documented error; a crash (SIGSEGV, an ASan report) or a wrong result fails.  The C code must
copy or hold what it reads before it releases the GIL or calls back into Python:

* ``many``: the list given to ``open_many``/``seal_many`` (cipher and Keyring) emptied, refilled
  with fresh objects and resized by another thread (values of 40 KiB: the GIL is released);
* ``resize``: bytearrays used as data/out/AD resized by another thread during ``encrypt_into``,
  ``decrypt_into``, ``seal_prefixed``, ``open_prefixed`` and the segment calls (a resize while
  exported raises BufferError in the resizing thread, which is the expected outcome);
* ``rows``: ``map_columns`` whose callables release the GIL while another thread clears and
  refills the rows list and the rows (lists) themselves;
* ``named``: the named sealer/opener on bytearrays being resized, while another thread swaps
  the keyring registered under the name.

``tests/core/test_native_races.py`` runs each in a subprocess; ``tools/sanitize.sh asan`` runs them
under AddressSanitizer.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from sealstore import Keyring
from sealstore.aead import AEGIS128L, AEGIS128X4
from sealstore.errors import InvalidTag
from sealstore.keyring import Key, KeyState, named_opener, named_sealer, use_keyring
from sealstore.rowmap import map_columns

BIG = 40 * 1024  # above the size at which the native calls release the GIL
CTX = b"stress/table/column"


def _hammer(stop: threading.Event, fn) -> threading.Thread:
    """Run ``fn()`` in a loop on another thread until ``stop`` is set; BufferError (resizing an
    exported buffer) is the refusal the C side relies on and is ignored."""

    def loop():
        while not stop.is_set():
            try:
                fn()
            except BufferError:
                pass

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def _run(seconds: float, call, mutators) -> int:
    stop = threading.Event()
    threads = [_hammer(stop, m) for m in mutators]
    calls, end = 0, time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            call()
            calls += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    return calls


def _ring(tag_size: int = 16) -> Keyring:
    return Keyring(
        [Key(1, "AEGIS-128X4", os.urandom(32), state=KeyState.PRIMARY)], tag_size=tag_size
    )


def scenario_many(seconds: float) -> int:
    cipher = AEGIS128X4(os.urandom(16))
    ring = _ring()
    texts = [bytes([i]) * (BIG + i) for i in range(8)]
    prefix = b"\x01\x02"
    sealed_c = [cipher.seal_prefixed(prefix, t) for t in texts]
    sealed_r = ring.seal_many(texts, CTX)
    valid = set(texts)
    shared_c, shared_r, shared_p = list(sealed_c), list(sealed_r), list(texts)

    def churn(lst, base):
        def f():
            lst.clear()
            lst.extend(bytes(v) for v in base)  # fresh objects: the old ones are freed
            del lst[len(lst) // 2 :]
            lst.extend(bytearray(v) for v in base[: len(base) // 2])
            lst[:] = [bytes(v) for v in base]

        return f

    def call():
        for got in (
            cipher.open_prefixed_many(len(prefix), shared_c),
            ring.open_many(shared_r, CTX),
        ):
            assert all(bytes(g) in valid for g in got), "open_many returned a wrong plaintext"
        for sealed in (cipher.seal_prefixed_many(prefix, shared_p), ring.seal_many(shared_p, CTX)):
            assert all(len(s) > BIG for s in sealed) or not sealed

    return _run(
        seconds,
        call,
        [churn(shared_c, sealed_c), churn(shared_r, sealed_r), churn(shared_p, texts)],
    )


def scenario_resize(seconds: float) -> int:
    cipher = AEGIS128L(os.urandom(16))
    nonce = os.urandom(16)
    plain = os.urandom(BIG)
    data = bytearray(plain)
    out = bytearray(BIG + 64)
    ad = bytearray(b"ad" * 100)
    sealed = bytearray(cipher.seal_prefixed(b"p", plain))
    seg_out = bytearray(BIG + 64 * 16)
    prefix11 = bytes(11)

    def resize(buf, n):
        def f():
            buf.extend(bytes(4096))
            del buf[n:]
            buf[:] = buf[:n]

        return f

    def same(got) -> bool:  # plain, or plain and the bytes a resizer had just appended
        return bytes(got[:BIG]) == plain and len(got) in (BIG, BIG + 4096)

    def call():
        try:
            n = cipher.encrypt_into(nonce, data, ad, out)
            ct = bytes(out[:n])
            n = cipher.decrypt_into(nonce, ct, ad, out)
            assert same(out[:n]), "decrypt_into returned a wrong plaintext"
            assert cipher.open_prefixed(1, sealed) == plain
            assert same(cipher.open_prefixed(1, cipher.seal_prefixed(b"p", data, ad), ad))
            n = cipher.seal_segments_into(seg_out, data, 4096, prefix11, 0, True, ad)
            back = bytearray(BIG + 4096)
            m = cipher.open_segments_into(back, seg_out[:n], 4096, prefix11, 0, True, ad)
            assert same(back[:m]), "the segment calls returned a wrong plaintext"
        except (ValueError, InvalidTag):
            # a resize landed between two calls (out too small, AD or a sealed value being
            # resized); never a wrong plaintext
            pass

    return _run(
        seconds,
        call,
        [
            resize(data, BIG),
            resize(out, BIG + 64),
            resize(ad, 200),
            resize(sealed, len(sealed)),
            resize(seg_out, len(seg_out)),
        ],
    )


def scenario_rows(seconds: float) -> int:
    cipher = AEGIS128X4(os.urandom(16))
    plain = [os.urandom(BIG) for _ in range(4)]
    base = [[i, cipher.seal_prefixed(b"", p), p] for i, p in enumerate(plain)]
    rows = [list(r) for r in base]

    def opener(v):
        return cipher.open_prefixed(0, v)  # releases the GIL: the churn thread runs

    def churn():
        for r in rows[:2]:
            r.clear()  # rows a running map_columns may be reading
        rows.clear()
        rows.extend(list(r) for r in base)
        rows.append([9, cipher.seal_prefixed(b"", b"x"), b"x"])

    def call():
        try:
            got = map_columns(rows, ((1, opener),))
        except IndexError:
            return  # a row emptied before it was read: the documented error
        for row in got:
            assert row[1] == row[2], "map_columns paired a plaintext with the wrong row"

    return _run(seconds, call, [churn])


def scenario_named(seconds: float) -> int:
    key = os.urandom(32)
    rings = [Keyring([Key(1, "AEGIS-128X4", key, state=KeyState.PRIMARY)]) for _ in range(2)]
    use_keyring(rings[0], "stress-named")
    seal_b = named_sealer("stress-named", CTX, lambda v: _current().seal(bytes(v), CTX), raw=bytes)
    open_b = named_opener("stress-named", CTX, lambda v: _current().open(v, CTX))
    state = {"i": 0}

    def _current():
        return rings[state["i"] % 2]

    plain = os.urandom(BIG)
    value = bytearray(plain)
    sealed = bytearray(rings[0].seal(plain, CTX))

    def swap():
        state["i"] += 1
        use_keyring(_current(), "stress-named")

    def resize(buf):
        n = len(buf)

        def f():
            buf.extend(b"x")
            del buf[n:]

        return f

    def call():
        assert open_b(seal_b(bytes(value))) in (plain, plain + b"x"), "named round trip"
        assert open_b(seal_b(value)) in (plain, plain + b"x")  # a bytearray: the fallback
        try:
            assert open_b(sealed) == plain, "named_opener returned a wrong plaintext"
        except InvalidTag:
            pass  # read while a resizer had appended a byte to it

    return _run(seconds, call, [swap, resize(value), resize(sealed)])


SCENARIOS = {
    "many": scenario_many,
    "resize": scenario_resize,
    "rows": scenario_rows,
    "named": scenario_named,
}


def main(argv: list[str]) -> int:
    name = argv[1]
    seconds = float(argv[2]) if len(argv) > 2 else 1.5
    sys.setswitchinterval(1e-5)  # switch threads as often as possible
    calls = SCENARIOS[name](seconds)
    print(f"ok {name} calls={calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
