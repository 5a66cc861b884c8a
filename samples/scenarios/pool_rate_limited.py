"""slow, not "deadlocked: ... nothing computes them - a task was lost (a worker killed ...);
kill and rerun": a ``multiprocessing.Pool`` maps over an API with a rate limit - each task sleeps
the provider's Retry-After (45 s) before its call - and the main process waits in
``AsyncResult.get``. Every worker that holds a task sleeps in a timed wait the kernel says ends
within a minute: the results come when they wake. Contrast: ``pool_lost_task`` (a worker
SIGKILLed mid-task: deadlocked)."""

from __future__ import annotations

import multiprocessing as mp
import signal
import time

LIFETIME_S = 600  # SIGALRM's default action ends the processes then, whatever happens


def fetch(i: int) -> int:
    time.sleep(45.0)  # the provider's Retry-After
    return i


if __name__ == "__main__":
    signal.alarm(LIFETIME_S)
    with mp.get_context("fork").Pool(3) as pool:
        result = pool.map_async(fetch, range(30))
        time.sleep(2.0)
        print("READY", flush=True)
        result.get()
