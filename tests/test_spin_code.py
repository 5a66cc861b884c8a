"""A spin-wait told by its code (diag.probes.spin_code): a loop of a few bytes holding the CPU's
spin-wait hint waits for memory another party writes; a tight compute loop, PCs spread over
an interpreter, or unreadable memory are not read as one. Real bytes: the x86 loop is gcc -O2's
``while (*flag != expect) { spins++; pause; }`` (native_spin_dead_peer's ``wait_flag``)."""

from __future__ import annotations

from typing import Dict, List

from diag.probes.spin_code import CODE_MAX_BYTES, ReadCode, spin_hint

BASE = 0x7F0000001100
# mov (%rdi),%rax; cmp %rax,%rsi; mov $0,%eax; je +0x13; nopl (%rax)
# .L: add $1,%rax; pause; mov (%rdi),%rdx; cmp %rsi,%rdx; jne .L; ret
WAIT_FLAG = bytes.fromhex(
    "488b07" "4839c6" "b800000000" "7413" "0f1f00" "4883c001" "f390" "488b17" "4839f2" "75f2" "c3"
)  # fmt: skip
LOOP = [BASE + 0x10, BASE + 0x14, BASE + 0x16, BASE + 0x19, BASE + 0x1C]
# The same loop computing: add (%rdi,%rax,8),%rdx; add $1,%rax; cmp %rax,%rsi; jne .L
SUM = bytes.fromhex("480314c7" "4883c001" "4839c6" "75f3" "c3")  # fmt: skip
# aarch64: .L: ldr x2,[x0]; cmp x2,x1; b.eq +16; yield; b .L
ARM = bytes.fromhex("020040f9" "5f0001eb" "80000054" "3f2003d5" "fcffff17")  # fmt: skip


def _memory(code: bytes, at: int, reads: List[int]) -> ReadCode:
    image: Dict[int, int] = {at + i: b for i, b in enumerate(code)}

    def read(addr: int, size: int) -> bytes:
        reads.append(size)
        return bytes(image.get(addr + i, 0xCC) for i in range(size))

    return read


def test_a_pause_loop_is_a_spin_wait_read_in_one_bounded_read() -> None:
    reads: List[int] = []
    read = _memory(WAIT_FLAG, BASE, reads)
    assert spin_hint(LOOP * 4, read, "x86_64") == "pause"
    assert len(reads) == 1 and reads[0] <= CODE_MAX_BYTES
    assert spin_hint([BASE + 0x16] * 3, read, "x86_64") == "pause"
    assert spin_hint([BASE + 0x16], read, "x86_64") is None  # one PC: where, not a loop


def test_a_tight_compute_loop_is_no_spin_wait() -> None:
    read = _memory(SUM, BASE, [])
    pcs = [BASE, BASE + 4, BASE + 8, BASE + 11]
    assert spin_hint(pcs * 5, read, "x86_64") is None


def test_pcs_that_spread_or_memory_that_cannot_be_read_say_nothing() -> None:
    reads: List[int] = []
    read = _memory(WAIT_FLAG, BASE, reads)
    spread = [BASE + 0x10, BASE + 0x400, BASE + 0x900, BASE + 0x2000]
    assert spin_hint(spread, read, "x86_64") is None
    assert reads == []  # no read at all for an interpreter's spread PCs
    assert spin_hint(LOOP, lambda _a, _n: b"", "x86_64") is None
    assert spin_hint(LOOP, read, "riscv64") is None
    assert spin_hint([], read, "x86_64") is None


def test_a_yield_loop_on_aarch64_is_a_spin_wait() -> None:
    read = _memory(ARM, BASE, [])
    pcs = [BASE, BASE + 4, BASE + 8, BASE + 12, BASE + 16]
    assert spin_hint(pcs, read, "aarch64") == "yield"
    no_hint = ARM[:12] + bytes.fromhex("1f2003d5") + ARM[16:]  # nop in its place
    assert spin_hint(pcs, _memory(no_hint, BASE, []), "aarch64") is None
