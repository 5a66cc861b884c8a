"""deadlocked: a consumer waits in ``Queue.get`` for batches from a producer process that was
SIGKILLed (the OOM killer's way) and never reaped - a zombie child, a queue that will never
fill, no port, no timer."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time


def produce(batches: mp.Queue[int]) -> None:
    for i in range(5):
        batches.put(i)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # "Killed" - out of memory on batch 6


def consume() -> None:
    ctx = mp.get_context("fork")
    batches: mp.Queue[int] = ctx.Queue()
    producer = ctx.Process(target=produce, args=(batches,), name="producer")
    producer.start()
    for _ in range(5):
        batches.get()
    time.sleep(1.0)  # the producer is dead by now
    print("READY", flush=True)
    while True:
        batches.get()  # batch 6 never comes


if __name__ == "__main__":
    consume()
