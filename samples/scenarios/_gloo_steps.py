"""Shared body of the step-time scenarios: gloo ranks that each compute a fixed amount of work
per step (matrix products, one intra-op thread) and then all-reduce their result, logging every
few steps - a data-parallel loop whose pace is set by the rank with the most work."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Dict

import _gloo

WORLD_SIZE = 4
PRODUCTS_PER_STEP = 100  # 256x256 matmuls: ~40 ms on one core here


def run(extra_work: Dict[int, int]) -> None:
    """One rank's loop; ``extra_work`` maps a rank to how many times the base work it does."""
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
    weights = torch.randn(256, 256) / 16
    products = PRODUCTS_PER_STEP * extra_work.get(rank, 1)
    for step in range(10**9):
        grad = forward_backward(weights, products)
        dist.all_reduce(grad)
        weights -= 1e-4 * grad
        if step % 5 == 0:
            log.info("step %d norm %.4f", step, float(weights.norm()))
            dump_flight_recorder(rank)
        if step == 6:
            _gloo.mark("stepping")


def forward_backward(weights: Any, products: int) -> Any:
    """The rank's compute of one step: ``products`` matrix products."""
    import torch

    x = torch.randn(256, 256)
    for _ in range(products):
        x = torch.tanh(x @ weights)
    return x


def dump_flight_recorder(rank: int) -> None:
    """Write this rank's Flight Recorder ring where diag looks for it (the prefix in
    TORCH_FR_DUMP_TEMP_FILE + rank), as torch does on a timeout - here every few steps, so
    a capture sees each rank's recent collectives and when it enqueued them."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not prefix:
        return
    import torch

    data = torch._C._distributed_c10d._dump_fr_trace_json(True, True)
    path = f"{prefix}{rank}"
    with open(path + ".tmp", "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
    os.replace(path + ".tmp", path)


def flight_recorder_env() -> None:
    """Turn the Flight Recorder on for the ranks (set before they start)."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "64")
    where = tempfile.mkdtemp(prefix="diag-fr-")
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", os.path.join(where, "fr_rank_"))
