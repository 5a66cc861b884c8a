"""Shared body of the pipeline scenarios: two gloo ranks, each one stage of a model split in
two, exchanging activations forward and gradients backward with point-to-point calls (stage
0 ``isend``s its activation and waits on it, stage 1 ``recv``s it; the gradient comes back the
same way) - a hand-written 1F1B of one micro-batch. The last stage logs its steps."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Dict

import _gloo

PRODUCTS_PER_LAYER = 12  # 256x256 matmuls per layer: ~5 ms on one core here
WORLD_SIZE = 2


def run(layers: Dict[int, int]) -> None:
    """One stage's loop; ``layers`` maps a stage to how many layers it holds."""
    import torch
    import torch.distributed as dist

    _gloo.init()
    torch.set_num_threads(1)
    stage = _gloo.rank() or 0
    log = logging.getLogger("train")
    if stage == WORLD_SIZE - 1:
        where = os.environ.get("DIAG_SCENARIO_DIR", tempfile.gettempdir())
        handler = logging.FileHandler(os.path.join(where, "train.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    weights = torch.randn(256, 256) / 16
    products = PRODUCTS_PER_LAYER * layers.get(stage, 1)
    act = torch.empty(256, 256)
    grad = torch.empty(256, 256)
    for step in range(10**9):
        if stage == 0:
            out = layer_stack(torch.randn(256, 256), weights, products)  # forward
            dist.isend(out, dst=1).wait()
            dist.recv(grad, src=1)
            weights -= 1e-4 * layer_stack(grad, weights, products)  # backward
        else:
            dist.recv(act, src=0)
            out = layer_stack(act, weights, products)
            back = layer_stack(out, weights, products)
            req = dist.isend(back, dst=0)
            req.wait()
            if step % 5 == 0:
                log.info("step %d norm %.4f", step, float(out.norm()))
        if step == 6:
            _gloo.mark("stepping")


def layer_stack(x: Any, weights: Any, products: int) -> Any:
    """A stage's layers: ``products`` matrix products."""
    import torch

    for _ in range(products):
        x = torch.tanh(x @ weights)
    return x
