"""Bundles built by the test helpers for the rules of the table that no real program on a
machine without a GPU reaches: a row's example ``fixture:NAME`` is ``FIXTURES[NAME]()``
(tests/test_rule_table.py, docs/rules.md). Every other example is a recorded capture."""

from __future__ import annotations

from typing import Callable, Dict

from diag.model import Bundle
from tests.series import Proc, build


def gpu_busy_at_idle_power() -> Bundle:
    """One rank in its forward pass, its GPU 100 % busy at 70 W of 700 W in every sample and
    nothing else moving: an NCCL kernel spinning for a peer (tests/series.py's GPU samples,
    as nvidia-smi reports them)."""
    rank = Proc(
        pid=100,
        rank=0,
        world_size=1,
        rank_source="env:RANK",
        stack=(("forward", "/job/model.py"), ("main", "/job/train.py")),
    )
    return build([rank], gpu=[(100.0, 70.0, 700.0, (100,))])


FIXTURES: Dict[str, Callable[[], Bundle]] = {
    "gpu_busy_at_idle_power": gpu_busy_at_idle_power,
}
