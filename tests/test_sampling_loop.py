"""The one sampling loop (``commands.sampling.run_series``) that capture, watch and the Slurm
node collector all run: when it samples, and how each way of ending ends it. The sampler here
is a scripted stand-in for a Collector (the loop's contract is the subject, not /proc); the
real commands over real processes are in test_capture.py, test_watch.py and test_slurm.py."""

from __future__ import annotations

import threading
from typing import Callable, List, Optional, Tuple

import pytest

from diag.commands.sampling import Hooks, SeriesOptions, run_series
from diag.commands.stopping import StopRequest


class Scripted:
    """Alive until ``dies_after`` samples were taken; records each take's ``ended``."""

    def __init__(self, dies_after: Optional[int] = None, fire_at: Optional[int] = None) -> None:
        self.dies_after = dies_after
        self.fire_at = fire_at
        self.taken: List[Tuple[int, bool]] = []
        self.on_take: Callable[[int], None] = lambda index: None

    def alive(self) -> bool:
        return self.dies_after is None or len(self.taken) < self.dies_after

    def take(self, index: int, late_s: float, lean: bool, ended: bool) -> bool:
        self.taken.append((index, ended))
        self.on_take(index)
        return index == self.fire_at


def test_count_bounds_the_series() -> None:
    s = Scripted()
    end = run_series(s, SeriesOptions(interval_s=0.01, count=3), StopRequest())
    assert end.samples == 3 and not end.interrupted
    assert s.taken == [(0, False), (1, False), (2, False)]


def test_a_target_gone_before_the_first_sample_gives_none_unless_asked() -> None:
    s = Scripted(dies_after=0)
    assert run_series(s, SeriesOptions(interval_s=0.01, count=3), StopRequest()).samples == 0
    launched = Scripted(dies_after=0)  # a launched command: its one sample records the exit
    end = run_series(launched, SeriesOptions(0.01, 3, sample_gone=True), StopRequest())
    assert end.samples == 1 and launched.taken == [(0, True)]


def test_an_exit_mid_series_is_recorded_by_one_last_sample_taken_at_once() -> None:
    s = Scripted(dies_after=2)
    end = run_series(s, SeriesOptions(interval_s=5.0, count=10), StopRequest())
    assert s.taken == [(0, False), (1, False), (2, True)]
    assert end.samples == 3  # the sample after the exit did not wait 5 s for its turn


def test_a_stop_ends_after_the_sample_in_flight_or_after_one_more_for_a_watch() -> None:
    stop = StopRequest()
    s = Scripted()
    s.on_take = lambda index: stop.set() if index == 1 else None
    assert run_series(s, SeriesOptions(interval_s=0.01), stop).samples == 2
    stop, after = StopRequest(), []
    w = Scripted()
    # a stop that comes while the loop sleeps: a watch takes one more, after its hook
    timer = threading.Timer(0.2, stop.set)
    w.on_take = lambda index: timer.start() if index == 0 else None
    hooks = Hooks(on_stop=lambda: after.append(len(w.taken)))
    end = run_series(w, SeriesOptions(interval_s=30.0, after_stop=True), stop, hooks)
    assert end.samples == 2 and after == [1]


def test_the_sampler_ends_it_when_fail_on_fires() -> None:
    s = Scripted(fire_at=1)
    assert run_series(s, SeriesOptions(interval_s=0.01, count=5), StopRequest()).samples == 2


def test_between_runs_after_each_sample_but_the_last() -> None:
    s, calls = Scripted(), []
    run_series(s, SeriesOptions(0.01, 3), StopRequest(), Hooks(between=lambda: calls.append(1)))
    assert len(calls) == 2


def test_duration_bounds_an_open_series() -> None:
    s = Scripted()
    end = run_series(s, SeriesOptions(interval_s=0.05, duration_s=0.2), StopRequest())
    assert 4 <= end.samples <= 6


def test_keyboard_interrupt_after_the_first_sample_ends_it_before_propagates() -> None:
    def interrupt(index: int) -> None:
        raise KeyboardInterrupt

    first = Scripted()
    first.on_take = interrupt
    with pytest.raises(KeyboardInterrupt):
        run_series(first, SeriesOptions(0.01, 3), StopRequest())
    later = Scripted()
    later.on_take = lambda index: interrupt(index) if index == 1 else None
    end = run_series(later, SeriesOptions(0.01, 3), StopRequest())
    assert end.samples == 1 and end.interrupted


def test_warm_up_runs_once_and_only_in_a_long_gap() -> None:
    """A capture loads the verdict and the report template in its first long gap between
    samples (issue 27: after the last sample every CPU second counts); never twice, and not
    when the next sample is due sooner than ``WARM_GAP_S`` (it would make it late)."""
    import time
    from types import SimpleNamespace
    from typing import Any

    from diag.commands import capture
    from diag.commands.schedule import Schedule

    calls: List[int] = []
    recorder: Any = SimpleNamespace(samples=[object()])
    long_gap = Schedule(interval_s=capture.WARM_GAP_S + 1.0, count=3)
    long_gap.first = time.monotonic()
    between = capture._once_in_a_gap(lambda: calls.append(1), long_gap, recorder)
    between()
    between()
    assert calls == [1]
    short = Schedule(interval_s=capture.WARM_GAP_S / 4, count=3)
    short.first = time.monotonic()
    capture._once_in_a_gap(lambda: calls.append(2), short, recorder)()
    assert calls == [1]


def test_warm_up_loads_the_verdict_and_the_template() -> None:
    import sys

    from diag.commands.capture import warm_up
    from diag.render.html import environment

    warm_up()
    assert "diag.verdict.classify" in sys.modules
    cache = environment().cache
    assert cache is not None and len(cache) >= 1
