"""Whether a running thread's PCs sit in a spin-wait loop: the code itself says it waits.

A thread burning a core in native code is computing, unless what it runs is a wait: a loop a
few bytes long that re-reads memory and executes the CPU's spin-wait hint - x86's ``PAUSE``
(``f3 90``), aarch64's ``YIELD``, ``WFE`` or ``ISB`` (Rust's ``spin_loop``) - until another
party writes the word it polls. Compilers emit that hint only for busy-waits (``_mm_pause``,
``cpu_relax``, ``std::hint::spin_loop``): a communication library's receive, a spin lock, a
flag in shared memory. So the code tells the wait apart from work without knowing the
library (the packs' ``NativeProgress`` name the engines whose loops are larger: calls into a
progress function).

Bounded and cheap: only when the thread's PCs cluster within ``LOOP_MAX_BYTES`` (an
interpreter or a real kernel spreads them wider), one read of at most ``CODE_MAX_BYTES`` of
its memory around them. The read goes through the caller's function, failing alone (b"").
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from diag.model import SpinHint

LOOP_MAX_BYTES = 32  # a wait loop: load, compare, branch, the hint, a counter
CLUSTER_SHARE = 0.75  # of a thread's PCs, at least this many within one loop's span
# PCs a thread needs for its loop to count: one PC (a thread caught once off its CPU) says
# where it was, not that it stays there.
MIN_PCS = 3
CODE_MAX_BYTES = 2 * LOOP_MAX_BYTES + 8

ReadCode = Callable[[int, int], bytes]  # (address, size) -> bytes, b"" when unreadable

_X86_PAUSE = b"\xf3\x90"
_ARM_HINTS: Tuple[Tuple[int, SpinHint], ...] = (
    (0xD503203F, "yield"),
    (0xD503205F, "wfe"),
    (0xD5033FDF, "isb"),
)


def _cluster(pcs: Sequence[int]) -> Optional[Tuple[int, int]]:
    """(lowest, highest) PC of the loop most PCs fell in, or None when they spread wider."""
    if len(pcs) < MIN_PCS:
        return None
    mode = Counter(pcs).most_common(1)[0][0]
    inside = [pc for pc in pcs if abs(pc - mode) <= LOOP_MAX_BYTES]
    if len(inside) < CLUSTER_SHARE * len(pcs):
        return None
    lo, hi = min(inside), max(inside)
    return (lo, hi) if hi - lo <= LOOP_MAX_BYTES else None


def _x86_back_branches(code: bytes, base: int) -> Iterator[Tuple[int, int]]:
    """(target, end) of each backward jump a byte offset could start: ``jcc``/``jmp`` rel8,
    ``jcc`` rel32 (``0f 8x``), ``jmp`` rel32 (``e9``). Not decoded: a byte inside another
    instruction may read as one, which the caller's other conditions (the PCs inside, the hint
    inside) make harmless."""
    for i, op in enumerate(code):
        if (0x70 <= op <= 0x7F or op == 0xEB) and i + 2 <= len(code):
            rel, end = int.from_bytes(code[i + 1 : i + 2], "little", signed=True), i + 2
        elif op == 0x0F and i + 6 <= len(code) and 0x80 <= code[i + 1] <= 0x8F:
            rel, end = int.from_bytes(code[i + 2 : i + 6], "little", signed=True), i + 6
        elif op == 0xE9 and i + 5 <= len(code):
            rel, end = int.from_bytes(code[i + 1 : i + 5], "little", signed=True), i + 5
        else:
            continue
        if rel < 0:
            yield base + end + rel, base + end


def _arm_back_branches(code: bytes, base: int) -> Iterator[Tuple[int, int]]:
    """(target, end) of each backward ``B``, ``B.cond``, ``CBZ``/``CBNZ``, ``TBZ``/``TBNZ``."""
    start = (-base) % 4
    for i in range(start, len(code) - 3, 4):
        insn = int.from_bytes(code[i : i + 4], "little")
        if (insn & 0xFC000000) == 0x14000000:
            imm, bits = insn & 0x3FFFFFF, 26
        elif (insn & 0xFF000010) == 0x54000000 or (insn & 0x7E000000) == 0x34000000:
            imm, bits = (insn >> 5) & 0x7FFFF, 19
        elif (insn & 0x7E000000) == 0x36000000:
            imm, bits = (insn >> 5) & 0x3FFF, 14
        else:
            continue
        rel = (imm - (1 << bits) if imm >> (bits - 1) else imm) * 4
        if rel < 0:
            yield base + i + rel, base + i + 4


def _hint_in(code: bytes, base: int, lo: int, hi: int, machine: str) -> Optional[SpinHint]:
    if machine == "aarch64":
        words: List[Tuple[int, int]] = [
            (base + i, int.from_bytes(code[i : i + 4], "little"))
            for i in range((-base) % 4, len(code) - 3, 4)
        ]
        for addr, insn in words:
            for value, name in _ARM_HINTS:
                if insn == value and lo <= addr < hi:
                    return name
        return None
    at = code.find(_X86_PAUSE, max(0, lo - base))
    return "pause" if at >= 0 and base + at + 2 <= hi else None


def spin_hint(pcs: Sequence[int], read: ReadCode, machine: str) -> Optional[SpinHint]:
    """The spin-wait hint of the loop ``pcs`` sit in - a backward branch at most
    ``LOOP_MAX_BYTES`` long whose body holds every clustered PC and the hint - or None
    (fewer than ``MIN_PCS``, PCs spread out, no such loop, memory unreadable, an architecture
    not known here)."""
    if machine not in ("x86_64", "aarch64"):
        return None
    found = _cluster(pcs)
    if found is None:
        return None
    lo, hi = found
    base = max(0, hi - LOOP_MAX_BYTES)
    code = read(base, min(CODE_MAX_BYTES, lo + LOOP_MAX_BYTES + 8 - base))
    if not code:
        return None
    branches = _arm_back_branches if machine == "aarch64" else _x86_back_branches
    for target, end in branches(code, base):
        if target <= lo and hi < end and end - target <= LOOP_MAX_BYTES:
            hint = _hint_in(code, base, target, end, machine)
            if hint is not None:
                return hint
    return None
