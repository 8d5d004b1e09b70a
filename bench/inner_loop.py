"""The instruction mix of the aarch64 kernels' message loop, without ARM hardware.

Each armcrypto kernel is compiled for aarch64 (``aarch64-linux-gnu-gcc`` on other hosts, the
host compiler on aarch64) at the project's flags, disassembled with ``objdump -d``, and the
main loop of its encrypt and decrypt functions (``sealstore.bench.disasm``) counted by class.

Normalisation: one AESE is one lane's AES round, and an update runs 8 rounds per lane while
absorbing 32 bytes per lane, so a loop iteration covers 4 bytes per AESE; counts are given
per 64 bytes (two AEGIS-128L updates, one AEGIS-128X2 update, half an X4 update).  The
minimum per 64 bytes the algorithm needs, for every variant: 16 AESE + 16 AESMC (8 + 8 per
32-byte lane update), 32 EOR (per lane update: 8 round-key XORs, 2 message folds, 4 for the
keystream, 2 for the output), 4 AND, loads and stores of the 64 message bytes (2 LDP +
2 STP, or 4 + 4 single-register LDR/STR) and nothing on the stack.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import disasm

__all__ = ["CLASSES", "MINIMUM", "available", "measure", "mix_per_64"]

#: variant -> its source directory and file stem
KERNELS = {"AEGIS-128L": "aegis128l", "AEGIS-128X2": "aegis128x2", "AEGIS-128X4": "aegis128x4"}
CLASSES = ("aese", "aesmc", "eor", "and", "ld", "st", "stack", "mov", "other")
#: per 64 bytes; ld/st in instructions when paired (LDP/STP)
MINIMUM = {"aese": 16, "aesmc": 16, "eor": 32, "and": 4, "ld": 2, "st": 2, "stack": 0}
FLAGS = ["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"]
SYMBOLS = {"encrypt": "aegis_encrypt_detached", "decrypt": "aegis_decrypt_detached"}
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


def mix_per_64(loop: disasm.Loop) -> dict[str, float]:
    """Instruction counts of ``loop`` by class, per 64 bytes of message."""
    counts = dict.fromkeys(CLASSES, 0)
    for insn in loop.insns:
        counts[_classify(insn)] += 1
    aese = counts["aese"]
    if not aese:
        raise ValueError("the loop has no AESE")
    return {k: round(16 * v / aese, 2) for k, v in counts.items()}


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


def measure(root: Path) -> list[dict]:
    """One row per (variant, direction): the loop's mix per 64 bytes, its length, and the
    compiler that built it.  ``root`` holds the kernel sources (``src/``, ``include/``)."""
    tools = _tools()
    if tools is None:
        raise FileNotFoundError(available())
    cc, objdump = tools
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant, stem in KERNELS.items():
            src = root / "src" / stem / f"{stem}_armcrypto.c"
            obj = os.path.join(tmp, f"{stem}.o")
            cmd = [cc, "-c", *FLAGS, "-I", str(root / "include"), str(src), "-o", obj]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            text = subprocess.run(
                [objdump, "-d", "--no-show-raw-insn", obj],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            funcs = disasm.parse(text)
            for direction, sym in SYMBOLS.items():
                loop = disasm.main_loop(disasm.functions(funcs, sym))
                if loop is None:
                    raise ValueError(f"{stem}: no message loop in {sym}")
                rows.append(
                    {
                        "variant": variant,
                        "direction": direction,
                        "per_64_bytes": mix_per_64(loop),
                        "loop_instructions": len(loop.insns),
                        "bytes_per_iteration": 4 * loop.count(lambda i: i.op == "aese"),
                        "compiler": version.splitlines()[0] if version else cc,
                    }
                )
    return rows
