"""A wait's age against the clock of the CPU the thread last ran on (``probes.sched_clock``):
each CPU's scheduler clock runs behind ``CLOCK_MONOTONIC`` by its own IRQ and steal time, a
second apart between the two vCPUs of this project's VM after a few hours."""

from __future__ import annotations

import os
import sys
import time

import pytest
from conftest import start_ready

from diag.probes.procfs import ProcFS
from diag.probes.sched_clock import SchedClock
from diag.probes.threads import read_threads

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs"),
]

SLEPT_S = 2.0
SLEEPER = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "time.sleep(0.05)\n"
    "print('READY', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.mark.parametrize("where", [0, 1])
def test_age_of_a_thread_on_another_cpu_is_its_time_off_the_cpu(where: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    sleeper_cpu, reader_cpu = cpus[where], cpus[1 - where]
    started = start_ready([sys.executable, "-c", SLEEPER, str(sleeper_cpu)], 30)
    allowed = os.sched_getaffinity(0)
    try:
        time.sleep(SLEPT_S)
        os.sched_setaffinity(0, {reader_cpu})
        procfs = ProcFS()
        (main,) = [t for t in read_threads(procfs, started.pid, "x86_64") if t.tid == started.pid]
    finally:
        os.sched_setaffinity(0, allowed)
        started.stop()
    assert main.off_cpu_s is not None, main
    assert abs(main.off_cpu_s - SLEPT_S) <= 0.3, main  # the other CPU's clock: ~1 s off here


def test_each_cpu_has_its_own_offset_and_diag_goes_back_where_it_was() -> None:
    allowed = os.sched_getaffinity(0)
    clock = SchedClock(ProcFS())
    cpus = sorted(allowed)[:2]
    nows = [clock.now_ms(cpu) for cpu in cpus]
    assert all(n is not None for n in nows)
    assert os.sched_getaffinity(0) == allowed  # diag's own thread only moved for a moment
    assert clock.now_ms(10_000) is not None  # a CPU it may not run on: its own clock


PAIR = (
    "import os, sys, time\n"
    "for cpu in (0, 1):\n"
    "    if os.fork() == 0:\n"
    "        os.sched_setaffinity(0, {cpu})\n"
    "        time.sleep(120)\n"
    "        os._exit(0)\n"
    "time.sleep(0.2)\n"
    "print('READY', flush=True)\n"
    "time.sleep(120)\n"
)


def test_the_collectors_workers_age_threads_of_either_cpu() -> None:
    """Through the forked workers (which do not move: the Collector posts each CPU's offset
    with the round's jobs), sleepers pinned to each CPU age the same."""
    from diag.collect.collector import Collector

    started = start_ready([sys.executable, "-c", PAIR], 30)
    try:
        time.sleep(SLEPT_S)
        collector = Collector(started.pid, pyspy="")
        try:
            sample = collector.take_sample(0).sample
            assert collector._shards.worker_pids, "read by the forked workers"
        finally:
            collector.close()
    finally:
        started.stop()
    kids = [p for p in sample.processes if p.pid != started.pid and p.threads]
    assert len(kids) == 2, sample.processes
    ages = [t.off_cpu_s for p in kids for t in p.threads if t.tid == p.pid]
    assert all(a is not None and abs(a - SLEPT_S - 0.2) <= 0.3 for a in ages), ages
