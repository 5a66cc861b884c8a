"""deadlocked: ranks 0,1,3 wait in all_reduce; rank 2 took another code path and sleeps in
`rebuild_cache` (e.g. a cache rebuild that never returns) - the classic diverged rank."""

from __future__ import annotations

import time

import _gloo

WORLD_SIZE = 4


def rebuild_cache() -> None:
    _gloo.mark("sleeping in rebuild_cache")
    while True:
        time.sleep(3600)


def train_step(step: int) -> None:
    import torch
    import torch.distributed as dist

    grad = torch.ones(1024) * step
    if step == 3 and _gloo.rank() == 2:
        rebuild_cache()  # rank 2 never reaches the all_reduce below
    if step == 3:
        _gloo.mark("in all_reduce")
    dist.all_reduce(grad)


if __name__ == "__main__":
    _gloo.run_steps(__file__, WORLD_SIZE, train_step)
