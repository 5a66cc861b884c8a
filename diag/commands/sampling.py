"""The one sampling loop: every way diag samples a job runs it - ``capture --pid``, ``capture --
CMD``, ``watch`` and the Slurm node collector.

What differs between them is what a sample is *for*, not how the series is taken: a capture
keeps its samples and judges them once at the end (``capture.sample_series``); a watch journals
each, judges its recent window and keeps a live report (``diag.watch.loop``). Both plug a
``Sampler`` into ``run_series``, which owns everything they must agree on:

* the clock (``Schedule``: a late sample delays no other, a stalled watch re-anchors);
* the stop (``StopRequest``: a signal or the Slurm controller ends the series after the sample
  in flight; a watch takes one more, so its last sample shows the state the stop left);
* the target's exit (one last sample records it - status, exit code - then the series ends);
* the bounds (``count`` samples, ``duration_s`` of series).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Protocol

from diag.commands.schedule import Schedule
from diag.commands.stopping import StopRequest


class Sampler(Protocol):
    """What a series samples, and what it does with each sample."""

    def alive(self) -> bool:
        """Whether the target still runs (a launched command that exited: no)."""

    def take(self, index: int, late_s: float, lean: bool, ended: bool) -> bool:
        """Take sample ``index`` (``ended``: the target was gone before it started, so this
        sample records the exit). True ends the series after it (``--fail-on`` fired)."""


class SeriesEnd(NamedTuple):
    """How a series ended: samples taken, and whether a KeyboardInterrupt cut it short."""

    samples: int
    interrupted: bool


@dataclass(frozen=True)
class SeriesOptions:
    """``count`` 0: no bound but ``duration_s`` or a stop. ``sample_gone``: take a first sample
    of a target already gone (a launched command: it records the exit code). ``after_stop``:
    take one last sample after a stop request (a watch)."""

    interval_s: float
    count: int = 0
    duration_s: Optional[float] = None
    sample_gone: bool = False
    after_stop: bool = False


class Hooks(NamedTuple):
    """What a sampler does between samples: ``between`` after each one but the last (a live
    report), ``on_stop`` when a stop is requested and one more sample follows (give a
    launched command time to end)."""

    between: Optional[Callable[[], None]] = None
    on_stop: Optional[Callable[[], None]] = None


def run_series(
    sampler: Sampler,
    options: SeriesOptions,
    stop: StopRequest,
    hooks: Optional[Hooks] = None,
    schedule: Optional[Schedule] = None,
) -> SeriesEnd:
    """Sample until ``count`` samples, ``duration_s``, a stop request, ``Sampler.take`` says
    so, or the target is gone - then one last sample records how it ended. A KeyboardInterrupt
    (outside the main thread's stop handlers) after the first sample ends the series; before
    it, it propagates: there is nothing to write."""
    schedule = schedule if schedule is not None else Schedule(options.interval_s, options.count)
    hooks = hooks if hooks is not None else Hooks()
    started = time.monotonic()
    index = 0
    try:
        while True:
            alive = sampler.alive()
            if not alive and not index and not options.sample_gone:
                return SeriesEnd(0, False)
            late_s, lean = schedule.start(index)
            done = sampler.take(index, late_s, lean, not alive)
            index += 1
            if (
                done
                or not alive
                or stop.requested
                or (options.count > 0 and index >= options.count)
                or _over(started, options.duration_s)
            ):
                return SeriesEnd(index, False)
            if not sampler.alive():
                continue  # it ended during this sample: the next one, taken now, shows how
            if hooks.between is not None:
                hooks.between()
            if schedule.wait_for(index, stop):
                if not options.after_stop:
                    return SeriesEnd(index, False)
                if hooks.on_stop is not None:
                    hooks.on_stop()
                # loop once more: the last sample shows the state the stop left behind
    except KeyboardInterrupt:
        if not index:
            raise
        return SeriesEnd(index, True)


def _over(started: float, duration_s: Optional[float]) -> bool:
    return bool(duration_s) and time.monotonic() - started >= (duration_s or 0.0)
