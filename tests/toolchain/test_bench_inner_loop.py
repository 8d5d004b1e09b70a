"""The aarch64 instruction-mix report (sealstore.bench.inner_loop, tools/inner_loop.py, the
bench's "aarch64 armcrypto message loop" table): its normalisation on a hand-written loop, its
rendering, the bench note when the tools are absent, and the real kernels against the
algorithm's minimum (aarch64 cross tools; skipped without them, failed in CI)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sealstore.bench import aead, disasm, grids, inner_loop

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"

# one AEGIS-128L-shaped iteration: 2 AESE (8 bytes), one spill, one copy, loop control
LOOP = """
0000000000000000 <aegis_encrypt_detached>:
   0:	ldr	q4, [x1], #16
   4:	aese	v0.16b, v9.16b
   8:	aesmc	v0.16b, v0.16b
   c:	mov	v5.16b, v1.16b
  10:	aese	v5.16b, v9.16b
  14:	aesmc	v5.16b, v5.16b
  18:	eor	v1.16b, v5.16b, v4.16b
  1c:	str	q1, [sp, #32]
  20:	str	q4, [x0], #16
  24:	subs	x2, x2, #0x10
  28:	b.ne	0 <aegis_encrypt_detached>
"""


def test_counts_are_per_64_bytes():
    loop = disasm.main_loop(disasm.functions(disasm.parse(LOOP), "aegis_encrypt_detached"))
    mix = inner_loop.mix_per_64(loop)
    # 2 AESE = 8 bytes per iteration: every count x 8
    assert mix["aese"] == mix["aesmc"] == 16
    assert mix["eor"] == 8 and mix["ld"] == 8 and mix["st"] == 8
    assert mix["stack"] == 8 and mix["mov"] == 8 and mix["other"] == 16
    assert sum(mix.values()) == 8 * len(loop.insns)


def test_a_loop_without_aese_is_refused():
    with pytest.raises(ValueError):
        inner_loop.mix_per_64(disasm.Loop(0, [disasm.Insn(0, "eor", "v0.16b, v0.16b, v1.16b")]))


def test_the_bench_table_and_its_note():
    row = {
        "variant": "AEGIS-128L",
        "direction": "encrypt",
        "per_64_bytes": dict.fromkeys(inner_loop.CLASSES, 1.5),
        "loop_instructions": 90,
        "bytes_per_iteration": 64,
        "compiler": "cc 1.0",
    }
    g = grids._aarch64_loop([row])
    assert g.rows[0][0] == "algorithm minimum" and g.rows[1][0] == "AEGIS-128L encrypt"
    assert g.rows[1][1:] == ["1.5"] * (len(g.header) - 1)
    assert "cc 1.0" in g.notes[0]


def test_the_bench_says_why_it_did_not_run(monkeypatch):
    monkeypatch.setattr(inner_loop, "available", lambda: "needs a cross compiler")
    result = {}
    assert aead._aarch64_loop(result) == [
        "aarch64 instruction mix: not run (needs a cross compiler)"
    ]
    assert "aarch64_loop" not in result


@pytest.mark.toolchain
def test_the_kernels_meet_the_minimum():
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump"):
        if shutil.which(tool) is None:
            if IN_CI:
                pytest.fail(f"{tool} is missing in CI")
            pytest.skip(f"{tool} is not installed")
    rows = inner_loop.measure(ROOT / "native")
    assert {(r["variant"], r["direction"]) for r in rows} == {
        (v, d) for v in inner_loop.KERNELS for d in ("encrypt", "decrypt")
    }
    for r in rows:
        mix = r["per_64_bytes"]
        for op in ("aese", "aesmc", "eor", "and"):
            assert mix[op] == inner_loop.MINIMUM[op], (r["variant"], r["direction"], op, mix)
        if r["variant"] != "AEGIS-128X4":  # X4's state alone fills the 32 registers
            assert mix["stack"] == 0, r
