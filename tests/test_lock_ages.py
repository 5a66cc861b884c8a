"""Which lock waiters get an age (``probes.thread_ages.with_lock_ages``): a few a process, the
waiters of a shared futex word first, then lone waiters - never every parked thread."""

from __future__ import annotations

from pathlib import Path
from typing import List

from diag.model import ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.sched_clock import SchedClock
from diag.probes.thread_ages import MAX_AGES_PER_WORD, MAX_LOCK_AGES, with_lock_ages

PID = 4242
NOW_MS = 100_000.0


class _Fixed(SchedClock):
    """Now, on every CPU: the recorded tree's."""

    def __init__(self) -> None:
        pass

    def now_ms(self, cpu: object = None) -> float:
        return NOW_MS


def _waiter(tid: int, word: str) -> ThreadSample:
    return ThreadSample(
        tid=tid, name="t", state="S", syscall="futex", futex_addr=word, futex_op=0x80,
        wait_timed=False,
    )  # fmt: skip


def _tree(root: Path, threads: List[ThreadSample]) -> ProcFS:
    for t in threads:  # each thread last ran (tid) seconds ago
        task = root / str(PID) / "task" / str(t.tid)
        task.mkdir(parents=True)
        (task / "sched").write_text(f"t ({t.tid})\n---\nse.exec_start : {NOW_MS - t.tid * 1000}\n")
    return ProcFS(root)


def test_shared_words_first_then_lone_waiters_within_the_cap(tmp_path: Path) -> None:
    lone = [_waiter(tid, hex(0x1000 + tid)) for tid in range(1, 7)]  # 6 threads, a word each
    shared = [_waiter(tid, "0x9000") for tid in (20, 21, 22)]  # 3 threads on one lock
    threads = lone + shared
    out = with_lock_ages(_tree(tmp_path, threads), PID, threads, _Fixed())
    aged = {t.tid: t.off_cpu_s for t in out if t.off_cpu_s is not None}
    assert len(aged) == MAX_LOCK_AGES
    assert sum(tid >= 20 for tid in aged) == MAX_AGES_PER_WORD  # the shared word's, first
    assert aged[20] == 20.0  # the age is the time off the CPU
    assert {1, 2} <= set(aged)  # then the first lone waiters, in order
    assert [t.tid for t in out] == [t.tid for t in threads]  # order and records kept


def test_no_waiters_no_reads(tmp_path: Path) -> None:
    running = [ThreadSample(tid=1, name="t", state="R", syscall="running")]
    assert with_lock_ages(ProcFS(tmp_path), PID, running, _Fixed()) == running
