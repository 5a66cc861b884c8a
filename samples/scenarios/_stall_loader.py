"""A DataLoader-style consumer and its producer process over a ``multiprocessing.Queue``: the
consumer polls ``get(timeout=1)`` and logs each batch; while none comes it logs how long it has
waited, every 5 s ("data loader slow: no batch for 25 s") - a stall clock. READY once the
state under test has been logged a few times."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import signal
import tempfile
import time

LIFETIME_S = 600  # SIGALRM's default action ends both processes then, whatever happens


def _produce(batches: mp.Queue[int], killed: bool) -> None:
    signal.alarm(LIFETIME_S)
    for i in range(20):
        batches.put(i)
        time.sleep(0.05)
    if killed:
        os.kill(os.getpid(), signal.SIGKILL)  # "Killed" - out of memory on batch 21
    while True:
        time.sleep(2.0)  # a steady producer: one batch every 2 s
        batches.put(0)


def run(killed: bool) -> None:
    signal.alarm(LIFETIME_S)
    logging.basicConfig(
        filename=os.path.join(tempfile.mkdtemp(prefix="diag-loader-"), "loader.log"),
        level=logging.INFO,
        format="%(asctime)s %(message)s",
    )
    ctx = mp.get_context("fork")
    batches: mp.Queue[int] = ctx.Queue(maxsize=4)
    ctx.Process(target=_produce, args=(batches, killed), name="loader-0").start()
    step = misses = logged = 0
    waited_since = time.monotonic()
    while True:
        try:
            batches.get(timeout=1.0)
        except queue.Empty:
            misses += 1
            if misses % 5 == 0:
                logging.info("data loader slow: no batch for %d s", misses)
                logged += 1
        else:
            step += 1
            if step > 20:  # the steady phase: how long each batch took to come
                logging.info("got a batch after %.1f s", time.monotonic() - waited_since)
                logged += 1
            waited_since = time.monotonic()
            misses = 0
        if logged == 3:
            print("READY", flush=True)
