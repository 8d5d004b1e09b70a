"""The loops of compiled kernels, read from ``objdump -d --no-show-raw-insn`` output (x86-64 AT&T
syntax or aarch64; GNU objdump, or llvm-objdump, which reads COFF objects too): functions, their
control-flow graph, natural loops, and what the hottest loop holds.  Used by
``sealstore.bench.inner_loop`` (the aarch64 instruction mix) and by ``tools/inline_guard.py``
(calls and stack traffic in the main loop).

The *main loop* of a set of functions is the innermost natural loop (the target of a back
edge, which dominates its source, and every block that reaches the source without passing the
target) that writes output and holds the most AES round instructions: the message loop of an
AEGIS kernel.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Insn", "Loop", "functions", "main_loop", "natural_loops", "parse"]

_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
# branch targets: GNU "4f <f+0x4f>", llvm-objdump "0x4f <f+0x4f>"
_TARGET = re.compile(r"\b(?:0x)?([0-9a-f]+) <([^>]+)>")
_COMMENT = re.compile(r"\s#\s.*$")

# aarch64 conditional/unconditional direct branches; x86 jumps
_A64_COND = re.compile(r"^(b\.[a-z]+|cbn?z|tbn?z)$")
_AES = {"aese", "aesenc", "vaesenc"}
_CALL = {"bl", "blr", "call", "callq"}
_RET = {"ret", "retq", "retaa", "retab"}
_X86_VEC = re.compile(r"%[xyz]mm\d+")
_X86_SP = re.compile(r"\(%(rsp|esp)[,)]")
_X86_FP = re.compile(r"\(%(rbp|ebp)[,)]")
_A64_VEC = re.compile(r"\b[qv]\d+\b")
_A64_SP = re.compile(r"\[sp\b")
_A64_FP = re.compile(r"\[x29\b")
# the frame pointer is a stack address only where the function sets it up (gcc -O2 may use
# rbp as an ordinary register, e.g. for a message pointer); llvm-objdump writes "movq %rsp, %rbp",
# and the Windows x64 prologue sets rbp inside the frame ("leaq 128(%rsp), %rbp")
_FRAME_SETUP = re.compile(
    r"^(movq?\s+%rsp,\s*%rbp"
    r"|leaq?\s+-?(0x)?[0-9a-f]*\(%rsp\),\s*%rbp"
    r"|mov\s+x29, sp|add\s+x29, sp\b)"
)


@dataclass
class Insn:
    addr: int
    op: str
    args: str
    target: int | None = None  # a direct branch inside the same function
    frame: bool = False  # the function keeps a frame pointer (rbp / x29 point into the stack)

    def _on_stack(self) -> bool:
        if _X86_SP.search(self.args) or _A64_SP.search(self.args):
            return True
        return self.frame and bool(_X86_FP.search(self.args) or _A64_FP.search(self.args))

    @property
    def is_call(self) -> bool:
        return self.op in _CALL

    @property
    def is_aes(self) -> bool:
        return self.op in _AES

    @property
    def is_stack_vector(self) -> bool:
        """A vector register moved to or from the stack (a spill or a reload), or a vector op
        reading its operand there."""
        vector = _X86_VEC.search(self.args) or _A64_VEC.search(self.args)
        return bool(vector) and self._on_stack()

    @property
    def is_memory_store(self) -> bool:
        """A store to memory that is not the stack (the ciphertext or plaintext output)."""
        if self._on_stack():
            return False
        if self.op.startswith("st") and "[" in self.args:  # aarch64 str/stp/stur/st1
            return True
        return self.op.startswith(("mov", "vmov")) and self.args.endswith(")")  # AT&T: dst last


@dataclass
class Loop:
    """A natural loop: its head's address and the instructions of its body."""

    head: int
    insns: list[Insn] = field(default_factory=list)

    def count(self, pred: Callable[[Insn], bool]) -> int:
        """The loop's instructions that ``pred`` holds for."""
        return sum(1 for i in self.insns if pred(i))

    def mix(self) -> Counter[str]:
        """Instructions per mnemonic."""
        return Counter(i.op for i in self.insns)


def parse(text: str) -> dict[str, list[Insn]]:
    """Function name -> its instructions, from ``objdump -d --no-show-raw-insn`` output."""
    funcs: dict[str, list[Insn]] = {}
    cur = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = _INSN.match(line)
        if m is None or cur is None:
            continue
        # comments: aarch64 "// b.any", x86 "# 7 <f+0x7>" (aarch64 immediates are "#0x40")
        args = _COMMENT.sub("", m.group(3).split("//")[0])
        cur.append(Insn(int(m.group(1), 16), m.group(2), args.strip()))
    for body in funcs.values():
        frame = any(_FRAME_SETUP.match(f"{i.op} {i.args}") for i in body)
        for insn in body:
            insn.frame = frame
    return funcs


def functions(funcs: dict[str, list[Insn]], symbol: str) -> dict[str, list[Insn]]:
    """``symbol`` and the clones the compiler split off it (``symbol.part.0``, ``.isra``,
    ``.constprop``, ``.cold``)."""
    return {n: body for n, body in funcs.items() if n == symbol or n.startswith(symbol + ".")}


def _branch(insn: Insn, lo: int, hi: int) -> tuple[int | None, bool]:
    """(target inside [lo, hi) or None, whether execution can fall through)."""
    op = insn.op
    if (
        op in _RET
        or op in ("br", "ud2", "hlt", "brk")
        or (op.startswith("jmp") and "*" in insn.args)
    ):
        return None, False
    conditional = bool(_A64_COND.match(op)) or (op.startswith("j") and not op.startswith("jmp"))
    unconditional = op in ("b", "jmp", "jmpq")
    if not (conditional or unconditional):
        return None, True
    m = _TARGET.search(insn.args)
    target = int(m.group(1), 16) if m else None
    if target is not None and not lo <= target < hi:
        target = None  # a tail call or a jump to another function
    return target, conditional


def _blocks(body: list[Insn]):
    """Basic blocks (lists of instruction indexes) and their successor blocks."""
    lo, hi = body[0].addr, body[-1].addr + 1
    index = {i.addr: n for n, i in enumerate(body)}
    starts = {0}
    for n, insn in enumerate(body):
        target, falls = _branch(insn, lo, hi)
        insn.target = target
        if target is not None or not falls:
            starts.add(n + 1)
        if target is not None and target in index:
            starts.add(index[target])
    order = sorted(s for s in starts if s < len(body))
    block_of = {}
    blocks = []
    for b, s in enumerate(order):
        end = order[b + 1] if b + 1 < len(order) else len(body)
        blocks.append(list(range(s, end)))
        for n in range(s, end):
            block_of[n] = b
    succ: list[set[int]] = [set() for _ in blocks]
    for b, members in enumerate(blocks):
        last = body[members[-1]]
        target, falls = _branch(last, lo, hi)
        if target is not None and target in index:
            succ[b].add(block_of[index[target]])
        if falls and b + 1 < len(blocks):
            succ[b].add(b + 1)
    return blocks, succ


def _dominators(succ: list[set[int]]) -> list[set[int]]:
    n = len(succ)
    preds: list[set[int]] = [set() for _ in range(n)]
    for b, ss in enumerate(succ):
        for s in ss:
            preds[s].add(b)
    everything = set(range(n))
    dom = [everything.copy() for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in range(1, n):
            new = set.intersection(*(dom[p] for p in preds[b])) if preds[b] else set()
            new = new | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def natural_loops(body: list[Insn]) -> list[Loop]:
    """Every natural loop of one function, one per loop head (back edges to it merged)."""
    if not body:
        return []
    blocks, succ = _blocks(body)
    dom = _dominators(succ)
    preds: list[set[int]] = [set() for _ in blocks]
    for b, ss in enumerate(succ):
        for s in ss:
            preds[s].add(b)
    members: dict[int, set[int]] = {}
    for b, ss in enumerate(succ):
        for h in ss:
            if h in dom[b]:  # back edge b -> h
                loop = members.setdefault(h, {h})
                stack = [b]
                while stack:
                    x = stack.pop()
                    if x not in loop:
                        loop.add(x)
                        stack.extend(preds[x])
    loops = []
    for h, bs in members.items():
        insns = [body[n] for b in sorted(bs) for n in blocks[b]]
        loops.append(Loop(body[blocks[h][0]].addr, insns))
    return loops


def main_loop(funcs: dict[str, list[Insn]]) -> Loop | None:
    """The message loop among ``funcs``: of the loops that hold AES rounds and store to memory
    other than the stack (the output; the initialisation and finalisation loops store
    nothing), the innermost ones (a loop around another such loop, e.g. one over chunks, is
    not it), and of those the one with the most AES rounds, then the smallest.  Without such a
    loop, the loop with the most AES rounds; None if no loop has one."""
    loops = [lp for body in funcs.values() for lp in natural_loops(body)]
    with_aes = [lp for lp in loops if lp.count(lambda i: i.is_aes)]
    writing = [lp for lp in with_aes if lp.count(lambda i: i.is_memory_store)]
    inner = [
        lp
        for lp in writing
        if not any(o is not lp and o.head in {i.addr for i in lp.insns} for o in writing)
    ]
    pool = inner or with_aes
    if not pool:
        return None
    return max(pool, key=lambda lp: (lp.count(lambda i: i.is_aes), -len(lp.insns)))
