"""``diag demo diverged`` (expected: deadlocked): one rank took another code path.

Four ranks. Ranks 0-2 wait in ``all_reduce`` for rank 3, which went off to
``refresh_cache`` and polls forever for a flag file no one will write (the uploader it waits
for died). Nothing moves and nothing will: diag calls it deadlocked and names rank 3, the
one rank not in the collective the others wait in.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from diag.demo import _ranks

WORLD_SIZE = 4


def refresh_cache() -> None:
    """Wait for a cache upload whose uploader died: the flag never appears."""
    flag = _ranks.work_dir() / "cache.uploaded"
    _ranks.mark("refresh_cache")
    while not flag.exists():
        time.sleep(0.5)


def rank_main(group: Any) -> None:
    if _ranks.rank() == 3:
        refresh_cache()
    else:
        _ranks.mark("all_reduce")
    _ranks.all_reduce(group)


def main() -> None:
    group = multiprocessing.get_context("spawn").Barrier(WORLD_SIZE)
    _ranks.launch(rank_main, WORLD_SIZE, (group,))


if __name__ == "__main__":
    main()
