"""deadlocked: real torchrun, 3 ranks. Ranks 1 and 2 wait in ``store.wait`` (the c10d
TCPStore) for rank 0 to publish that the shared dataset cache is built; rank 0 polls for a
download that never lands (sleep-and-check loop). Looks idle - sockets and sleeps - but every
rank waits, and rank 0 is the one they wait for."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import _torchrun


def wait_for_download(path: str) -> None:
    _torchrun.mark("polling")
    while not os.path.exists(path):
        time.sleep(0.5)


def main() -> None:
    import torch.distributed as dist

    _torchrun.init()
    store = dist.distributed_c10d._get_default_store()
    if _torchrun.rank() == 0:
        wait_for_download("/nonexistent/dataset/shard-00000.tar")
        store.set("cache_ready", "1")
    else:
        _torchrun.mark("store.wait")
        store.wait(["cache_ready"], timedelta(seconds=_torchrun.LIFETIME_S))


if __name__ == "__main__":
    if _torchrun.is_rank():
        main()
    else:
        _torchrun.launch(__file__, 3)
