"""When each sample is due: the clock of the one sampling loop (``commands.sampling``), so of
every way diag samples - ``capture --pid``, the Slurm node collector, ``watch``, ``capture --
CMD``.

Sample *i* is due at ``first + i x interval``, ``first`` being when sample 0 started: a sample
that runs long (a busy host, a slow py-spy) never pushes the later ones back, so a capture keeps
its length and the rates the verdict reads come from the samples' real timestamps, not from
an interval that stretched. A sample that starts well after it was due is *late*: recorded
(``Sample.late_s``), and - when it is neither the first nor the last - *lean*: the optional
probes are skipped, so a saturated host gets the verdict in time (``Collector.take_sample``).
"""

from __future__ import annotations

import time
from typing import Optional, Tuple

from diag.commands.stopping import StopRequest

# A sample that starts this long after it was due (a share of the interval, or 0.25 s if more)
# ran late.
LATE_SHARE = 0.1
LATE_MIN_S = 0.25


class Schedule:
    """The due time of each sample of a series of ``count`` (0: no end) ``interval_s`` apart."""

    def __init__(self, interval_s: float, count: int = 0) -> None:
        self.interval_s = interval_s
        self.count = count
        self.first: Optional[float] = None  # time.monotonic() when sample 0 started

    def due(self, index: int) -> float:
        return (self.first or time.monotonic()) + index * self.interval_s

    def wait_for(self, index: int, stop: StopRequest) -> bool:
        """Sleep until sample ``index`` is due; True if a stop was requested meanwhile."""
        if index and self.first is not None:
            return stop.wait(self.due(index) - time.monotonic())
        return stop.requested

    def start(self, index: int) -> Tuple[float, bool]:
        """Sample ``index`` starts now: how late it is (seconds after it was due), and
        whether it should be lean (late, and neither the first nor the last)."""
        if self.first is None:
            self.first = time.monotonic()
        if not index:
            return 0.0, False
        now = time.monotonic()
        late_s = max(0.0, now - self.due(index))
        if (self.count <= 0 or index >= self.count) and late_s > self.interval_s:
            # A watch that stalled (a suspended host, a long sample) starts its clock again
            # rather than take the samples it missed back to back: intervals of ~0 s measure
            # nothing. A capture of N samples keeps its length instead (issue 27); the samples
            # it adds past N (``capture``'s extension to its job's rhythm) are open-ended.
            self.first = now - index * self.interval_s
        late = late_s > max(LATE_SHARE * self.interval_s, LATE_MIN_S)
        return late_s, late and (self.count <= 0 or index < self.count - 1)
