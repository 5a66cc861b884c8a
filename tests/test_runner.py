"""Probe calls under timeouts (``diag.probes.runner``): a hung one costs its timeout only."""

from __future__ import annotations

import threading
import time

from diag.probes.runner import ProbeCall, run_all


def test_a_bounded_call_runs_in_the_callers_thread_beside_threaded_ones() -> None:
    never = threading.Event()
    here = threading.get_ident()
    calls = [
        ProbeCall("bounded", threading.get_ident, 5.0, bounded=True),
        ProbeCall("threaded", threading.get_ident, 5.0),
        ProbeCall("hung", never.wait, 0.3),
    ]
    started = time.monotonic()
    bounded, threaded, hung = run_all(calls)
    took_s = time.monotonic() - started
    never.set()
    assert bounded.value == here and threaded.value not in (None, here)
    assert hung.value is None and hung.failure is not None
    assert hung.failure.reason == "timed out after 0.3s"
    assert took_s < 2.0


def test_a_bounded_calls_exception_is_a_failure_record() -> None:
    def broken() -> int:
        raise OSError("EIO")

    [result] = run_all([ProbeCall("bounded", broken, 1.0, bounded=True)])
    assert result.value is None and result.failure is not None
    assert result.failure.reason == "OSError: EIO"


def test_threads_are_reused_and_a_hung_one_is_not_handed_more_work() -> None:
    never = threading.Event()
    used = {run_all([ProbeCall("a", threading.get_ident, 5.0)])[0].value for _ in range(20)}
    assert len(used) <= 3  # kept between calls (an earlier test's thread may join the idle)

    [hung] = run_all([ProbeCall("hung", never.wait, 0.2)])
    assert hung.failure is not None
    [after] = run_all([ProbeCall("after", threading.get_ident, 5.0)])
    never.set()
    assert after.value is not None and after.failure is None


def test_a_forked_child_starts_its_own_threads() -> None:
    import os

    run_all([ProbeCall("warm", threading.get_ident, 5.0)])  # an idle thread in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            [result] = run_all([ProbeCall("child", lambda: 7, 2.0)])
            code = 0 if result.value == 7 else 2
        finally:
            os._exit(code)
    os.close(read)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_idle_thread_keeps_no_reference_to_its_last_call() -> None:
    import gc
    import weakref

    class Owner:
        def probe(self) -> int:
            return 1

    owner = Owner()
    alive = weakref.ref(owner)
    run_all([ProbeCall("owned", owner.probe, 5.0)])
    del owner
    gc.collect()
    assert alive() is None
