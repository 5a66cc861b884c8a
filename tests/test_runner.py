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
