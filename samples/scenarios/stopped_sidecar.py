"""progressing, with a stopped helper nobody waits on: a trainer computes and logs a step
every ~0.5 s; a metrics-uploader child it feeds through an unbounded queue (``put_nowait``)
was SIGSTOPped by someone. Training goes on - the stopped child owes it nothing. diag says
progressing and warns that the child can never wake, never "deadlocked: kill -CONT"."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import time
from typing import Any


def uploader(q: Any) -> None:
    while True:
        q.get()


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=uploader, args=(q,), name="uploader", daemon=True)
    child.start()
    time.sleep(0.5)
    os.kill(child.pid or 0, signal.SIGSTOP)
    step = 0
    while True:
        loss = sum(math.sin(i) for i in range(150000))
        step += 1
        q.put_nowait({"step": step, "loss": loss})
        print(f"step {step} loss {loss:.3f}", flush=True)
        if step == 4:
            print("READY", flush=True)
