"""deadlocked: real torchrun, 3 gloo ranks training; rank 1 gets SIGSTOPped (a debugger left
attached, a job-control ^Z, a frozen cgroup) - state T, while ranks 0 and 2 wait for it in
``all_reduce``. The stopped rank is the one to look at (SIGCONT it, or kill the job)."""

from __future__ import annotations

import os
import signal

import _torchrun


def train() -> None:
    import torch
    import torch.distributed as dist

    _torchrun.init()
    model = torch.nn.Linear(64, 64)
    for step in range(1, 10**6):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        loss.backward()
        if step == 10:
            _torchrun.mark("stopped" if _torchrun.rank() == 1 else "all_reduce")
            if _torchrun.rank() == 1:
                os.kill(os.getpid(), signal.SIGSTOP)
        for p in model.parameters():
            dist.all_reduce(p.grad)


if __name__ == "__main__":
    if _torchrun.is_rank():
        train()
    else:
        _torchrun.launch(__file__, 3)
