"""slow (the spinning rank is the suspect): real torchrun, 3 gloo ranks. Rank 1 spins in a
pure-Python loop waiting for a flag that is never set (a livelock: 100% CPU, a stack that
barely changes) while ranks 0 and 2 wait for it in ``barrier``. CPU alone cannot tell this from
a long computation, so the verdict names the busy rank and the ranks waiting for it."""

from __future__ import annotations

import _torchrun


class Prefetcher:
    def __init__(self) -> None:
        self.done = False

    def ready(self) -> bool:
        return self.done


def wait_for_prefetch(prefetcher: Prefetcher) -> None:
    _torchrun.mark("spinning")
    while not prefetcher.ready():  # nobody ever sets done
        pass


def main() -> None:
    import torch.distributed as dist

    _torchrun.init()
    if _torchrun.rank() == 1:
        wait_for_prefetch(Prefetcher())
    else:
        _torchrun.mark("barrier")
    dist.barrier()


if __name__ == "__main__":
    if _torchrun.is_rank():
        main()
    else:
        _torchrun.launch(__file__, 3)
