"""Deadlines of timed waits (issue #33): the timeout each blocked call was given, read from
``/proc/P/task/T/syscall`` and the pointed-to timespec in ``/proc/P/mem``, and with the wait's
age how long until it wakes by itself - on a real process whose threads sleep, wait on an
Event, select, poll and epoll with known timeouts, and one that waits on a lock for ever."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Dict

import pytest
from conftest import PROGRAMS, start_ready

from diag.model import ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.stacks import find_pyspy
from diag.probes.threads import read_threads
from diag.probes.wait_deadline import MemReader, deadline

pytestmark = pytest.mark.slow

AGE_S = 3.0


def _threads(pid: int, ids: Dict[str, int]) -> Dict[str, ThreadSample]:
    by_tid = {t.tid: t for t in read_threads(ProcFS(), pid, "x86_64")}
    return {label: by_tid[tid] for label, tid in ids.items()}


def test_each_timed_wait_reads_its_timeout_and_wake_time() -> None:
    started = start_ready([sys.executable, str(PROGRAMS / "timed_waits.py")], 60)
    try:
        ids = json.loads(started.lines[-2])
        time.sleep(AGE_S)
        threads = _threads(started.pid, ids)
    finally:
        started.stop()
    main = threads["main"]  # time.sleep(120): clock_nanosleep, absolute on CLOCK_MONOTONIC
    assert main.syscall == "clock_nanosleep"
    assert main.wakes_in_s is not None and main.off_cpu_s is not None
    assert abs(main.wakes_in_s - (120 - main.off_cpu_s)) <= 1.0, main
    assert abs(main.wakes_in_s - (120 - AGE_S)) <= 2.0, main
    assert main.timeout_s is not None and abs(main.timeout_s - 120) <= 1.0
    for label, budget in (
        ("event", 90),
        ("select", 70),
        ("poll", 50),
        ("epoll", 40),
        ("timed_lock", 80),
    ):
        t = threads[label]
        assert t.timeout_s is not None and abs(t.timeout_s - budget) <= 1.0, (label, t)
        assert t.wakes_in_s is not None and t.off_cpu_s is not None, (label, t)
        assert abs(t.wakes_in_s - (budget - t.off_cpu_s)) <= 1.0, (label, t)
        assert t.off_cpu_s >= AGE_S - 0.5, (label, t)
    untimed = threads["untimed"]
    assert untimed.syscall == "futex" and untimed.wait_timed is False
    assert untimed.timeout_s is None and untimed.wakes_in_s is None


@pytest.mark.skipif(find_pyspy() is None, reason="py-spy not installed")
def test_an_absolute_deadline_survives_a_ptrace_stop() -> None:
    """py-spy's dump stops every thread: a futex wait comes back as ``restart_syscall``; its
    registers (and its absolute timespec) are kept, so the wake time is still read."""
    started = start_ready([sys.executable, str(PROGRAMS / "timed_waits.py")], 60)
    try:
        ids = json.loads(started.lines[-2])
        dump = subprocess.run(
            [str(find_pyspy()), "dump", "--pid", str(started.pid)], capture_output=True, timeout=60
        )
        assert dump.returncode == 0, dump.stderr
        time.sleep(1.0)
        threads = _threads(started.pid, ids)
    finally:
        started.stop()
    event = threads["event"]
    assert event.syscall == "restart_syscall", event
    assert event.wakes_in_s is not None and 80 <= event.wakes_in_s <= 90, event
    assert threads["main"].wakes_in_s is not None and threads["main"].wakes_in_s > 100


def test_a_bad_pointer_or_no_right_fails_alone() -> None:
    """A pointer into nothing, or memory that cannot be opened, gives no deadline - no error."""
    unreadable = MemReader("/proc/0/mem")
    args = ["0", "0", "0", "0", "0", "0"]
    assert deadline("nanosleep", ["1000", *args[1:]], unreadable, 1.0).timeout_s is None
    own = MemReader("/proc/self/mem")
    try:
        bad = ["0", "89", "0", "10", "0", "0"]  # FUTEX_WAIT_BITSET at address 0x10
        assert deadline("futex", bad, own, 1.0).wakes_in_s is None
        assert deadline("poll", ["0", "1", "ffffffff", "0", "0", "0"], own, 1.0).timeout_s is None
    finally:
        own.close()
