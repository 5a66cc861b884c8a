"""The others' median per rank, asked of a sorted whole (issue 35: it was n^2 log n)."""

from __future__ import annotations

import random
import statistics

import pytest

from diag.verdict.stragglers import _OthersMedian


def test_equals_the_median_of_the_others_with_ties_and_odd_and_even_counts() -> None:
    rng = random.Random(35)
    for _ in range(2000):
        n = rng.randint(2, 9)
        values = [rng.choice([0.0, 1.5, 2.0, 7.0, rng.random() * 100]) for _ in range(n)]
        medians = _OthersMedian(values)
        for i, value in enumerate(values):
            assert medians.without(value) == statistics.median(values[:i] + values[i + 1 :])


def test_one_rank_has_no_others() -> None:
    with pytest.raises(statistics.StatisticsError):
        _OthersMedian([3.0]).without(3.0)
