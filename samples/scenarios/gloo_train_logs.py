"""progressing: two ranks train (forward, backward, all_reduce of the gradients) and rank 0
logs every few steps to train.log - the healthy baseline."""

from __future__ import annotations

import logging
import os
import tempfile
import time

import _gloo

WORLD_SIZE = 2


def main() -> None:
    import torch
    import torch.distributed as dist

    _gloo.init()
    torch.set_num_threads(1)
    log = logging.getLogger("train")
    if _gloo.rank() == 0:
        path = os.path.join(os.environ.get("DIAG_SCENARIO_DIR", tempfile.gettempdir()), "train.log")
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(10**9):
        x = torch.randn(64, 256)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        if step % 10 == 0:
            log.info("step %d loss %.4f", step, loss.item())
            time.sleep(0.05)
        if step == 20:
            _gloo.mark("training")


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE)
    else:
        main()
