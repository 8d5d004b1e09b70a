"""The inlining guard (tools/inline_guard.py) and the loop finder under it (sealstore.bench.disasm).

The disassembly rules are checked on small hand-written ``objdump`` listings (no toolchain);
the guard itself runs on a real x86 and a real aarch64 kernel, at the project's flags and at
-O2 with gcc and clang, and must fail when the same kernels are built with every
``always_inline`` helper turned into ``noinline`` (the regression it exists for).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sealstore.bench import disasm

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "tools" / "inline_guard.py"
IN_CI = os.environ.get("CI", "").lower() == "true"

X86_LOOP = """
0000000000000000 <aegis_encrypt_detached>:
   0:	push   %rbp
   1:	mov    %rsp,%rbp
   4:	cmp    $0x20,%rdx
   8:	jb     40 <aegis_encrypt_detached+0x40>
   a:	movdqu (%rsi),%xmm8
   f:	aesenc %xmm1,%xmm0
  14:	aesenc %xmm2,%xmm1
  19:	{extra}
  1e:	movdqu %xmm8,(%rdi)
  23:	add    $0x20,%rsi
  27:	sub    $0x20,%rdx
  2b:	cmp    $0x1f,%rdx
  2f:	ja     a <aegis_encrypt_detached+0xa>
  40:	pop    %rbp
  41:	ret
"""

A64_TWO_LOOPS = """
0000000000000000 <f>:
   0:	mov	x29, sp
   4:	mov	x3, #0xa                   	// #10
   8:	aese	v0.16b, v9.16b
   c:	aesmc	v0.16b, v0.16b
  10:	subs	x3, x3, #0x1
  14:	b.ne	8 <f+0x8>  // b.any
  18:	cbz	x2, 40 <f+0x40>
  1c:	ldr	q4, [x1], #16
  20:	aese	v1.16b, v9.16b
  24:	aesmc	v1.16b, v1.16b
  28:	str	q4, [x0], #16
  2c:	subs	x2, x2, #0x10
  30:	b.ne	1c <f+0x1c>  // b.any
  40:	ret
"""


def _loop(text: str, sym: str = "aegis_encrypt_detached"):
    return disasm.main_loop(disasm.functions(disasm.parse(text), sym))


def test_finds_the_loop_and_counts_its_aes_rounds():
    loop = _loop(X86_LOOP.format(extra="pxor   %xmm3,%xmm4"))
    assert loop is not None and loop.head == 0xA
    assert loop.count(lambda i: i.is_aes) == 2
    assert loop.count(lambda i: i.is_call) == 0
    assert loop.count(lambda i: i.is_stack_vector) == 0


def test_a_call_in_the_loop_is_seen():
    loop = _loop(X86_LOOP.format(extra="call   0 <aegis_update>"))
    assert loop.count(lambda i: i.is_call) == 1


@pytest.mark.parametrize(
    "extra", ["movdqa %xmm5,0x40(%rsp)", "pxor   0x10(%rbp),%xmm4", "movdqa -0x30(%rbp),%xmm2"]
)
def test_state_on_the_stack_is_seen(extra):
    loop = _loop(X86_LOOP.format(extra=extra))
    assert loop.count(lambda i: i.is_stack_vector) == 1


def test_rbp_without_a_frame_is_an_ordinary_register():
    text = X86_LOOP.format(extra="movdqu 0x10(%rbp),%xmm4").replace("mov    %rsp,%rbp", "nop")
    loop = _loop(text)
    assert loop.count(lambda i: i.is_stack_vector) == 0


def test_the_output_loop_wins_over_an_equal_loop_without_stores():
    # the 10-round init loop has as many AES rounds as the message loop, but writes nothing
    loop = _loop(A64_TWO_LOOPS, "f")
    assert loop.head == 0x1C
    ops = loop.mix()
    assert ops["aese"] == ops["aesmc"] == 1 and ops["str"] == 1


def test_a_backward_jump_that_is_no_loop_is_ignored():
    # 30 jumps back to 10, but 10 does not dominate 30 (it is reached from 0 -> 20 as well)
    text = """
0000000000000000 <g>:
   0:	cbz	x0, 20 <g+0x20>
   4:	nop
  10:	aese	v0.16b, v1.16b
  14:	str	q0, [x1]
  18:	ret
  20:	aese	v2.16b, v1.16b
  24:	str	q2, [x1]
  30:	b	10 <g+0x10>
"""
    assert disasm.natural_loops(disasm.parse(text)["g"]) == []


def test_split_off_clones_are_part_of_the_function():
    text = """
0000000000000000 <aegis_encrypt_detached.part.0>:
   0:	aese	v0.16b, v1.16b
   4:	str	q0, [x1]
   8:	b.ne	0 <aegis_encrypt_detached.part.0>
   c:	ret

0000000000000010 <aegis_encrypt_detached>:
  10:	b	0 <aegis_encrypt_detached.part.0>

0000000000000020 <aegis_encrypt_detached_other>:
  20:	ret
"""
    found = disasm.functions(disasm.parse(text), "aegis_encrypt_detached")
    assert sorted(found) == ["aegis_encrypt_detached", "aegis_encrypt_detached.part.0"]
    assert disasm.main_loop(found).head == 0


# ---- the guard on real builds -------------------------------------------------------------

SAMPLE = ["aegis128l_avx2", "aegis128x2_armcrypto"]  # an x86 and an aarch64 kernel


def _need(*tools):
    for tool in tools:
        if shutil.which(tool) is None:
            if IN_CI:
                pytest.fail(f"{tool} is missing in CI (.ci/run installs it)")
            pytest.skip(f"{tool} is not installed")
    if not Path("/usr/aarch64-linux-gnu/include").is_dir():
        if IN_CI:
            pytest.fail("the aarch64 sysroot is missing in CI")
        pytest.skip("no aarch64 sysroot")


def _guard(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(GUARD), *args], capture_output=True, text=True, timeout=900
    )


TOOLS = ("gcc", "clang", "objdump", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump")


@pytest.mark.toolchain
@pytest.mark.parametrize("kernel", SAMPLE)
def test_guard_passes_on_the_kernels(kernel):
    _need(*TOOLS)
    r = _guard("--only", kernel, "-v")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok   ") == 4, r.stdout  # gcc and clang, project flags and -O2


@pytest.mark.toolchain
@pytest.mark.parametrize("kernel", SAMPLE)
def test_guard_fails_when_the_update_is_not_inlined(kernel):
    _need(*TOOLS)
    # every SEALSTORE_INLINE helper (AES round, update, ...) becomes an out-of-line call
    r = _guard("--only", kernel, "--cflags=-Dalways_inline=noinline")
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 4, r.stdout
    assert all("no loop holds an AES round" in f or "calls" in f for f in fails), r.stdout


def test_every_vector_kernel_source_is_in_the_guard_table():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import inline_guard
    finally:
        sys.path.pop(0)
    listed = {k.source for k in inline_guard.KERNELS}
    tree = {
        str(p.relative_to(ROOT / "native" / "src"))
        for p in (ROOT / "native" / "src").glob("aegis*/*.c")
        if not p.name.endswith("_portable.c")
    }
    assert listed == tree


# ---- COFF objects (llvm-objdump) and the MSVC-mode guard ----------------------------------

# llvm-objdump's form: "0x" branch targets, "movq"/"callq", the Windows x64 prologue setting
# rbp inside the frame
COFF_LOOP = """
0000000000000000 <aegis_encrypt_detached>:
       0:      	pushq	%rbp
       1:      	subq	$696, %rsp              # imm = 0x2B8
       8:      	leaq	128(%rsp), %rbp
       f:      	cmpq	$32, %r8
      13:      	jb	0x40 <aegis_encrypt_detached+0x40>
      15:      	vmovdqu	(%rdx), %xmm8
      19:      	vaesenc	%xmm1, %xmm0, %xmm0
      1e:      	vaesenc	%xmm2, %xmm1, %xmm1
      23:      	{extra}
      28:      	vmovdqu	%xmm8, (%rcx)
      2c:      	addq	$32, %rdx
      30:      	cmpq	$31, %r8
      34:      	ja	0x15 <aegis_encrypt_detached+0x15>
      40:      	popq	%rbp
      41:      	retq
"""


def test_llvm_objdump_listing_of_a_coff_object():
    loop = _loop(COFF_LOOP.format(extra="vpxor	%xmm3, %xmm4, %xmm4"))
    assert loop is not None and loop.head == 0x15
    assert loop.count(lambda i: i.is_aes) == 2
    assert loop.count(lambda i: i.is_stack_vector) == 0
    loop = _loop(COFF_LOOP.format(extra="callq	0x0 <aegis_update>"))
    assert loop.count(lambda i: i.is_call) == 1
    # rbp = rsp + 128 (the Windows frame): rbp-based vector moves are stack traffic
    loop = _loop(COFF_LOOP.format(extra="vmovdqa	%xmm5, -48(%rbp)"))
    assert loop.count(lambda i: i.is_stack_vector) == 1


MSVC_TOOLS = ("clang", "llvm-objdump")


def _need_msvc():
    for tool in MSVC_TOOLS:
        if shutil.which(tool) is None:
            if IN_CI:
                pytest.fail(f"{tool} is missing in CI (.ci/run installs it)")
            pytest.skip(f"{tool} is not installed")


@pytest.mark.toolchain
def test_guard_passes_on_every_x86_kernel_as_msvc_builds_it():
    """clang in cl mode, __clang__ undefined (the _MSC_VER branches), /Ob1 and /Ob2: every
    x86 kernel keeps its update inlined (__forceinline) and its state in registers, but for
    the listed known builds."""
    _need_msvc()
    r = _guard("--msvc", "-v")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    ok = [x for x in lines if x.startswith("ok   x86_64-msvc ")]
    known = [x for x in lines if x.startswith("KNOWN x86_64-msvc ")]
    assert len(ok) + len(known) == 30 and len(known) <= 2, r.stdout
    assert any(x.endswith(" Ob1: encrypt: 16 aes, 0 stack; decrypt: 16 aes, 0 stack") for x in ok)


@pytest.mark.toolchain
def test_msvc_guard_fails_without_forceinline():
    """The seed's lesson: MSVC's default /Ob1 inlines only what is marked inline; with
    __forceinline defined away, the updates become calls at /Ob1 and the guard says so."""
    _need_msvc()
    r = _guard("--msvc", "--only", "aegis128l_avx2", "--cflags=-D__forceinline=")
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [x for x in r.stdout.splitlines() if x.startswith("FAIL ")]
    assert len(fails) == 1 and " Ob1: " in fails[0], r.stdout
    assert "no loop holds an AES round" in fails[0] or "calls" in fails[0], r.stdout


@pytest.mark.toolchain
def test_msvc_guard_fails_at_ob1_on_every_kernel_without_forceinline():
    """Without __forceinline every x86 kernel's /Ob1 build fails, the one with a known entry
    (aegis256x4_avx2: a spill) too: a known entry never excuses an update that is not inlined."""
    _need_msvc()
    r = _guard("--msvc", "--cflags=-D__forceinline=")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    ob1 = [x for x in lines if " clang-cl Ob1: " in x]
    assert len(ob1) == 15 and all(x.startswith("FAIL ") for x in ob1), r.stdout
    listed = [x for x in ob1 if " aegis256x4_avx2 " in x]
    assert len(listed) == 1 and "not covered by its known entry" in listed[0], r.stdout
    assert "no loop holds an AES round" in listed[0], r.stdout


def test_a_known_entry_never_excuses_a_call_or_a_missing_update():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import inline_guard
    finally:
        sys.path.pop(0)
    kernel = inline_guard.Kernel(
        "x86_64",
        "aegis128l/aegis128l_avx2.c",
        ("aegis_encrypt_detached",),
        1,
        16,
        known=(("clang-cl", "Ob1", "a spill"),),
        words=2,
    )
    ok = COFF_LOOP.format(extra="vpxor	%xmm3, %xmm4, %xmm4")
    assert inline_guard.check_object(kernel, ok)[:2] == ([], [])
    spill = COFF_LOOP.format(extra="vmovdqa	%xmm5, -48(%rbp)")
    failures, unexcused, _ = inline_guard.check_object(kernel, spill)
    assert len(failures) == 1 and "stack" in failures[0] and unexcused == []
    call = COFF_LOOP.format(extra="callq	0x0 <aegis_update>")
    failures, unexcused, _ = inline_guard.check_object(kernel, call)
    assert failures == [] and len(unexcused) == 1 and "calls" in unexcused[0]
    no_update = "0000000000000000 <aegis_encrypt_detached>:\n       0:      \tretq\n"
    assert "not inlined" in inline_guard.check_object(kernel, no_update)[1][0]
    assert "not in the object" in inline_guard.check_object(kernel, "")[1][0]


# stands in for MSVC's cl.exe (not on this machine): clang in cl mode as --msvc drives it, the
# -m flags of the kernel's own target, "--" before the (absolute) source path
FAKE_CL = """
import re, subprocess, sys
args, src = sys.argv[1:-1], sys.argv[-1]
target = re.search(r'^#define SEALSTORE_TARGET "([^"]+)"', open(src).read(), re.M).group(1)
cmd = ["clang", "--driver-mode=cl", "--target=x86_64-pc-windows-msvc", "/U__clang__", "/Zl",
       "-imsvc", sys.argv[0].rsplit("/", 1)[0] + "/shim"]
cmd += ["-m" + f for f in target.split(",")] + args + ["--", src]
sys.exit(subprocess.call(cmd))
"""


@pytest.mark.toolchain
def test_msvc_guard_drives_a_cl_command(tmp_path):
    """--msvc --cl CL: what a maintainer runs on a Windows runner with MSVC's own compiler (the
    release check of docs/HARDENING.md); here a stand-in cl.  No known entry applies to it."""
    _need_msvc()
    (tmp_path / "cl.py").write_text(FAKE_CL)
    (tmp_path / "shim").symlink_to(ROOT / "tools" / "msvc_shim")
    cl = f"{sys.executable} {tmp_path / 'cl.py'}"
    r = _guard("--msvc", "--cl", cl, "--only", "aegis128l_avx2", "-v")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok   x86_64-msvc aegis128l_avx2 cl ") == 2, r.stdout
    r = _guard("--msvc", "--cl", cl, "--only", "aegis256x4_avx2")  # clang -O2's spill
    assert r.returncode == 1 and r.stdout.count("FAIL ") == 2, r.stdout + r.stderr
    r = _guard("--msvc", "--cl", cl, "--only", "aegis128l_avx2", "--cflags=-D__forceinline=")
    assert r.returncode == 1, r.stdout + r.stderr
    assert [x.split(":")[0] for x in r.stdout.splitlines() if x.startswith("FAIL ")] == [
        "FAIL x86_64-msvc aegis128l_avx2 cl Ob1"
    ], r.stdout
    r = _guard("--cl", "cl")
    assert r.returncode == 2 and "--cl needs --msvc" in r.stderr
