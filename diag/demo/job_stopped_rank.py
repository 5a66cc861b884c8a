"""``diag demo stopped-rank`` (expected: deadlocked): a rank is stopped (SIGSTOP).

Three ranks train and meet in ``all_reduce`` every step; at step 5 rank 1 stops itself with
SIGSTOP (as a debugger, a ``kill -STOP`` or a frozen container would), state T. Ranks 0 and 2
wait in ``all_reduce`` for it forever: diag calls it deadlocked and names rank 1.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

from diag.demo import _ranks

WORLD_SIZE = 3
STOP_AT_STEP = 5


def rank_main(group: Any) -> None:
    rank = _ranks.rank()
    for step in range(1, 1_000_000):
        time.sleep(0.05)  # the "step"
        if step == STOP_AT_STEP:
            _ranks.mark("stopped" if rank == 1 else "all_reduce")
            if rank == 1:
                os.kill(os.getpid(), signal.SIGSTOP)
        _ranks.all_reduce(group)


def main() -> None:
    group = multiprocessing.get_context("spawn").Barrier(WORLD_SIZE)
    _ranks.launch(rank_main, WORLD_SIZE, (group,), wait_stopped=True)


if __name__ == "__main__":
    main()
