"""progressing or slow, never deadlocked: real torchrun, 3 gloo ranks training a small MLP
(forward, backward, gradient ``all_reduce``) that prints progress only every 30 s - the
capture sees a silent job whose ranks keep computing and communicating."""

from __future__ import annotations

import time

import _torchrun


def train() -> None:
    import torch
    import torch.distributed as dist

    _torchrun.init()
    torch.manual_seed(_torchrun.rank())
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    last_print = time.monotonic()
    for step in range(10**9):
        loss = model(torch.randn(128, 512)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        if time.monotonic() - last_print > 30:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            last_print = time.monotonic()
        if step == 20:
            _torchrun.mark("training")


if __name__ == "__main__":
    if _torchrun.is_rank():
        train()
    else:
        _torchrun.launch(__file__, 3)
