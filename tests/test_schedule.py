"""The one sampling clock (capture, watch, the Slurm node collector): sample i is due at
first + i x interval, a late sample delays no other, and a late middle sample is lean."""

from __future__ import annotations

import pytest

import diag.commands.schedule as schedule_mod
from diag.commands.schedule import Schedule
from diag.commands.stopping import StopRequest


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_a_late_sample_delays_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(schedule_mod.time, "monotonic", clock.monotonic)
    s = Schedule(2.0, count=4)
    assert s.start(0) == (0.0, False)
    clock.now = 105.0  # sample 0 ran 5 s: samples 1 and 2 are due at 102 and 104
    late_s, lean = s.start(1)
    assert late_s == pytest.approx(3.0) and lean  # late, and neither first nor last
    assert s.due(2) == pytest.approx(104.0) and s.due(3) == pytest.approx(106.0)
    clock.now = 106.1
    late_s, lean = s.start(3)
    assert late_s == pytest.approx(0.1) and not lean  # within the slack; the last is never lean


def test_the_last_sample_is_never_lean_and_a_watch_has_no_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(schedule_mod.time, "monotonic", clock.monotonic)
    capture, watch = Schedule(1.0, count=2), Schedule(1.0, count=0)
    capture.start(0)
    watch.start(0)
    clock.now = 110.0
    assert capture.start(1)[1] is False  # the last of a capture keeps every probe
    assert watch.start(1)[1] is True


def test_waiting_ends_at_a_stop_request() -> None:
    stop = StopRequest()
    s = Schedule(30.0, count=3)
    s.start(0)
    stop.set(15)
    assert s.wait_for(1, stop) is True  # no 30 s sleep: the request ends the wait
    assert stop.by() == " by SIGTERM"
