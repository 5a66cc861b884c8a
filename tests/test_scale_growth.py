"""How the verdict's work grows with the job (issue 35), counted, not timed: Python calls made
by ``classify`` on ``bench.scale``'s synthetic job at two sizes. Rules keep landing with a scan
per rank per thread (``waits_for_dead_thread`` walked every thread of every sample of every
rank before reading the log: 20 s of a 4,096-rank verdict the hour it landed) or per rank per
rank; benchmarks catch them late. Doubling the threads of every rank must barely move the count
- per-thread work is done once per class of identical processes - and doubling the ranks must
about double it, not quadruple it. (The regression above: 1.41x for twice the threads.)"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, List, Optional, Tuple

import pytest

from bench.scale import STORIES, Shape, make_parts
from diag.bundle.merge import merge_bundles
from diag.verdict.classify import classify

HOSTS, THREADS = 16, 50  # 128 ranks: two seconds for the whole file
MAX_PER_THREADS = 1.25  # calls with twice the threads a rank, against once
MAX_PER_RANKS = 2.3  # calls with twice the ranks: linear, with room for log n


def _calls(story: str, hosts: int, threads: int, ring: bool = False) -> int:
    """``ring``: no odd rank - every rank waits in the same collective, each on the next."""
    return _counts(story, hosts, threads, ring)[0]


def _counts(story: str, hosts: int, threads: int, ring: bool = False) -> Tuple[int, int]:
    """Python calls of ``classify``, and how many of them were a dataclass's ``__eq__`` (its
    code is generated: file ``<string>``) - a lookup by value in a list of ranks."""
    shape = Shape(hosts, 8, threads, 3)
    if ring:
        shape.odd_rank = -1
    parts, missing, _ = make_parts(shape, story)
    bundle = merge_bundles(parts, missing)
    count: List[int] = [0, 0]

    def tally(frame: FrameType, event: str, _arg: Any) -> Optional[object]:
        if event == "call":
            count[0] += 1
            code = frame.f_code
            if code.co_name == "__eq__" and code.co_filename == "<string>":
                count[1] += 1
        return None

    sys.setprofile(tally)
    try:
        classify(bundle)
    finally:
        sys.setprofile(None)
    return count[0], count[1]


@pytest.mark.parametrize("story", STORIES)
def test_the_verdicts_work_grows_with_ranks_not_threads(story: str) -> None:
    base = _calls(story, HOSTS, THREADS)
    threads = _calls(story, HOSTS, 2 * THREADS)
    ranks = _calls(story, 2 * HOSTS, THREADS)
    assert threads / base <= MAX_PER_THREADS, (story, base, threads)
    assert ranks / base <= MAX_PER_RANKS, (story, base, ranks)


def test_one_ring_of_ranks_grows_linearly() -> None:
    """Every rank in one ``all_reduce``: each waits on the next ones of its bucket, found by
    its place there (``graph_edges._peer_edges`` once looked it up with ``list.index``, a
    dataclass compare per rank before it: 8.2 s of classify at 4,096 ranks, 2.2 s at 2,048)."""
    base, base_eq = _counts("diverged", HOSTS, THREADS, ring=True)
    ranks, ranks_eq = _counts("diverged", 2 * HOSTS, THREADS, ring=True)
    assert ranks / base <= MAX_PER_RANKS, (base, ranks)
    # The compares themselves: 8,128 at 128 ranks, 32,640 at 256 with ``list.index``.
    assert ranks_eq <= MAX_PER_RANKS * max(base_eq, 1), (base_eq, ranks_eq)
