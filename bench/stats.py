"""Repeated measurements and the one number each becomes (median, with the min beside it).

The machine the benchmarks run on is shared and noisy: a single run says little, the median
of several says what is typical and the min what the code costs when nothing interferes.
Ratios are taken between medians measured in the same run, interleaved, so both sides see the
same noise.
"""

from __future__ import annotations

import resource
import statistics
import time
from typing import Callable, List, NamedTuple, Sequence, Tuple, TypeVar

T = TypeVar("T")


class Series(NamedTuple):
    """Repeated values of one measure (seconds, bytes or a ratio)."""

    values: Sequence[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def min(self) -> float:
        return min(self.values) if self.values else float("nan")


def ratio(numerator: Series, denominator: Series) -> float:
    """Median over median; nan when either side is empty or zero."""
    den = denominator.median
    return numerator.median / den if den and den == den else float("nan")


class Timed(NamedTuple):
    wall_s: float
    self_cpu_s: float
    children_cpu_s: float


def _cpu() -> Tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def timed_call(fn: Callable[[], T]) -> Tuple[Timed, T]:
    """Wall time and CPU time (this process; reaped children) of one call, and its result."""
    cpu0 = _cpu()
    t0 = time.perf_counter()
    result = fn()
    wall_s = time.perf_counter() - t0
    cpu1 = _cpu()
    return Timed(wall_s, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]), result


def timed(fn: Callable[[], object]) -> Timed:
    return timed_call(fn)[0]


def collect(values: List[float]) -> Series:
    return Series(tuple(values))
