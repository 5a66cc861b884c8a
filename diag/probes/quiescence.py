"""Whether any thread of a process ran since its stacks were last read: if none did, its stacks
did not change, and the dump can be reused instead of reading again.

A thread that moves its Python stack must be scheduled; being scheduled shows in /proc as CPU
ticks, or (for runs shorter than a tick) as a context switch when it blocks again or is
preempted. So per thread (state, utime, stime, voluntary and nonvoluntary context switches),
read for every thread of the process, is a fingerprint of "nothing ran". The stuck job diag
exists for - every thread parked in a futex - keeps the same fingerprint for hours, and each
``diag watch`` sample of it then costs a few /proc reads instead of one stack read per rank.

Soundness rules, enforced by the caller (``diag.collect.process_work``):
- the counters are read right before the dump (or taken from the /proc read of the threads
  that the same worker made just before it: ``counters_of``) and kept with the dump;
- no thread may be running (state R) then: a thread on a CPU has no settled stack;
- a later sample reuses the dump only when its counters equal those: counters only grow, so
  equality means no thread ran from before the dump until now - during the dump included (a
  blocking py-spy stops the threads, which changes the counts: its dumps are never reused).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from diag.model import ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_ctxt_switches, parse_task_stat

ThreadCounters = Tuple[int, str, int, int, Optional[int], Optional[int]]
Fingerprint = Tuple[ThreadCounters, ...]


def read_counters(procfs: ProcFS, pid: int) -> Optional[Fingerprint]:
    """Every thread's run counters (running ones included), or None when any is unreadable."""
    out = []
    tids = procfs.tids(pid)
    if not tids:
        return None
    for tid in tids:
        try:
            stat = parse_task_stat(procfs.read_task_text(pid, tid, "stat"))
            voluntary, involuntary = parse_ctxt_switches(procfs.read_task_text(pid, tid, "status"))
        except (OSError, ValueError, IndexError):
            return None
        if voluntary is None or involuntary is None:
            return None
        out.append((tid, stat.state, stat.utime_ticks, stat.stime_ticks, voluntary, involuntary))
    return tuple(out)


def quiet(counters: Optional[Fingerprint]) -> Optional[Fingerprint]:
    """The counters as a fingerprint, or None when a thread is running (no settled stack)."""
    if counters is None or any(c[1] == "R" for c in counters):
        return None
    return counters


def counters_of(threads: Sequence[ThreadSample]) -> Optional[Fingerprint]:
    """The counters a /proc read of the threads already holds (the same fields, tid order)."""
    out = []
    for t in sorted(threads, key=lambda t: t.tid):
        voluntary, involuntary = t.voluntary_ctxt_switches, t.nonvoluntary_ctxt_switches
        if t.state == "?" or voluntary is None or involuntary is None:
            return None
        out.append((t.tid, t.state, t.utime_ticks, t.stime_ticks, voluntary, involuntary))
    return tuple(out) or None
