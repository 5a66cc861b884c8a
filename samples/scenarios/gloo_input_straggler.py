"""progressing, with a straggler that burns nothing: 3 gloo ranks train data-parallel; rank 1
streams its batches from a slow store (each fetch blocks ~1.5 s, a sleep here), and the others
wait for it in every all_reduce. No log. diag names rank 1 - waiting on its own input in
`fetch_batch` while ranks 0 and 2 wait in `all_reduce` - not a deadlock, and not nobody."""

from __future__ import annotations

import time
from typing import Any

import _gloo

WORLD_SIZE = 3


def fetch_batch(rank: int) -> Any:
    import torch

    if rank == 1:
        time.sleep(1.5)  # a remote blob store's latency
    return torch.randn(64, 128)


def run() -> None:
    import torch
    import torch.distributed as dist

    _gloo.init()
    torch.set_num_threads(1)
    rank = _gloo.rank() or 0
    w = torch.randn(128, 128, requires_grad=True)
    for step in range(10**9):
        x = fetch_batch(rank)
        loss = (x @ w).pow(2).mean()
        loss.backward()
        assert w.grad is not None
        dist.all_reduce(w.grad)
        with torch.no_grad():
            w -= 1e-4 * w.grad
            w.grad.zero_()
        if step == 3:
            _gloo.mark("stepping")


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE)
    else:
        run()
