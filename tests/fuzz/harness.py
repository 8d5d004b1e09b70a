"""Shared pieces of the fuzz targets in this directory (atheris; see docs/HARDENING.md).

Each target module defines ``check(data: bytes)``: it feeds ``data`` to sealstore and raises
AssertionError when a property breaks (an undocumented exception, plaintext returned for a
modified input, kernels disagreeing).  ``main()`` runs it under atheris; ``tests/toolchain/test_hardening_fuzz.py``
replays the seed corpus (and every crash saved there as a regression) without atheris.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
CONTEXT = b"fuzz/table/column"


def material(key_id: int) -> bytes:
    """Fixed key material, so the committed seeds stay valid."""
    return bytes((key_id * 37 + i) & 0xFF for i in range(32))


def instrument_sealstore() -> int:
    """Instrument every Python function of the loaded sealstore modules for coverage (atheris'
    import hook misses packages loaded through an editable install's finder, and
    ``instrument_all`` takes many seconds); returns how many were instrumented."""
    import atheris

    seen, count = set(), 0

    def visit(fn) -> None:
        nonlocal count
        fn = getattr(fn, "__func__", fn)
        if isinstance(fn, types.FunctionType) and id(fn) not in seen:
            seen.add(id(fn))
            atheris.instrument_func(fn)
            count += 1

    for name, mod in list(sys.modules.items()):
        if not (name == "sealstore" or name.startswith("sealstore.")) or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if getattr(obj, "__module__", None) != name:
                continue
            if isinstance(obj, type):
                for attr in vars(obj).values():
                    if isinstance(attr, property):
                        for f in (attr.fget, attr.fset):
                            visit(f)
                    else:
                        visit(attr)
            else:
                visit(obj)
    return count


# (key id, suite, state) of the keyring every target opens with
KEYS = (
    (0x00000001, "AEGIS-128X4", "primary"),
    (0x00000002, "AEGIS-128L", "active"),
    (0x00000003, "AES-256-GCM", "active"),
    (0x00000004, "AEGIS-128X2", "retired"),
    (0x00000005, "AEGIS-128X4", "destroyed"),
)


def keyring(primary: int = 1, tag_size: int = 32):
    """The fuzz keyring; ``primary`` picks which key seals (the seed generators use it)."""
    from sealstore import Keyring
    from sealstore.keyring import Key, KeyState

    keys = []
    for key_id, suite, state in KEYS:
        state = KeyState(state)
        if key_id == primary:
            state = KeyState.PRIMARY
        elif state is KeyState.PRIMARY:
            state = KeyState.ACTIVE
        mat = None if state is KeyState.DESTROYED else material(key_id)
        keys.append(Key(key_id, suite, mat, state=state))
    # the corpus holds values of both tag sizes: open both, as a keyring migrating between them does
    return Keyring(keys, tag_size=tag_size, accept_short_tags=True)


def seeds(target: str) -> dict[bytes, str]:
    """The committed seed inputs of ``target``: content -> file name."""
    d = CORPUS / target
    return (
        {p.read_bytes(): p.name for p in sorted(d.iterdir()) if p.is_file()} if d.is_dir() else {}
    )


def write_seeds(target: str, inputs) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(inputs):
        (d / f"seed-{i:03d}").write_bytes(data)


def main(target: str, check) -> None:
    """``python tests/fuzz/fuzz_X.py [libFuzzer flags] [corpus dirs]`` (``--make-seeds`` rewrites
    the seed corpus)."""
    if "--make-seeds" in sys.argv:
        mod = sys.modules["__main__"]
        write_seeds(target, mod.make_seeds())
        print(f"wrote {len(seeds(target))} seeds to {CORPUS / target}")
        return
    import atheris

    print(f"instrumented {instrument_sealstore()} sealstore functions", file=sys.stderr)
    argv = list(sys.argv)
    if not any(not a.startswith("-") for a in argv[1:]):
        argv.append(str(CORPUS / target))
    atheris.Setup(argv, check)
    atheris.Fuzz()


def expect(exc: BaseException, allowed: tuple[type[BaseException], ...], what: str) -> None:
    """Re-raise ``exc`` as a property failure unless it is one of the documented ones."""
    if not isinstance(exc, allowed):
        names = ", ".join(a.__name__ for a in allowed)
        raise AssertionError(f"{what} raised {type(exc).__name__}: {exc!r} (documented: {names})")
