"""deadlocked, though it polls: the prefetch thread died with an exception ("Exception in
thread prefetch" in the log), and the training loop polls the queue it fed with
``get(timeout=1)``, continuing on Empty - a timed wait that wakes every second and will never
be satisfied: a thread queue is filled only by threads of its own process, and the loop's is
the only one left. By its stacks: a loop polling a queue on a timer - the picture of idle."""

from __future__ import annotations

import queue
import threading
from typing import List

batches: queue.Queue[List[int]] = queue.Queue(maxsize=4)


def prefetch() -> None:
    for i in range(10):
        if i == 6:
            raise OSError("Input/output error reading shard-00006.tar")
        batches.put([i] * 1000)


def next_batch() -> List[int]:
    while True:
        try:
            return batches.get(timeout=1.0)
        except queue.Empty:
            continue


if __name__ == "__main__":
    threading.Thread(target=prefetch, name="prefetch", daemon=True).start()
    step = 0
    while True:
        next_batch()
        step += 1
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        if step == 6:
            print("READY", flush=True)
