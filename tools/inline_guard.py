"""The inlining guard: every vector kernel's message loop keeps its AEGIS state in registers.

The field's classic regression is an AES round or state update that stops being inlined
(libsodium under MSVC /Ob1 ran AEGIS at half speed; RustCrypto's AES-CTR lost ~40% when its
keystream spilled to the stack).  For every kernel in KERNELS, built with each compiler at the
project's flags and at -O2, this disassembles the encrypt and decrypt functions
(``objdump -d``), finds their main loop (sealstore.bench.disasm: the natural loop with the most
AES rounds) and fails when

* no loop holds a whole inlined update (one AES round per state word and register of a word:
  8 for AEGIS-128L, 6 for AEGIS-256),
* the loop contains a call (``call``/``bl``/``blr``), or
* the loop moves vector registers to or from the stack (rsp/rbp or sp/x29 based), for kernels
  whose state fits in the register file with room to spare (STATE_ROOM registers).  A state
  that cannot fit (AEGIS-128X2 on 16 xmm registers, X4 on 16 xmm/ymm) must spill; for those
  the count is printed, not judged.  (armcrypto X4 runs its loop on half the state: its row
  says so.)

The kernels are the variant table's (native/include/sealstore_variants.h, read with
native/build_ffi.py): a new kernel is covered by setting its column there; KNOWN and
STATE_REGS hold what only some kernels need.

``--msvc`` checks the x86 kernels as MSVC builds them instead: clang in cl mode, target
x86_64-pc-windows-msvc, ``__clang__`` undefined (the ``_MSC_VER`` branches: ``__forceinline``,
no target pragma; each file gets the -m flags of its own SEALSTORE_TARGET, since clang's
headers declare the intrinsics only with them, where MSVC's declare them all), C runtime from
tools/msvc_shim, at ``/O2 /Ob1`` (MSVC's default inlining: only functions marked inline) and
``/O2 /Ob2``, the COFF objects read with llvm-objdump.  Known builds are keyed by
("clang-cl", "Ob1"/"Ob2").  ``--msvc --cl cl`` builds with MSVC's own compiler instead (on a
Windows runner, in a Native Tools prompt; llvm-objdump reads its COFF objects): no known entry
applies to it (label "cl").

A KNOWN entry excuses a spill or a rolled loop only: a build whose update is not inlined or
whose loop calls fails even when it is listed.

    python tools/inline_guard.py [--arch x86_64|aarch64] [--msvc [--cl CL]] [--only NAME]
                                 [--cflags "-D..."] [-v]

Exit 0 when every build passes, 1 on a failure, 2 when a compiler or objdump is missing
(``--allow-missing`` skips those builds instead).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sealstore.bench import disasm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "native"))
try:
    import build_ffi  # the variant table's reader
finally:
    sys.path.pop(0)
SRC = ROOT / "native" / "src"
INCLUDE = ROOT / "native" / "include"
ENC_DEC = ("aegis_encrypt_detached", "aegis_decrypt_detached")
#: registers a loop needs besides the state (message blocks, keystream, a zero key)
STATE_ROOM = 4


@dataclass(frozen=True)
class Kernel:
    arch: str  # x86_64 or aarch64
    source: str  # under native/src
    symbols: tuple[str, ...]
    state_regs: int  # vector registers one state word takes in the main loop (x words)
    regfile: int  # vector registers of the ISA
    #: (compiler, flags label) -> why that build is known to fail: printed as KNOWN, not
    #: counted; a known build that passes fails the run (remove its entry)
    known: tuple[tuple[str, str, str], ...] = ()
    words: int = 8  # state words: 8 for the AEGIS-128 family, 6 for AEGIS-256

    @property
    def name(self) -> str:
        return Path(self.source).stem

    @property
    def must_fit(self) -> bool:
        return self.words * self.state_regs + STATE_ROOM <= self.regfile


_SSE_COPIES = "clang keeps two state words on the stack: the 2-operand SSE form needs copies"
_LANE_LOOP = "gcc -O2 keeps the 4-lane loops of aesni_blk.h rolled (the state indexed in memory)"
# since the two-block decryption loop (both ciphertext blocks loaded before either store) and
# the late message fold.  With AEGIS_UNROLL=1 these builds pass, but measured (gcc, round
# robin, 1 KiB-1 MiB) that form is 3-22% slower decrypting and 10-30% encrypting: kept
_DEC2_SPILLS = "gcc spills two vectors per iteration of the two-block decryption loop"
# measured: the late fold is ~10% faster at 16 KiB (7.5 -> 8.3 GB/s best of 61, round robin);
# folding the plaintext in early keeps the state in registers but costs that
_CLANG_O2_X4_SPILL = "clang -O2 spills 4 vectors per block (clean at -O3, the project's flags)"
# clang-cl's /O2 is clang's -O2 (cl mode has no -O3): the same 4 vectors per block as above,
# at /Ob1 and /Ob2 alike (the update is inlined: __forceinline); MSVC itself is not run here
_CLANG_CL_X4_SPILL = "clang-cl /O2 (= clang -O2) spills 4 vectors per block, as clang -O2 does"
_LATE_FOLD_SPILL = (
    "clang -O2 keeps one word of the decryption pass on the stack (2 moves per block) with the "
    "late plaintext fold"
)
#: (kernel, flags label) -> the rows of known failing builds, keyed by kernel file name
KNOWN = {
    "aegis128l_aesni": (
        ("clang", "project", _SSE_COPIES),
        ("clang", "O2", _SSE_COPIES),
        ("gcc", "project", _DEC2_SPILLS),
        ("gcc", "O2", _DEC2_SPILLS),
    ),
    "aegis128x4_aesni": (("gcc", "O2", _LANE_LOOP),),
    "aegis256x2_aesni": (("clang", "O2", _LATE_FOLD_SPILL),),
    "aegis256x4_avx2": (
        ("clang", "O2", _CLANG_O2_X4_SPILL),
        ("clang-cl", "Ob1", _CLANG_CL_X4_SPILL),
        ("clang-cl", "Ob2", _CLANG_CL_X4_SPILL),
    ),
}
#: kernels whose main loop holds fewer registers per state word than lanes * 16 bytes / the
#: ISA's register width (the default): the ones that run the loop on part of the state
STATE_REGS = {
    # two lanes at a time (aegis128x4_armcrypto_halves.h): the loop holds half the state
    "aegis128x4_armcrypto": 2,
    # one register of the state per pass (AEGIS_SPLIT), as AEGIS-128X2: 6 state registers
    "aegis256x2_aesni": 1,
    "aegis256x4_aesni": 1,
    # two lanes at a time (AEGIS_SPLIT with a register pair): the loop holds half the state
    "aegis256x4_armcrypto": 2,
}
#: kernel column of the variant table -> (arch, vector registers, register bytes)
ISAS = {
    "aesni": ("x86_64", 16, 16),
    "avx2": ("x86_64", 16, 32),
    "avx512": ("x86_64", 32, 64),
    "batch_avx512": ("x86_64", 32, 64),
    "armcrypto": ("aarch64", 32, 16),
}
#: state words of each family (the table's family column)
FAMILY_WORDS = {128: 8, 256: 6}


def _kernels() -> tuple[Kernel, ...]:
    """Every vector kernel of the variant table (native/include/sealstore_variants.h)."""
    out = []
    for row in build_ffi.read_variants():
        d = row["dir"]
        for isa, (arch, regfile, width) in ISAS.items():
            if not row[isa]:
                continue
            stem = f"{d}_{isa}"
            symbols = (
                (f"sealstore_{d}_encrypt4_avx512", f"sealstore_{d}_decrypt4_avx512")
                if isa == "batch_avx512"
                else ENC_DEC
            )
            regs = STATE_REGS.get(stem, max(1, row["lanes"] * 16 // width))
            words = FAMILY_WORDS[row["family"]]
            out.append(
                Kernel(arch, f"{d}/{stem}.c", symbols, regs, regfile, KNOWN.get(stem, ()), words)
            )
    names = {k.name for k in out}
    stale = (set(KNOWN) | set(STATE_REGS)) - names
    if stale:
        raise RuntimeError(f"inline guard: entries for kernels the table lacks: {sorted(stale)}")
    return tuple(out)


KERNELS = _kernels()

AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"
#: arch -> (compiler label, command prefix), and the objdump that reads its objects
COMPILERS = {
    "x86_64": [("gcc", ["gcc"]), ("clang", ["clang"])],
    "aarch64": [
        ("gcc", ["aarch64-linux-gnu-gcc"]),
        (
            "clang",
            [
                "clang",
                "--target=aarch64-linux-gnu",
                f"--sysroot={AARCH64_SYSROOT}",
                f"-isystem{AARCH64_SYSROOT}/include",
            ],
        ),
    ],
}
OBJDUMP = {"x86_64": "objdump", "aarch64": "aarch64-linux-gnu-objdump"}
#: the project's flags (native/build_ffi.py) and plain -O2
FLAGS = {"project": ["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"], "O2": ["-O2"]}

#: --msvc: MSVC's semantics through clang in cl mode (see the module docstring)
MSVC_SHIM = ROOT / "tools" / "msvc_shim"
MSVC_COMPILERS = [
    (
        "clang-cl",
        [
            "clang",
            "--driver-mode=cl",
            "--target=x86_64-pc-windows-msvc",
            "/U__clang__",
            "/Zl",
            "-imsvc",
            str(MSVC_SHIM),
        ],
    )
]
MSVC_FLAGS = {"Ob1": ["/O2", "/Ob1"], "Ob2": ["/O2", "/Ob2"]}
MSVC_OBJDUMP = "llvm-objdump"
_TARGET_DEFINE = re.compile(r'^#define SEALSTORE_TARGET "([^"]+)"', re.M)


def target_mflags(source: Path) -> list[str]:
    """The -m flags of a kernel file's own SEALSTORE_TARGET (MSVC mode)."""
    m = _TARGET_DEFINE.search(source.read_text())
    if m is None:
        raise RuntimeError(f"{source}: no SEALSTORE_TARGET")
    return [f"-m{feature}" for feature in m.group(1).split(",")]


def check_object(kernel: Kernel, text: str) -> tuple[list[str], list[str], str]:
    """(failures, unexcused, one-line summary) for the disassembly of one build of ``kernel``.
    ``unexcused`` are the failures no KNOWN entry covers: a missing function, an update not
    inlined, a call in the loop (what the guard exists for; a known entry explains a spill or
    a rolled loop, never those)."""
    funcs = disasm.parse(text)
    failures, unexcused, notes = [], [], []
    for sym in kernel.symbols:
        found = disasm.functions(funcs, sym)
        if not found:
            unexcused.append(f"{sym}: not in the object")
            continue
        loop = disasm.main_loop(found)
        need = kernel.words * kernel.state_regs
        if loop is None:
            unexcused.append(f"{sym}: no loop holds an AES round (the update is not inlined)")
            continue
        aes = loop.count(lambda i: i.is_aes)
        calls = [i.args or i.op for i in loop.insns if i.is_call]
        stack = loop.count(lambda i: i.is_stack_vector)
        if aes < need:
            failures.append(f"{sym}: the main loop holds {aes} AES rounds, < one update ({need})")
        if calls:
            unexcused.append(f"{sym}: the main loop calls {', '.join(sorted(set(calls)))}")
        if stack and kernel.must_fit:
            failures.append(f"{sym}: the main loop moves vectors to/from the stack {stack} times")
        what = "decrypt" if "decrypt" in sym else "encrypt"
        notes.append(f"{what}: {aes} aes, {stack} stack")
    return failures, unexcused, "; ".join(notes)


def _build(
    n: int, kernel: Kernel, label: str, cc: list[str], flags: list[str], extra: list[str], tmp: str
):
    obj = os.path.join(tmp, f"{n}-{kernel.name}.o")
    src = SRC / kernel.source
    if label == "cl":
        # MSVC itself (--cl, on a Windows runner): its headers declare every intrinsic, no -m
        cmd = [*cc, "/nologo", "/c", *flags, *extra, f"/I{INCLUDE}", f"/Fo{obj}", str(src)]
        objdump = MSVC_OBJDUMP
    elif label == "clang-cl":
        # cl syntax; "--" ends the options (an absolute path would read as /option)
        mflags = target_mflags(src)
        cmd = [*cc, "/c", *flags, *mflags, *extra, f"/I{INCLUDE}", f"/Fo{obj}", "--", str(src)]
        objdump = MSVC_OBJDUMP
    else:
        cmd = [*cc, "-c", *flags, *extra, f"-I{INCLUDE}", str(src), "-o", obj]
        objdump = OBJDUMP[kernel.arch]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{shlex.join(cmd)}\n{r.stderr[-2000:]}")
    d = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", obj],
        capture_output=True,
        text=True,
        check=True,
    )
    return d.stdout


def builds(
    arch: str | None, only: str | None, allow_missing: bool, msvc: bool = False, cl: str = ""
):
    """(kernel, compiler label, command, flags label, flags) for every build to check; ``cl``
    (with ``msvc``): MSVC's own compiler command instead of clang in cl mode."""
    out, missing = [], []
    for kernel in KERNELS:
        if (arch and kernel.arch != arch) or (only and only != kernel.name):
            continue
        if msvc and kernel.arch != "x86_64":
            continue
        compilers = COMPILERS[kernel.arch]
        if msvc:
            compilers = [("cl", shlex.split(cl))] if cl else MSVC_COMPILERS
        all_flags = MSVC_FLAGS if msvc else FLAGS
        for label, cc in compilers:
            tools = [cc[0], MSVC_OBJDUMP if msvc else OBJDUMP[kernel.arch]]
            absent = [t for t in tools if shutil.which(t) is None]
            if label == "clang" and kernel.arch == "aarch64" and not Path(AARCH64_SYSROOT).is_dir():
                absent.append(AARCH64_SYSROOT)
            if absent:
                missing.append(f"{kernel.name} ({label}): missing {', '.join(absent)}")
                continue
            for flags_label, flags in all_flags.items():
                out.append((kernel, label, cc, flags_label, flags))
    if missing and not allow_missing:
        raise FileNotFoundError("\n".join(missing))
    return out, missing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=sorted(COMPILERS))
    ap.add_argument(
        "--msvc", action="store_true", help="the x86 kernels as MSVC builds them, /Ob1 and /Ob2"
    )
    ap.add_argument(
        "--cl",
        default="",
        help="with --msvc: MSVC's compiler command (e.g. cl, in a Native Tools prompt) instead of "
        "clang in cl mode; needs llvm-objdump",
    )
    ap.add_argument("--only", help="one kernel, by its file name (e.g. aegis128l_aesni)")
    ap.add_argument("--cflags", default="", help="extra compiler flags for every build")
    ap.add_argument("--allow-missing", action="store_true", help="skip absent toolchains")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per build")
    opts = ap.parse_args(argv)
    if opts.cl and not opts.msvc:
        ap.error("--cl needs --msvc")
    t0 = time.monotonic()
    try:
        todo, missing = builds(opts.arch, opts.only, opts.allow_missing, opts.msvc, opts.cl)
    except FileNotFoundError as e:
        print(f"inline guard: cannot build:\n{e}", file=sys.stderr)
        return 2
    if not todo:
        print("inline guard: nothing to check", file=sys.stderr)
        return 2
    extra = shlex.split(opts.cflags)
    try:
        with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            texts = list(
                pool.map(
                    lambda nb: _build(nb[0], nb[1][0], nb[1][1], nb[1][2], nb[1][4], extra, tmp),
                    enumerate(todo),
                )
            )
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"FAIL inline guard: a build failed:\n{e}", file=sys.stderr)
        return 1
    bad = known = 0
    for (kernel, label, _, flags_label, _), text in zip(todo, texts, strict=True):
        failures, unexcused, summary = check_object(kernel, text)
        where = f"{kernel.arch}{'-msvc' if opts.msvc else ''} {kernel.name} {label} {flags_label}"
        reason = {(c, f): r for c, f, r in kernel.known}.get((label, flags_label))
        if unexcused:
            bad += 1
            known_note = f" (not covered by its known entry: {reason})" if reason else ""
            print(f"FAIL {where}: " + "; ".join(unexcused + failures) + known_note)
        elif failures and reason:
            known += 1
            print(f"KNOWN {where}: {reason}: " + "; ".join(failures))
        elif failures:
            bad += 1
            print(f"FAIL {where}: " + "; ".join(failures))
        elif reason:
            bad += 1
            print(f"FAIL {where}: passes now; remove its known entry ({reason})")
        elif opts.verbose:
            spill = "" if kernel.must_fit else " (state exceeds the register file: spills allowed)"
            print(f"ok   {where}: {summary}{spill}")
    for m in missing:
        print(f"skipped {m}")
    print(
        f"inline guard: {len(todo)} builds, {bad} failing, {known} known, {len(missing)} skipped "
        f"({time.monotonic() - t0:.1f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
