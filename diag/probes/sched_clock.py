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

Each CPU's offset to ``CLOCK_MONOTONIC`` is measured once and kept ``MAX_AGE_S``: it drifts
by that CPU's steal and IRQ time, a few percent of the time that passes. A CPU diag may not run
on (a container's cpuset) falls back to the clock of the CPU diag is on - the old reading.
"""

from __future__ import annotations

import os
import time
from typing import Dict, Optional, Set

from diag.probes.procfs import ProcFS

MAX_AGE_S = 1.0  # an offset is measured again after this
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

    def now_ms(self, cpu: Optional[int] = None) -> Optional[float]:
        key = cpu if cpu is not None and cpu not in self._refused else None
        now = _now_ms()
        if key not in self._offsets or now - self._measured_at[key] > MAX_AGE_S * 1000.0:
            offset = self._measure(key)
            if offset is None and key is not None:
                key = None  # that CPU refused: the one diag runs on
                offset = self._measure(None)
            if offset is None:
                return None
            self._offsets[key], self._measured_at[key] = offset, now
        return now + self._offsets[key]

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
