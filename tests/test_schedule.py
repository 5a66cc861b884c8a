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


def test_cpu_over_a_late_sample_is_cpu_time_over_wall_time() -> None:
    """A late sample leaves one short and one long interval: the window's CPU is the CPU time
    over the wall time (100 % here), not the mean of the two rates (400 % and 57 %)."""
    import msgspec

    from diag.verdict.features import extract
    from tests.series import Proc, build

    bundle = build([Proc(pid=100, rank=0, cpu_pct=100.0)], n=3, interval_s=2.0)
    s1 = bundle.samples[1]
    moved = msgspec.structs.replace(
        s1,
        t_s=s1.t_s - 1.5,
        processes=tuple(msgspec.structs.replace(p, t_s=p.t_s - 1.5) for p in s1.processes),
    )
    bundle = msgspec.structs.replace(bundle, samples=(bundle.samples[0], moved, bundle.samples[2]))
    (sig,) = [p for p in extract(bundle) if p.pid == 100]
    assert sig.intervals == 2
    assert 90.0 <= sig.cpu_pct <= 110.0, sig.cpu_pct


def test_a_watch_that_stalled_starts_its_clock_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a stall longer than an interval a watch does not take the missed samples back to
    back (intervals of ~0 s measure nothing); a capture of N samples keeps its schedule."""
    clock = Clock()
    monkeypatch.setattr(schedule_mod.time, "monotonic", clock.monotonic)
    watch, capture = Schedule(2.0, count=0), Schedule(2.0, count=5)
    watch.start(0)
    capture.start(0)
    clock.now = 110.0  # 10 s stalled: samples 1-4 were due at 102-108
    assert watch.start(1)[0] == pytest.approx(8.0) and capture.start(1)[0] == pytest.approx(8.0)
    assert watch.due(2) == pytest.approx(112.0)  # one interval from now
    assert capture.due(2) == pytest.approx(104.0)  # already due: the capture keeps its length
