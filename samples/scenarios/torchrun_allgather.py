"""deadlocked: real torchrun, 3 gloo ranks. Every 5th step rank 2 (the metrics rank) also
gathers its stats with ``all_gather`` before the gradient ``all_reduce``; ranks 0 and 1 skip
it - a collective only some ranks call, waiting in two different collectives forever."""

from __future__ import annotations

import _torchrun


def log_metrics(loss: float) -> None:
    import torch
    import torch.distributed as dist

    stats = torch.tensor([loss])
    out = [torch.zeros(1) for _ in range(dist.get_world_size())]
    _torchrun.mark("all_gather")
    dist.all_gather(out, stats)


def train() -> None:
    import torch
    import torch.distributed as dist

    _torchrun.init()
    model = torch.nn.Linear(64, 64)
    for step in range(1, 10**6):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        loss.backward()
        if step % 5 == 0 and _torchrun.rank() == 2:
            log_metrics(loss.item())
        if step == 5:
            _torchrun.mark("all_reduce")
        for p in model.parameters():
            dist.all_reduce(p.grad)


if __name__ == "__main__":
    if _torchrun.is_rank():
        train()
    else:
        _torchrun.launch(__file__, 3)
