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


# the same iteration with its rounds in a function the compiler did not inline
CALLED = """
0000000000000000 <aegis_enc>:
   0:	ldr	q0, [x2]
   4:	aese	v0.16b, v9.16b
   8:	aesmc	v0.16b, v0.16b
   c:	str	q0, [x2]
  10:	str	q0, [x0]
  14:	ret

0000000000000100 <encrypt_detached>:
 100:	bl	0 <aegis_init>
 104:	mov	x0, x19
 108:	bl	0 <aegis_enc>
 10c:	add	x19, x19, #0x4
 110:	cmp	x19, x20
 114:	b.ne	104 <encrypt_detached+0x4>
 118:	ret
"""


def test_a_loop_calling_its_rounds_is_counted_with_the_callee():
    funcs = disasm.parse(CALLED)
    loop, calls = inner_loop._message_loop(funcs, "encrypt_detached", "t.c")
    assert calls == ["aegis_enc"]
    mix = inner_loop.mix_per_64(loop)
    # 1 AESE per iteration (x16): the state reload and store-back count as ld/st
    assert mix["aese"] == mix["aesmc"] == 16
    assert mix["ld"] == 16 and mix["st"] == 32
    assert len(loop.insns) == 5 + 6
    with pytest.raises(ValueError, match="no message loop in decrypt_detached"):
        inner_loop._message_loop(funcs, "decrypt_detached", "t.c")


def test_an_aegis256_aese_covers_fewer_bytes():
    # six rounds per 16-byte lane update: the same loop is 8/3 bytes per AESE, x1.5 per 64
    loop = disasm.main_loop(disasm.functions(disasm.parse(LOOP), "aegis_encrypt_detached"))
    mix = inner_loop.mix_per_64(loop, 16 / 6)
    assert mix["aese"] == mix["aesmc"] == 24 and mix["eor"] == 12
    assert inner_loop.UPDATES["AEGIS-128"] == (8, 32)
    assert inner_loop.bytes_per_aese("AEGIS-128X4") == 4
    assert inner_loop.MINIMUMS["AEGIS-256"]["aese"] == 64 / (16 / 6)


def test_a_table_of_two_families_has_a_minimum_row_each():
    row = {
        "variant": "AEGIS-128L",
        "family": "AEGIS-128",
        "direction": "encrypt",
        "per_64_bytes": dict.fromkeys(inner_loop.CLASSES, 1),
        "compiler": "cc 1.0",
    }
    g = grids._aarch64_loop([row, dict(row, variant="AEGIS-256", family="AEGIS-256")])
    assert [r[0] for r in g.rows[:2]] == [
        "algorithm minimum, AEGIS-128",
        "algorithm minimum, AEGIS-256",
    ]
    assert g.rows[1][1] == "24" and g.rows[0][1] == "16"


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
    assert g.rows[0][0] == "algorithm minimum"
    assert g.rows[1][0] == "sealstore AEGIS-128L encrypt"
    assert g.rows[1][1:] == ["1.5"] * (len(g.header) - 1)
    assert "cc 1.0" in g.notes[0]


def test_libaegis_rows_are_named_in_the_table():
    row = {
        "implementation": "libaegis",
        "variant": "AEGIS-128X2",
        "direction": "decrypt",
        "per_64_bytes": dict.fromkeys(inner_loop.CLASSES, 2),
        "compiler": "cc 1.0",
    }
    g = grids._aarch64_loop([row])
    assert g.rows[1][0] == "libaegis AEGIS-128X2 decrypt" and len(g.notes) == 1
    g = grids._aarch64_loop([dict(row, calls=["aegis128x2_dec"])])
    assert "aegis128x2_dec (not inlined)" in g.notes[1]


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
        minimum = inner_loop.MINIMUMS[inner_loop.family(r["variant"])]
        for op in ("aese", "aesmc", "eor", "and"):
            assert mix[op] == minimum[op], (r["variant"], r["direction"], op, mix)
        if r["variant"] != "AEGIS-128X4":  # X4's state alone fills the 32 registers
            assert mix["stack"] == 0, r


# A stand-in for a libaegis kernel file, written for this test (not libaegis code): the two
# static functions the comparison looks for, each with a loop of AESE rounds writing output,
# kept alive by an exported table as libaegis keeps its own.
STAND_IN = r"""
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#pragma GCC target("+simd+crypto")

static int
encrypt_detached(uint8_t *c, const uint8_t *m, size_t n, const uint8_t *k)
{
    uint8x16_t s = vld1q_u8(k), z = vmovq_n_u8(0);
    for (size_t i = 0; i + 16 <= n; i += 16) {
        uint8x16_t x = vld1q_u8(m + i);
        s = veorq_u8(vaesmcq_u8(vaeseq_u8(s, z)), x);
        vst1q_u8(c + i, veorq_u8(x, s));
    }
    return 0;
}

static int
decrypt_detached(uint8_t *m, const uint8_t *c, size_t n, const uint8_t *k)
{
    uint8x16_t s = vld1q_u8(k), z = vmovq_n_u8(0);
    for (size_t i = 0; i + 16 <= n; i += 16) {
        uint8x16_t x = veorq_u8(vld1q_u8(c + i), s);
        s = veorq_u8(vaesmcq_u8(vaeseq_u8(s, z)), x);
        vst1q_u8(m + i, x);
    }
    return 0;
}

int (*const stand_in_table[])(uint8_t *, const uint8_t *, size_t, const uint8_t *) = {
    encrypt_detached, decrypt_detached
};
"""


def _stand_in_tree(root: Path, stems=tuple(inner_loop.KERNELS.values())) -> Path:
    (root / "src" / "include").mkdir(parents=True)
    for stem in stems:
        (root / "src" / stem).mkdir()
        (root / "src" / stem / f"{stem}_armcrypto.c").write_text(STAND_IN)
    return root


def _need_cross_tools():
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump"):
        if shutil.which(tool) is None:
            if IN_CI:
                pytest.fail(f"{tool} is missing in CI")
            pytest.skip(f"{tool} is not installed")


def test_without_the_variable_the_libaegis_rows_are_skipped_with_a_note(monkeypatch):
    monkeypatch.delenv(inner_loop.LIBAEGIS_ENV, raising=False)
    monkeypatch.setattr(inner_loop, "available", lambda: None)
    monkeypatch.setattr(inner_loop, "measure", lambda root: [{"implementation": "sealstore"}])
    monkeypatch.setattr(
        inner_loop, "measure_libaegis", lambda root: pytest.fail("libaegis was compiled")
    )
    result = {}
    notes = aead._aarch64_loop(result)
    assert result["aarch64_loop"] == [{"implementation": "sealstore"}]
    assert notes == [
        "aarch64 instruction mix: libaegis rows not run "
        f"(set {inner_loop.LIBAEGIS_ENV} to a libaegis source tree)"
    ]
    assert inner_loop.libaegis_tree() is None
    monkeypatch.setenv(inner_loop.LIBAEGIS_ENV, "  ")
    assert inner_loop.libaegis_tree() is None


@pytest.mark.toolchain
def test_a_stand_in_tree_is_compiled_and_counted(tmp_path, monkeypatch):
    _need_cross_tools()
    monkeypatch.setenv(inner_loop.LIBAEGIS_ENV, str(_stand_in_tree(tmp_path)))
    monkeypatch.setattr(inner_loop, "measure", lambda root: [])
    result = {}
    assert aead._aarch64_loop(result) == []
    rows = result["aarch64_loop"]
    assert {(r["variant"], r["direction"]) for r in rows} == {
        (v, d) for v in inner_loop.KERNELS for d in ("encrypt", "decrypt")
    }
    for r in rows:
        assert r["implementation"] == "libaegis"
        # one AESE + one AESMC per 16 bytes of loop, normalised as the variant's AESE: 4 bytes
        # each for the AEGIS-128 family (16 per 64 bytes), 8/3 for AEGIS-256 (24 per 64)
        per_aese = inner_loop.bytes_per_aese(r["variant"])
        assert r["bytes_per_iteration"] == round(per_aese, 2)
        aese = 64 / per_aese
        assert r["per_64_bytes"]["aese"] == r["per_64_bytes"]["aesmc"] == round(aese, 2)
        assert r["per_64_bytes"]["st"] == round(aese, 2) and r["per_64_bytes"]["stack"] == 0


def test_a_libaegis_tree_without_a_kernel_is_refused(tmp_path, monkeypatch):
    tree = _stand_in_tree(tmp_path, stems=("aegis128l", "aegis128x2"))
    with pytest.raises(FileNotFoundError, match="aegis128x4_armcrypto.c"):
        inner_loop.measure_libaegis(tree)
    monkeypatch.setenv(inner_loop.LIBAEGIS_ENV, str(tree))
    monkeypatch.setattr(inner_loop, "available", lambda: None)
    monkeypatch.setattr(inner_loop, "measure", lambda root: [])
    notes = aead._aarch64_loop({})
    assert len(notes) == 1 and "aegis128x4_armcrypto.c" in notes[0]
    with pytest.raises(FileNotFoundError, match="no src/"):
        inner_loop.measure_libaegis(tmp_path / "nowhere")


@pytest.mark.toolchain
def test_a_libaegis_file_that_does_not_compile_is_a_note(tmp_path, monkeypatch):
    _need_cross_tools()
    tree = _stand_in_tree(tmp_path)
    (tree / "src" / "aegis128x2" / "aegis128x2_armcrypto.c").write_text("#error stand-in\n")
    monkeypatch.setenv(inner_loop.LIBAEGIS_ENV, str(tree))
    monkeypatch.setattr(inner_loop, "measure", lambda root: [])
    result = {}
    notes = aead._aarch64_loop(result)
    assert len(notes) == 1 and notes[0].startswith("aarch64 instruction mix: libaegis rows not run")
    assert "aegis128x2_armcrypto.c" in notes[0]
    assert result["aarch64_loop"] == []  # no partial libaegis rows
