"""deadlocked: a multiprocessing.Pool worker is SIGKILLed mid-task (the OOM killer's way);
the pool quietly replaces it, the task is lost, and the parent waits in ``AsyncResult.get``
forever while every worker sits idle on the empty task queue."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time


def shard_stats(shard: int) -> int:
    if shard == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does to a big shard
    return sum(i * shard for i in range(10_000))


def main() -> None:
    with mp.get_context("fork").Pool(3) as pool:
        results = [pool.apply_async(shard_stats, (s,)) for s in range(6)]
        time.sleep(1.5)  # the killed worker is replaced; the other shards are done
        print("READY", flush=True)
        print(sum(r.get() for r in results))  # shard 3 never comes back


if __name__ == "__main__":
    main()
