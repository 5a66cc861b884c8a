"""deadlocked: ranks 0,1 enter all_reduce while rank 2 enters barrier - a mismatched
collective (one rank skipped an all_reduce behind a rank-dependent `if`)."""

from __future__ import annotations

import _gloo

WORLD_SIZE = 3


def sync_metrics() -> None:
    import torch
    import torch.distributed as dist

    if _gloo.rank() == 2:  # "rank 2 has no metrics this step" - a classic divergence
        _gloo.mark("barrier")
        dist.barrier()
    else:
        metrics = torch.zeros(16)
        _gloo.mark("all_reduce")
        dist.all_reduce(metrics)


def main() -> None:
    _gloo.init()
    sync_metrics()


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE)
    else:
        main()
