"""Whether any thread of a process ran since py-spy last read it: if none did, its stacks did not
change, and the dump can be reused instead of paying py-spy again.

A thread that moves its Python stack must be scheduled; being scheduled shows in /proc as CPU
ticks, or (for runs shorter than a tick) as a context switch when it blocks again or is
preempted. So per thread (state, utime, stime, voluntary and nonvoluntary context switches),
read for every thread of the process, is a fingerprint of "nothing ran". The stuck job diag
exists for - every thread parked in a futex - keeps the same fingerprint for hours, and each
``diag watch`` sample of it then costs a few /proc reads instead of one py-spy run per rank.

Soundness rules, enforced by the caller (``diag.sampler``):
- the fingerprint is read right before and right after the dump, and the dump is kept for reuse
  only when the two are equal: nothing ran while py-spy read memory (a blocking py-spy stops the
  threads, which changes the counts, so blocking dumps are never reused);
- no thread may be running (state R): a thread on a CPU right now has no settled stack;
- a later sample reuses the dump only when its fingerprint equals the one taken after it.
"""

from __future__ import annotations

from typing import Optional, Tuple

from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_ctxt_switches, parse_task_stat

ThreadCounters = Tuple[int, str, int, int, Optional[int], Optional[int]]
Fingerprint = Tuple[ThreadCounters, ...]


def read_fingerprint(procfs: ProcFS, pid: int) -> Optional[Fingerprint]:
    """Every thread's run counters, or None when any is unreadable or a thread is running."""
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
        if stat.state == "R" or voluntary is None or involuntary is None:
            return None
        out.append((tid, stat.state, stat.utime_ticks, stat.stime_ticks, voluntary, involuntary))
    return tuple(out)
