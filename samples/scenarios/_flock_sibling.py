"""Two worker processes of one job share a cache's lock file (``flock``): the first takes it
and then sleeps or computes while holding it; the second blocks taking it; the parent joins
both. READY once the second blocks."""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import signal
import tempfile
import time

LIFETIME_S = 600  # SIGALRM's default action ends the processes then, whatever happens


def _holder(path: str, sleeps: bool, took: mp.synchronize.Event) -> None:
    signal.alarm(LIFETIME_S)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        took.set()
        if sleeps:
            time.sleep(3600)  # waits an hour for a download it forgot was cancelled
        deadline, x = time.monotonic() + LIFETIME_S, 0
        while time.monotonic() < deadline:  # builds the cache in pure Python
            x = (x * 7 + 1) % 999983


def _waiter(path: str, took: mp.synchronize.Event) -> None:
    signal.alarm(LIFETIME_S)
    took.wait()
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)


def run(sleeps: bool) -> None:
    signal.alarm(LIFETIME_S)
    path = os.path.join(tempfile.mkdtemp(prefix="diag-flock-"), "cache.lock")
    ctx = mp.get_context("fork")
    took = ctx.Event()
    holder = ctx.Process(target=_holder, args=(path, sleeps, took), name="cache-writer")
    holder.start()
    waiter = ctx.Process(target=_waiter, args=(path, took), name="cache-reader")
    waiter.start()
    took.wait()
    time.sleep(1.0)
    print("READY", flush=True)
    waiter.join()
    holder.join()
