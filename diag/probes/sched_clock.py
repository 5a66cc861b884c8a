"""Now in each CPU's scheduler clock: how a thread's ``se.exec_start`` becomes an age.

Why per CPU: ``se.exec_start`` (``/proc/P/task/T/sched``) is stamped with the run queue's
``clock_task`` of the CPU the thread ran on, and that clock leaves out the CPU's IRQ and steal
time - so each CPU's runs behind ``CLOCK_MONOTONIC`` by its own amount, growing since boot.
Measured on this project's 2-vCPU VM after 7 hours: CPU 0's 20.9 s behind, CPU 1's 21.9 s - a
thread that last ran on CPU 1, aged with CPU 0's clock, read a second younger than it was (the
real test of timed waits failed on it about 1 run in 5). On a long-running server whose NIC
interrupts land on a few CPUs, the gap can be minutes. So the age of a thread is taken against
the clock of the CPU it last ran on (``processor``, field 39 of its stat line): diag's own thread
moves to that CPU for a moment (``sched_setaffinity``: diag's thread only, never the job's)
and reads its own ``se.exec_start`` there, stamped when it was switched in.

Each CPU's offset to ``CLOCK_MONOTONIC`` is measured once and kept ``MAX_AGE_S`` (5 s): it
drifts by that CPU's steal and IRQ time, a small part of the time that passes (0.08 % here:
4 ms in 5 s). A CPU diag
may not run on (a container's cpuset) falls back to the clock of the CPU diag is on - the old
reading.

diag's forked workers do not move: a real-time worker moved onto the CPU where the other one
runs waits behind it until that one has read its whole share (an 8-rank first sample went
from ~46 ms to ~71 ms). The Collector measures the offsets between rounds, while its workers
sleep (``refresh``: every CPU at the first round, then the ``REFRESH_PER_ROUND`` oldest of
those older than ``REFRESH_S``), and posts them with the round's jobs (``adopt``).
"""

from __future__ import annotations

import os
import time
from typing import Dict, Optional, Set

from diag.probes.procfs import ProcFS

# An offset is measured again after this, where diag's thread may move: as long as the
# Collector's own refresh, so its thread reads with the offsets it posted instead of moving
# mid-round onto a CPU where a real-time worker runs (it would wait there).
MAX_AGE_S = 5.0
REFRESH_S = MAX_AGE_S  # the Collector measures a CPU's offset again for its workers after this
REFRESH_PER_ROUND = 16  # at most this many CPUs a round, after the first
MAX_CPUS = 1024  # CPUs measured at the first round, at most
_EXEC_START = "se.exec_start"
_SCHED_HEAD_BYTES = 512  # se.exec_start is the first field of /proc/.../sched


def parse_exec_start_ms(text: str) -> Optional[float]:
    """``se.exec_start : 442614.803005`` (ms of the scheduler's clock): when the thread last
    started running - for a thread off the CPU, the start of its last slice."""
    at = text.find(_EXEC_START, 0, _SCHED_HEAD_BYTES)
    if at < 0:
        return None
    value = text[at + len(_EXEC_START) :].split(":", 1)[-1].split("\n", 1)[0].strip()
    try:
        return float(value)
    except ValueError:
        return None


def _now_ms() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC) * 1000.0


class SchedClock:
    """``now_ms(cpu)``: now in ``cpu``'s scheduler clock; None with an injected /proc."""

    def __init__(self, procfs: ProcFS) -> None:
        self._procfs = procfs
        self._live = procfs.live
        self._offsets: Dict[Optional[int], float] = {}  # cpu -> its clock minus monotonic
        self._measured_at: Dict[Optional[int], float] = {}
        self._refused: Set[int] = set()  # CPUs diag may not run on
        self.moves = True  # False in a forked worker: it uses the offsets it is given

    def now_ms(self, cpu: Optional[int] = None) -> Optional[float]:
        key = cpu if cpu is not None and cpu not in self._refused else None
        if not self.moves and key not in self._offsets:
            key = None  # not given: the CPU this worker is on
        now = _now_ms()
        stale = now - self._measured_at.get(key, now) > MAX_AGE_S * 1000.0
        if key not in self._offsets or (stale and (self.moves or key is None)):
            offset = self._measure(key)
            if offset is None and key is not None:
                key = None  # that CPU refused: the one diag runs on
                offset = self._measure(None)
            if offset is None:
                return None
            self._offsets[key], self._measured_at[key] = offset, now
        return now + self._offsets[key]

    def refresh(self) -> Dict[int, float]:
        """Measure the offsets due (every CPU diag may use at the first call, then the
        ``REFRESH_PER_ROUND`` oldest of those over ``REFRESH_S`` old): what ``adopt`` takes."""
        try:
            cpus = sorted(os.sched_getaffinity(0))[:MAX_CPUS]
        except OSError:
            cpus = []
        now = _now_ms()
        due = [c for c in cpus if now - self._measured_at.get(c, -1e18) > REFRESH_S * 1000.0]
        if any(c in self._offsets for c in cpus):
            due = sorted(due, key=lambda c: self._measured_at.get(c, -1e18))[:REFRESH_PER_ROUND]
        for cpu in due:
            offset = self._measure(cpu)
            if offset is not None:
                self._offsets[cpu], self._measured_at[cpu] = offset, _now_ms()
        return {c: v for c, v in self._offsets.items() if c is not None}

    def adopt(self, offsets: Dict[int, float]) -> None:
        """Offsets the Collector measured (a worker, which does not move, uses these)."""
        now = _now_ms()
        for cpu, offset in offsets.items():
            self._offsets[cpu], self._measured_at[cpu] = offset, now

    def _own_offset(self) -> Optional[float]:
        text = self._procfs.read_global("thread-self", "sched")
        start = parse_exec_start_ms(text) if text is not None else None
        return None if start is None else start - _now_ms()

    def _measure(self, cpu: Optional[int]) -> Optional[float]:
        """This thread's offset on ``cpu`` (None: where it runs now), back where it was after."""
        if not self._live:
            return None
        if cpu is None:
            return self._own_offset()
        try:
            allowed = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except OSError:
            self._refused.add(cpu)
            return None
        try:
            return self._own_offset()
        finally:
            try:
                os.sched_setaffinity(0, allowed)
            except OSError:
                pass  # cannot happen: the mask it had; the next read is on some CPU anyway
