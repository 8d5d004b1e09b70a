"""The instruction mix of the aarch64 kernels' message loop, without ARM hardware.

Each armcrypto kernel is compiled for aarch64 (``aarch64-linux-gnu-gcc`` on other hosts, the
host compiler on aarch64) at the project's flags, disassembled with ``objdump -d``, and the
main loop of its encrypt and decrypt functions (``sealstore.bench.disasm``) counted by class.

Normalisation: one AESE is one lane's AES round.  An AEGIS-128 family update runs 8 rounds
per lane while absorbing 32 bytes per lane, so a loop iteration covers 4 bytes per AESE; an
AEGIS-256 family update runs 6 rounds per 16 bytes (8/3 bytes per AESE).  Counts are given per
64 bytes (two AEGIS-128L updates, one AEGIS-128X2 update, half an X4 update; four AEGIS-256
updates, two X2, one X4).  The minimum per 64 bytes the algorithm needs: for the AEGIS-128
family 16 AESE + 16 AESMC (8 + 8 per 32-byte lane update), 32 EOR (per lane update: 8
round-key XORs, 2 message folds, 4 for the keystream, 2 for the output), 4 AND; for the
AEGIS-256 family 24 AESE + 24 AESMC (6 + 6 per 16-byte lane update), 44 EOR (6 round keys,
1 message fold, 3 for the keystream, 1 for the output), 4 AND; for both, loads and stores of
the 64 message bytes (2 LDP + 2 STP, or 4 + 4 single-register LDR/STR) and nothing on the
stack.
"""

from __future__ import annotations

from typing import Any

import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from sealstore.suites import by_native_variant, native_variants

from . import disasm

__all__ = [
    "CLASSES",
    "MINIMUM",
    "MINIMUMS",
    "UPDATES",
    "bytes_per_aese",
    "family",
    "available",
    "libaegis_tree",
    "measure",
    "measure_libaegis",
    "mix_per_64",
]

#: variant -> its source directory and file stem (AEGIS-128X2 -> aegis128x2), from the registry
KERNELS = {v: v.lower().replace("-", "") for v in native_variants()}
CLASSES = ("aese", "aesmc", "eor", "and", "ld", "st", "stack", "mov", "other")
#: the suite registry's family -> (AES rounds, message bytes) of one lane's update
UPDATES = {"AEGIS-128": (8, 32), "AEGIS-256": (6, 16)}
#: the suite registry's family -> the minimum per 64 bytes; ld/st in instructions when paired
#: (LDP/STP)
MINIMUMS = {
    "AEGIS-128": {"aese": 16, "aesmc": 16, "eor": 32, "and": 4, "ld": 2, "st": 2, "stack": 0},
    "AEGIS-256": {"aese": 24, "aesmc": 24, "eor": 44, "and": 4, "ld": 2, "st": 2, "stack": 0},
}
MINIMUM = MINIMUMS["AEGIS-128"]
FLAGS = ["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"]
SYMBOLS = {"encrypt": "aegis_encrypt_detached", "decrypt": "aegis_decrypt_detached"}
#: libaegis: its kernels' static functions, and the variable naming its source tree
LIBAEGIS_SYMBOLS = {"encrypt": "encrypt_detached", "decrypt": "decrypt_detached"}
LIBAEGIS_ENV = "SEALSTORE_LIBAEGIS_SRC"
_CALL_TARGET = re.compile(r"<([^>+]+)>")
_VEC_COPY = re.compile(r"v\d+\.16b, v\d+\.16b(, v\d+\.16b)?$")


def _classify(insn: disasm.Insn) -> str:
    op = insn.op
    if insn.is_stack_vector:
        return "stack"
    if op in ("aese", "aesmc", "eor", "and"):
        return op
    if op.startswith("ld") and "[" in insn.args:
        return "ld"
    if op.startswith("st") and "[" in insn.args:
        return "st"
    if op in ("mov", "orr") and _VEC_COPY.match(insn.args):
        return "mov"
    return "other"


def family(variant: str) -> str:
    """The registry family of a native variant (a key of UPDATES and MINIMUMS)."""
    return by_native_variant(variant).family


def bytes_per_aese(variant: str) -> float:
    rounds, rate = UPDATES[family(variant)]
    return rate / rounds


def mix_per_64(loop: disasm.Loop, per_aese: float = 4.0) -> dict[str, float]:
    """Instruction counts of ``loop`` by class, per 64 bytes of message, one AESE covering
    ``per_aese`` bytes (4 for the AEGIS-128 family: bytes_per_aese)."""
    counts = dict.fromkeys(CLASSES, 0)
    for insn in loop.insns:
        counts[_classify(insn)] += 1
    aese = counts["aese"]
    if not aese:
        raise ValueError("the loop has no AESE")
    return {k: round(64 * v / (aese * per_aese), 2) for k, v in counts.items()}


def _tools() -> tuple[str, str] | None:
    """(compiler, objdump) for aarch64 objects, or None when this host has none."""
    if platform.machine().lower() in ("aarch64", "arm64"):
        cc, objdump = shutil.which(os.environ.get("CC", "cc")), shutil.which("objdump")
    else:
        cc, objdump = (
            shutil.which("aarch64-linux-gnu-gcc"),
            shutil.which("aarch64-linux-gnu-objdump"),
        )
    return (cc, objdump) if cc and objdump else None


def available() -> str | None:
    """None when the tools are here, else why not (for the bench's notes)."""
    if _tools() is None:
        return "needs aarch64-linux-gnu-gcc and aarch64-linux-gnu-objdump (binutils)"
    return None


def _loop_row(
    cc: str, objdump: str, src: Path, includes: list[Path], symbols: dict[str, str], obj: str
):
    """Compile ``src`` for aarch64 at the project's flags and count the message loop of each
    of ``symbols`` (direction -> function name): (direction, loop, called functions) each."""
    cmd = [cc, "-c", *FLAGS, *(f"-I{d}" for d in includes), str(src), "-o", obj]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    text = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", obj], check=True, capture_output=True, text=True
    ).stdout
    funcs = disasm.parse(text)
    for direction, sym in symbols.items():
        yield direction, *_message_loop(funcs, sym, src.name)


def _callee(insn: disasm.Insn) -> str | None:
    m = _CALL_TARGET.search(insn.args) if insn.is_call else None
    return m.group(1) if m else None


def _message_loop(
    funcs: dict[str, list[disasm.Insn]], sym: str, where: str
) -> tuple[disasm.Loop, list[str]]:
    """The message loop of ``sym`` and the functions it calls for its rounds.  When the
    compiler did not inline the per-block function (the loop holds a call, the rounds are in
    the callee), the loop is counted with the callee's whole body, prologue and return
    included: what one iteration executes."""
    own = disasm.functions(funcs, sym)
    loop = disasm.main_loop(own)
    if loop is not None and loop.count(lambda i: i.is_memory_store):
        return loop, []
    best = None
    for body in own.values():
        for lp in disasm.natural_loops(body):
            called = [
                c for c in map(_callee, lp.insns) if c is not None and c in funcs and c not in own
            ]
            insns = lp.insns + [i for c in dict.fromkeys(called) for i in funcs[c]]
            whole = disasm.Loop(lp.head, insns)
            if not (whole.count(lambda i: i.is_aes) and whole.count(lambda i: i.is_memory_store)):
                continue
            key = (whole.count(lambda i: i.is_aes), -len(insns))
            if best is None or key > best[0]:
                best = (key, whole, list(dict.fromkeys(called)))
    if best is None:
        raise ValueError(f"{where}: no message loop in {sym}")
    return best[1], best[2]


def _measure(
    implementation: str, sources: dict[str, Path], includes: list[Path], symbols: dict[str, str]
) -> list:
    """Rows for ``sources`` (variant -> C file), compiled and counted the same way."""
    tools = _tools()
    if tools is None:
        raise FileNotFoundError(available())
    cc, objdump = tools
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant, src in sources.items():
            obj = os.path.join(tmp, f"{src.stem}.o")
            per_aese = bytes_per_aese(variant)
            for direction, loop, calls in _loop_row(cc, objdump, src, includes, symbols, obj):
                rows.append(
                    {
                        "implementation": implementation,
                        "variant": variant,
                        "family": family(variant),
                        "direction": direction,
                        "per_64_bytes": mix_per_64(loop, per_aese),
                        "loop_instructions": len(loop.insns),
                        "bytes_per_iteration": round(
                            per_aese * loop.count(lambda i: i.op == "aese"), 2
                        ),
                        "calls": calls,
                        "compiler": version.splitlines()[0] if version else cc,
                    }
                )
    return rows


def _sources(root: Path) -> dict[str, Path]:
    """variant -> ``root/src/<stem>/<stem>_armcrypto.c`` (the layout of both trees)."""
    found = {v: root / "src" / stem / f"{stem}_armcrypto.c" for v, stem in KERNELS.items()}
    missing = [str(p) for p in found.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no armcrypto kernel source at {', '.join(missing)}")
    return found


def measure(root: Path) -> list[dict[str, Any]]:
    """One row per (variant, direction) of sealstore's kernels: the loop's mix per 64 bytes,
    its length, and the compiler that built it.  ``root`` holds ``src/`` and ``include/``."""
    return _measure("sealstore", _sources(root), [root / "include"], SYMBOLS)


def libaegis_tree() -> Path | None:
    """The libaegis source tree named by ``SEALSTORE_LIBAEGIS_SRC``, or None when unset."""
    value = os.environ.get(LIBAEGIS_ENV, "").strip()
    return Path(value) if value else None


def measure_libaegis(root: Path) -> list[dict[str, Any]]:
    """The same rows for libaegis's armcrypto kernels in the source tree ``root`` (a checkout
    of github.com/jedisct1/libaegis, or its ``src/`` files at the same paths): compiled with
    the same compiler and flags plus its include directory; its encrypt/decrypt functions
    are the files' static ``encrypt_detached``/``decrypt_detached``."""
    if not (root / "src").is_dir():
        raise FileNotFoundError(f"libaegis source tree {root}: no src/ directory there")
    return _measure("libaegis", _sources(root), [root / "src" / "include"], LIBAEGIS_SYMBOLS)
