"""One thread, calls in a row, each under its own timeout (``diag.collect.serial_lane``)."""

from __future__ import annotations

import threading
import time

from diag.collect.serial_lane import DEADLINE_PASSED, run_serial


def test_calls_run_in_order_on_one_thread() -> None:
    seen = []

    def call(key: int) -> int:
        seen.append((key, threading.get_ident()))
        return key * 10

    values, failed = run_serial([1, 2, 3], call, timeout_s=5.0)
    assert values == {1: 10, 2: 20, 3: 30} and failed == {}
    assert [k for k, _ in seen] == [1, 2, 3]
    assert len({t for _, t in seen}) == 1


def test_a_hung_call_costs_its_timeout_and_the_rest_still_run() -> None:
    never = threading.Event()

    def call(key: str) -> str:
        if key == "stuck":
            never.wait()
        if key == "broken":
            raise OSError("EIO")
        return key.upper()

    started = time.monotonic()
    values, failed = run_serial(["a", "stuck", "broken", "b"], call, timeout_s=0.3)
    took_s = time.monotonic() - started
    never.set()
    assert values == {"a": "A", "b": "B"}
    assert failed == {"stuck": "timed out after 0.3s", "broken": "OSError: EIO"}
    assert 0.3 <= took_s < 2.0


def test_the_budget_bounds_the_whole_row_and_says_what_was_not_read() -> None:
    never = threading.Event()

    def call(key: str) -> str:
        if key.startswith("stuck"):
            never.wait()
        return key

    started = time.monotonic()
    values, failed = run_serial(
        ["a", "stuck1", "stuck2", "stuck3", "b"], call, timeout_s=0.4, deadline=started + 0.6
    )
    took_s = time.monotonic() - started
    never.set()
    assert values == {"a": "a"}
    assert failed["stuck1"] == "timed out after 0.4s"
    assert failed["stuck2"] == failed["stuck3"] == failed["b"] == DEADLINE_PASSED
    assert 0.6 <= took_s < 1.5  # not 3 x 0.4 s
