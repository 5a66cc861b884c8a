"""diag's priority during a sampling burst (issue 27, ``diag.collect.priority``): raised for the
burst only, put back after it, bounded in real time, silently absent without the privilege;
and the capture's schedule: a late sample is recorded as late and never delays the next."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from conftest import PROGRAMS, run_diag

from diag.collect.collector import OPTIONAL_PROBES, Collector
from diag.collect.priority import (
    BOOST_NICE,
    COORDINATOR_PRIORITY,
    RR_PRIORITY,
    RT_SOFT_S,
    Boost,
    demote_all,
    demote_self,
    policy_from_env,
)
from diag.commands.capture import sample_series
from diag.model import Sample, ThreadSample
from diag.probes import native_location
from diag.probes.native_location import NativeProbe
from diag.probes.procfs import ProcFS

needs_sys_nice = pytest.mark.skipif(
    os.geteuid() != 0, reason="raising a priority needs CAP_SYS_NICE (root here)"
)


def _nice(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def _own_nices() -> Dict[int, int]:
    return {int(t): _nice(int(t)) for t in os.listdir("/proc/self/task")}


def _in_child(body: Callable[[], int]) -> int:
    """Run ``body`` in a forked child; its return value is the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _sleeper() -> int:
    pid = os.fork()
    if pid == 0:
        try:
            time.sleep(30)
        finally:
            os._exit(0)
    return pid


def _reap(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_policy_from_env() -> None:
    assert policy_from_env({}) == "rr"
    assert policy_from_env({"DIAG_NO_BOOST": "1"}) == "off"
    assert policy_from_env({"DIAG_NO_BOOST": "0"}) == "rr"
    assert policy_from_env({"DIAG_BOOST_POLICY": "nice"}) == "nice"
    assert policy_from_env({"DIAG_BOOST_POLICY": "fifo"}) == "rr"  # unknown: the default


@needs_sys_nice
def test_burst_raises_every_thread_and_restores_them_after() -> None:
    before = _own_nices()
    assert set(before.values()) == {0}
    boost = Boost("nice")
    started: List[int] = []
    with boost.burst() as burst:
        assert burst.raised and burst.label == "nice"
        assert set(_own_nices().values()) == {BOOST_NICE}
        # A thread started during the burst inherits the raised value...
        done = threading.Event()
        ready = threading.Event()

        def park() -> None:
            started.append(threading.get_native_id())
            ready.set()
            done.wait(10)

        thread = threading.Thread(target=park, daemon=True)
        thread.start()
        ready.wait(5)
        assert _nice(started[0]) == BOOST_NICE
    # ...and is put back with the others when the burst ends, though it still runs.
    assert _nice(started[0]) == 0
    assert set(_own_nices().values()) == {0}
    done.set()
    thread.join(5)
    assert boost.bursts_raised == 1 and boost.denied is None


@needs_sys_nice
def test_workers_run_real_time_bounded_during_the_burst_only() -> None:
    worker = _sleeper()
    try:
        boost = Boost("rr")
        with boost.burst() as burst:
            burst.add_workers([worker])
            policy = os.sched_getscheduler(worker)
            assert policy & ~os.SCHED_RESET_ON_FORK == os.SCHED_RR
            assert policy & os.SCHED_RESET_ON_FORK  # a py-spy it starts is not real-time
            assert os.sched_getparam(worker).sched_priority == RR_PRIORITY
            soft, hard = resource.prlimit(worker, resource.RLIMIT_RTTIME)
            assert 0 < soft <= hard <= 1_000_000  # microseconds: the kernel's bound
            assert burst.label == "rr"
        assert os.sched_getscheduler(worker) == os.SCHED_OTHER
        assert _nice(worker) == 0
    finally:
        _reap(worker)


@needs_sys_nice
def test_a_helper_started_in_a_burst_is_put_back_after_it() -> None:
    """The NVML worker outlives the burst that started it: it must not keep the raise."""
    boost = Boost("rr")
    with boost.burst() as burst:
        helper = _sleeper()  # forked from a raised thread: inherits nice -10
        try:
            assert _nice(helper) == BOOST_NICE
            burst.add_helpers([helper, None])
            assert os.sched_getscheduler(helper) == os.SCHED_OTHER  # never real-time
        except BaseException:
            _reap(helper)
            raise
    try:
        assert _nice(helper) == 0
    finally:
        _reap(helper)


@needs_sys_nice
def test_a_spinning_real_time_worker_is_demoted_by_the_kernel_bound() -> None:
    """RLIMIT_RTTIME's SIGXCPU reaches ``demote_self``: the spinner ends up SCHED_OTHER,
    alive, after ~50 ms of real-time CPU (not the whole 0.3 s it spins)."""

    def spin() -> int:
        signal.signal(signal.SIGXCPU, demote_self)
        resource.setrlimit(resource.RLIMIT_RTTIME, (50_000, 2_000_000))
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RR_PRIORITY))
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return 0 if os.sched_getscheduler(0) == os.SCHED_OTHER else 1

    assert _in_child(spin) == 0


def test_without_privilege_the_burst_runs_unboosted_silently() -> None:
    """As nobody (no CAP_SYS_NICE, RLIMIT_NICE 0): no error, nothing raised, remembered."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")

    def unprivileged() -> int:
        os.setgid(65534)
        os.setuid(65534)  # drops every capability
        resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
        worker = _sleeper()
        boost = Boost("rr")
        for _ in range(2):
            with boost.burst() as burst:
                burst.add_workers([worker])
                if burst.raised or burst.label or _nice(0) != 0:
                    return 1
                if os.sched_getscheduler(worker) != os.SCHED_OTHER:
                    return 2
        _reap(worker)
        return 0 if boost.denied and boost.bursts_raised == 0 else 3

    assert _in_child(unprivileged) == 0


@needs_sys_nice
def test_a_niced_diag_is_left_as_it_was_started() -> None:
    def niced() -> int:
        os.setpriority(os.PRIO_PROCESS, 0, 5)
        boost = Boost("rr")
        with boost.burst() as burst:
            if burst.raised or _nice(0) != 5:
                return 1
        return 0 if _nice(0) == 5 and boost.denied else 2

    assert _in_child(niced) == 0


@needs_sys_nice
@pytest.mark.slow
def test_collector_samples_boosted_and_restores_its_workers(spawn: Any) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py")])
    collector = Collector(job.pid, boost="rr")
    try:
        first = collector.take_sample(0).sample
        workers = collector._shards.worker_pids
        assert workers, "a job of several processes is read by forked workers"
        assert first.boost == "rr"
        for pid in workers:
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
            assert _nice(pid) == 0
        assert set(_own_nices().values()) == {0}
        lean = collector.take_sample(1, late_s=1.5, lean=True).sample
        assert lean.late_s == 1.5 and lean.skipped_probes == OPTIONAL_PROBES
        assert all(not p.open_files for p in lean.processes)
    finally:
        collector.close()
    off = Collector(job.pid, boost="off")
    try:
        assert off.take_sample(0).sample.boost == ""
    finally:
        off.close()


@needs_sys_nice
@pytest.mark.slow
def test_no_boost_flag_reaches_the_collector(spawn: Any, tmp_path: Path) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py")])
    boosts = {}
    for flag in ((), ("--no-boost",)):
        out = tmp_path / f"c{len(flag)}.json"
        args = ["capture", *flag, "--pid", str(job.pid), "--count", "1", "-o", str(out)]
        done = run_diag(args)
        assert done.returncode == 0, done.stderr
        samples = json.loads(out.read_text())["samples"]
        boosts[flag] = samples[0].get("boost", "")
    assert boosts == {(): "rr", ("--no-boost",): ""}


class _SlowCollector:
    """Stands in for a Collector: sample 1 takes longer than the interval."""

    def __init__(self, slow_s: float) -> None:
        self.slow_s = slow_s
        self.calls: List[Dict[str, float]] = []

    def alive(self) -> bool:
        return True

    def take_sample(self, index: int, *, late_s: float = 0.0, lean: bool = False) -> Any:
        self.calls.append({"index": index, "late_s": late_s, "lean": lean, "t": time.monotonic()})
        if index == 1:
            time.sleep(self.slow_s)
        sample = Sample(index=index, t_s=time.time(), late_s=late_s)
        return type("Delta", (), {"sample": sample})()

    def close(self) -> None:
        pass


def test_a_late_sample_is_recorded_and_never_delays_the_next() -> None:
    fake = _SlowCollector(slow_s=0.75)
    series = sample_series(fake, count=4, interval_s=0.3)  # type: ignore[arg-type]
    calls = fake.calls
    assert [c["index"] for c in calls] == [0, 1, 2, 3]
    assert len(series.samples) == 4
    t0 = calls[0]["t"]
    # Sample 2 was due at 0.6 s but 1 ran until ~1.05 s: late, and lean (not the last)...
    assert calls[2]["late_s"] > 0.25 and calls[2]["lean"]
    # ...sample 3 keeps its own schedule (due 0.9 s, taken right after 2), late but not lean.
    assert calls[3]["t"] - t0 < 1.05 + 0.3
    assert calls[3]["late_s"] > 0.0 and not calls[3]["lean"]
    assert not calls[1]["lean"] and calls[1]["late_s"] < 0.25


def test_on_time_samples_are_not_lean() -> None:
    fake = _SlowCollector(slow_s=0.0)
    sample_series(fake, count=3, interval_s=0.2)  # type: ignore[arg-type]
    assert all(not c["lean"] and c["late_s"] < 0.1 for c in fake.calls)


def _policy(tid: int) -> int:
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK


@needs_sys_nice
def test_the_coordinator_runs_above_its_workers_during_the_burst_only() -> None:
    """With real-time workers, diag's own threads run one real-time priority above them (so
    they take the CPU whenever they have an answer to read), bounded by RLIMIT_RTTIME whose
    SIGXCPU demotes them; a thread or process started in the burst is not real-time; all of
    it is put back when the burst ends."""
    limit_before = resource.getrlimit(resource.RLIMIT_RTTIME)
    handler_before = signal.getsignal(signal.SIGXCPU)
    boost = Boost("rr")
    seen: Dict[str, int] = {}
    worker = _sleeper()
    with boost.burst() as burst:
        assert not burst.coordinating  # no real-time worker yet: nice only
        burst.add_workers([worker])
        assert burst.coordinating
        for tid in _own_nices():
            assert _policy(tid) == os.SCHED_RR
            assert os.sched_getscheduler(tid) & os.SCHED_RESET_ON_FORK
            assert os.sched_getparam(tid).sched_priority == COORDINATOR_PRIORITY > RR_PRIORITY
        soft, _ = resource.getrlimit(resource.RLIMIT_RTTIME)
        assert 0 < soft <= 1_000_000
        assert signal.getsignal(signal.SIGXCPU) is demote_all
        thread = threading.Thread(
            target=lambda: seen.update(thread=_policy(threading.get_native_id()))
        )
        thread.start()
        thread.join(5)
        child = _sleeper()
        seen["child"] = _policy(child)
        _reap(child)
    _reap(worker)
    assert seen == {"thread": os.SCHED_OTHER, "child": os.SCHED_OTHER}
    assert {_policy(tid) for tid in _own_nices()} == {os.SCHED_OTHER}
    assert set(_own_nices().values()) == {0}
    assert resource.getrlimit(resource.RLIMIT_RTTIME) == limit_before
    assert signal.getsignal(signal.SIGXCPU) == handler_before


@needs_sys_nice
def test_a_collector_off_the_main_thread_keeps_its_threads_out_of_real_time() -> None:
    """Python runs signal handlers on the main thread only: elsewhere the RLIMIT_RTTIME bound
    could not demote anything, so the burst raises nice values only."""
    out: Dict[str, Any] = {}

    worker = _sleeper()

    def sample() -> None:
        with Boost("rr").burst() as burst:
            burst.add_workers([worker])
            out["coordinating"] = burst.coordinating
            out["policy"] = _policy(threading.get_native_id())
            out["raised"] = burst.raised

    thread = threading.Thread(target=sample)
    thread.start()
    thread.join(5)
    _reap(worker)
    assert out == {"coordinating": False, "policy": os.SCHED_OTHER, "raised": True}


@needs_sys_nice
def test_a_spinning_coordinator_is_demoted_by_the_kernel_bound_and_lives() -> None:
    """A coordinator thread that would not sleep gets SIGXCPU after RT_SOFT_S of real-time
    CPU; ``demote_all`` puts every thread back to SCHED_OTHER and diag goes on (no hard
    kill: diag itself must not be killed by its own bound)."""

    def spin() -> int:
        worker = _sleeper()
        with Boost("rr").burst() as burst:
            burst.add_workers([worker])
            if not burst.coordinating:
                return 1
            end = time.process_time() + RT_SOFT_S + 0.3
            while time.process_time() < end:
                pass
            if _policy(0) != os.SCHED_OTHER:
                return 2
        _reap(worker)
        return 0

    assert _in_child(spin) == 0


@needs_sys_nice
def test_the_native_probe_thread_runs_at_its_real_time_workers_priority() -> None:
    """A shard worker is real-time with reset-on-fork, so a thread it starts would run at the
    normal policy and nice 0 - behind a busy job's threads while the worker waits on it (its
    core idle). The native-location thread takes the waiting thread's priority."""

    def in_worker() -> int:
        os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(RR_PRIORITY))
        seen: List[int] = []

        def attach(*args: Any) -> Any:
            seen.append(os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK)
            seen.append(os.sched_getparam(0).sched_priority)
            return args[2]

        native_location.attach_native = attach  # type: ignore[assignment]
        running = (ThreadSample(tid=os.getpid(), name="x", state="R"),)
        NativeProbe(ProcFS()).attach(os.getpid(), running)
        return 0 if seen == [os.SCHED_RR, RR_PRIORITY] else 1

    assert _in_child(in_worker) == 0


@needs_sys_nice
def test_a_hard_real_time_bound_keeps_diags_own_threads_out_of_real_time() -> None:
    """Where someone set RLIMIT_RTTIME's hard bound for diag, running past it would kill diag
    (SIGKILL, not the SIGXCPU that demotes): its own threads stay at their nice value."""

    def bounded() -> int:
        resource.setrlimit(resource.RLIMIT_RTTIME, (500_000, 2_000_000))
        worker = _sleeper()
        with Boost("rr").burst() as burst:
            burst.add_workers([worker])
            outcome = 0 if burst.rt_workers == 1 and not burst.coordinating else 1
            if _policy(0) != os.SCHED_OTHER:
                outcome = 2
        _reap(worker)
        return outcome

    assert _in_child(bounded) == 0
