"""``diag demo dead-rank`` (expected: deadlocked): a rank crashed; the others wait forever.

Four ranks. Rank 2 raises (the Traceback goes to the job's log) and exits with code 1; its
launcher is still waiting for rank 0, so rank 2 stays a zombie. Ranks 0, 1 and 3 wait in
``barrier`` for a rank that will never arrive: diag calls it deadlocked and names rank 2.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from diag.demo import _ranks

WORLD_SIZE = 4


def load_shard(rank: int) -> None:
    raise RuntimeError(f"rank {rank}: checkpoint shard model-0000{rank}.safetensors is truncated")


def rank_main(group: Any) -> None:
    rank = _ranks.rank()
    _ranks.mark("barrier" if rank != 2 else "crashed")
    if rank == 2:
        # crash only once every rank is started: multiprocessing reaps exited children when
        # it starts the next one, and the zombie is part of what diag shows
        _ranks.wait_for_marks([r for r in range(WORLD_SIZE) if r != 2])
        load_shard(rank)  # multiprocessing prints the Traceback; the exit code is 1
    _ranks.barrier(group)


def main() -> None:
    group = multiprocessing.get_context("spawn").Barrier(WORLD_SIZE)
    _ranks.launch(rank_main, WORLD_SIZE, (group,), wait_dead=True)


if __name__ == "__main__":
    main()
