"""How long a thread has been off the CPU - the age of its wait, from the kernel at the first
sample (issue #33) - and which threads get one: the main thread's and a timed wait's
(``read_thread``), and a few lock waiters' a process (``with_lock_ages``): one more read for
every parked thread of a big server was too dear."""

from __future__ import annotations

from typing import Dict, List, Optional

import msgspec

from diag.model import ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.sched_clock import SchedClock, parse_exec_start_ms


def _cpu_of(stat: Optional[str]) -> Optional[int]:
    """Field 39 of a stat line: the CPU the thread last ran on (whose clock stamped it)."""
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()
    return int(fields[36]) if len(fields) > 36 and fields[36].isdigit() else None


def off_cpu_s(
    procfs: ProcFS,
    pid: int,
    tid: int,
    state: str,
    clock: Optional[SchedClock],
    stat: Optional[str] = None,
) -> Optional[float]:
    """How long the thread has been off the CPU (0 when it runs): the wait's age from the
    kernel, known at the first sample however short the capture (issue #33), against the
    clock of the CPU it last ran on (``sched_clock``; ``stat`` read here when not given)."""
    if clock is None:
        return None
    if state == "R":
        return 0.0
    names = ("sched",) if stat is not None else ("sched", "stat")
    texts = procfs.read_task_texts(pid, tid, names)
    start_ms = parse_exec_start_ms(texts[0]) if texts[0] is not None else None
    if start_ms is None:
        return None
    now_ms = clock.now_ms(_cpu_of(stat if stat is not None else texts[1]))
    if now_ms is None:
        return None
    return round(max(0.0, now_ms - start_ms) / 1000.0, 3)


# At most this many lock waiters' ages read per process and sample (one more read each), and
# this many per futex word: any waiter's time off the CPU is a floor of how long the lock has
# been held, so a few per word keep the floor near the longest wait - where reading every
# waiter of a 300-thread process's one Event took the first sample from 1.45x to 1.62x raw
# py-spy (bench.run --only snapshot, 8 ranks x 300 threads); the first sample's 8-rank row
# sat at the target's edge with 16.
MAX_LOCK_AGES = 4
MAX_AGES_PER_WORD = 2


def _lock_waiter(t: ThreadSample) -> bool:
    """Blocked untimed on a private futex (a lock, queue or event of its process)."""
    return (
        t.syscall == "futex"
        and t.wait_timed is False
        and t.off_cpu_s is None
        and t.futex_addr is not None
        and t.futex_op is not None
        and bool(t.futex_op & 0x80)
    )


def with_lock_ages(
    procfs: ProcFS, pid: int, threads: List[ThreadSample], clock: Optional[SchedClock]
) -> List[ThreadSample]:
    """The age of a few threads that wait untimed on a private futex word - first those whose
    word two or more wait on at once (a lock's waiters: a pile-up, a lock held through a timer
    loop), then lone waiters (one client blocked on a server's lock): how long a lock has been
    held is the time its longest waiter has been off the CPU (issue #33). At most
    ``MAX_LOCK_AGES`` a process: one read per thread of a big server was too dear
    (``read_thread``)."""
    if clock is None:
        return threads
    count: Dict[str, int] = {}
    for t in threads:
        if _lock_waiter(t) and t.futex_addr is not None:
            count[t.futex_addr] = count.get(t.futex_addr, 0) + 1
    if not count:
        return threads
    read: Dict[str, int] = {}
    chosen: List[int] = []
    for shared in (True, False):
        for i, t in enumerate(threads):
            word = t.futex_addr or ""
            if (
                len(chosen) < MAX_LOCK_AGES
                and _lock_waiter(t)
                and (count.get(word, 0) >= 2) == shared
                and read.get(word, 0) < MAX_AGES_PER_WORD
            ):
                read[word] = read.get(word, 0) + 1
                chosen.append(i)
    out = list(threads)
    for i in chosen:
        t = out[i]
        age = off_cpu_s(procfs, pid, t.tid, t.state, clock)
        out[i] = msgspec.structs.replace(t, off_cpu_s=age) if age is not None else t
    return out
