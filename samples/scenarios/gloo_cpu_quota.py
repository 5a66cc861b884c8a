"""slow, not deadlocked (issue #37): 3 gloo ranks train data-parallel; rank 1 runs under a
cgroup CPU limit of a few hundredths of a core (a pod's ``limits.cpu`` set far too low), so a
step takes ~10 s and ranks 0, 2 wait for it in every ``all_reduce``. The throttled rank is in
state R in every sample, its run-queue delay grows and its stack moves: it waits for a CPU, it
is not blocked. diag names the rank, the limit and the share of periods throttled.

The limit is the cgroup named by ``DIAG_CPU_CGROUP`` (a directory of the cgroup v1 ``cpu``
controller, or a v2 group with ``cpu.max``, made and removed by the caller): the launcher
moves rank 1 into it before READY. Without it, this is the same job unthrottled - the healthy
contrast: progressing, a log line every few steps.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import _gloo
import _gloo_steps

WORLD_SIZE = 3
THROTTLED_RANK = 1
PRODUCTS_PER_STEP = 200  # ~80 ms of one core: ~3 s of wall time per step at 0.03 of a core


def confine(pid: int) -> None:
    """Move ``pid`` into the limited cgroup (the caller made it and removes it)."""
    group = os.environ.get("DIAG_CPU_CGROUP")
    if group:
        (Path(group) / "cgroup.procs").write_text(f"{pid}\n")


def rank_main() -> None:
    import torch
    import torch.distributed as dist

    _gloo.init()
    torch.set_num_threads(1)
    rank = _gloo.rank() or 0
    log = logging.getLogger("train")
    if rank == 0:
        where = os.environ.get("DIAG_SCENARIO_DIR", tempfile.gettempdir())
        handler = logging.FileHandler(os.path.join(where, "train.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    if rank == THROTTLED_RANK:
        confine(os.getpid())
    low_priority = rank == THROTTLED_RANK and os.environ.get("DIAG_LOW_PRIORITY") == "1"
    weights = torch.randn(256, 256) / 16
    for step in range(10**9):
        grad = _gloo_steps.forward_backward(weights, PRODUCTS_PER_STEP)
        dist.all_reduce(grad)
        weights -= 1e-4 * grad
        if step % 5 == 0:
            log.info("step %d norm %.4f", step, float(weights.norm()))
        if step == 1:
            if low_priority:
                os.nice(19)  # before the mark: the hogs start once every rank has marked
            _gloo.mark("stepping")


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE, settle_s=3.0)
    else:
        rank_main()
