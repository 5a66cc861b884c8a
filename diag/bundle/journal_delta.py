"""Thread records a journal line leaves out because they did not change since the last line.

A day-long ``diag watch`` of a stuck or idle job - the case it exists for - sees the same
thread records every 30 s: same state, ticks, wait channel and stack. Written in full, 8 ranks x
60 threads cost ~250 MB a day of ``PATH.jsonl``. Each sample line therefore carries only the
thread records that differ from the previous line's record of the same (host, pid, tid), plus
the tids that are unchanged; the reader puts them back. Both sides keep just the previous
sample's records, so memory stays bounded, and the journal stays plain JSON lines (jq works).

Order: the collector lists a process's threads by ascending tid, then the placeholders for
Python threads /proc did not list (negative tids). A process whose threads are in any other
order is written in full, so a rebuilt sample is always identical to the one written.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import msgspec

from diag.model import ProcessSample, Sample, ThreadSample

_Key = Tuple[str, int]


class Unchanged(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The tids of one process whose records equal the previous line's."""

    pid: int
    host: str = ""
    tids: Tuple[int, ...] = ()


def _canonical(tid: int) -> Tuple[bool, int]:
    return (tid < 0, tid)


def _in_canonical_order(threads: Tuple[ThreadSample, ...]) -> bool:
    keys = [_canonical(t.tid) for t in threads]
    return all(a < b for a, b in zip(keys, keys[1:]))


class DeltaState:
    """The previous sample's thread records per process; one instance per journal."""

    def __init__(self) -> None:
        self._prev: Dict[_Key, Dict[int, ThreadSample]] = {}
        self._pending: Dict[_Key, Dict[int, ThreadSample]] = {}

    def encode(self, sample: Sample) -> Tuple[Sample, Tuple[Unchanged, ...]]:
        """The sample with unchanged thread records removed, and which tids they were.

        Call ``commit()`` once the line is safely written: a line lost to a full disk must not
        become the base the next line refers to."""
        processes: List[ProcessSample] = []
        unchanged: List[Unchanged] = []
        current: Dict[_Key, Dict[int, ThreadSample]] = {}
        for proc in sample.processes:
            key = (proc.host, proc.pid)
            current[key] = {t.tid: t for t in proc.threads}
            prev = self._prev.get(key)
            if not prev or not _in_canonical_order(proc.threads):
                processes.append(proc)
                continue
            same = tuple(t.tid for t in proc.threads if prev.get(t.tid) == t)
            if not same:
                processes.append(proc)
                continue
            same_set = set(same)
            changed = tuple(t for t in proc.threads if t.tid not in same_set)
            processes.append(msgspec.structs.replace(proc, threads=changed))
            unchanged.append(Unchanged(pid=proc.pid, host=proc.host, tids=same))
        self._pending = current
        return msgspec.structs.replace(sample, processes=tuple(processes)), tuple(unchanged)

    def commit(self) -> None:
        self._prev = self._pending

    def decode(self, sample: Sample, unchanged: Tuple[Unchanged, ...]) -> Sample:
        """The full sample: the written records plus the unchanged ones from the last line."""
        same = {(u.host, u.pid): u.tids for u in unchanged}
        processes: List[ProcessSample] = []
        current: Dict[_Key, Dict[int, ThreadSample]] = {}
        for proc in sample.processes:
            key = (proc.host, proc.pid)
            tids = same.get(key)
            if tids:
                prev = self._prev.get(key, {})
                merged = list(proc.threads) + [prev[tid] for tid in tids if tid in prev]
                merged.sort(key=lambda t: _canonical(t.tid))
                proc = msgspec.structs.replace(proc, threads=tuple(merged))
            current[key] = {t.tid: t for t in proc.threads}
            processes.append(proc)
        self._prev = current
        return msgspec.structs.replace(sample, processes=tuple(processes))
