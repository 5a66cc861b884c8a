"""deadlocked: 3 gloo ranks overlap communication the do-it-yourself way - each step starts its
all_reduce with ``async_op=True`` and busy-polls ``fut.done()`` until it completes. At step 3
rank 2 takes another code path (it sleeps in ``write_checkpoint``), so ranks 0,1 poll an
all_reduce that never completes: 100% of a core each, in the same loop every sample. Their
CPU is that collective's wait, not work - not "slow: CPU-bound, wait, don't kill"."""

from __future__ import annotations

import time

import _gloo

WORLD_SIZE = 3


def write_checkpoint() -> None:
    _gloo.mark("sleeping in write_checkpoint")
    while True:
        time.sleep(3600)


def wait_for_grads(fut: object) -> None:
    """Spin until the collective completes (no sleep: lowest latency)."""
    while not fut.done():  # type: ignore[attr-defined]
        pass


def train_step(step: int) -> None:
    import torch
    import torch.distributed as dist

    grad = torch.ones(1024) * step
    if step == 3 and _gloo.rank() == 2:
        write_checkpoint()  # rank 2 never starts the all_reduce below
    work = dist.all_reduce(grad, async_op=True)
    if step == 3:
        _gloo.mark("polling the all_reduce")
    wait_for_grads(work.get_future())


if __name__ == "__main__":
    _gloo.run_steps(__file__, WORLD_SIZE, train_step)
