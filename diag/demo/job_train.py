"""``diag demo train`` (expected: progressing): a healthy training loop that logs.

Two ranks run pure-Python "steps" and meet in ``all_reduce`` after each one; rank 0 prints
a step line (loss, throughput) every 0.2 s to the job's log. Ranks caught inside the
collective are not stuck - the log keeps growing and the stacks change - so diag calls it
progressing.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from diag.demo import _ranks

WORLD_SIZE = 2
STEP_S = 0.2


def forward_backward(step: int) -> float:
    """Burn about half a step of CPU in pure Python; returns a made-up loss."""
    end = time.monotonic() + STEP_S / 2
    acc = 0.0
    while time.monotonic() < end:
        for i in range(500):
            acc += i * i * 1e-12
    return 2.5 / (1 + step * 0.01) + acc * 0


def rank_main(group: Any) -> None:
    rank = _ranks.rank()
    for step in range(1, 1_000_000):
        started = time.monotonic()
        loss = forward_backward(step)
        _ranks.all_reduce(group)
        if step == 3:
            _ranks.mark("training")
        time.sleep(max(0.0, STEP_S - (time.monotonic() - started)))
        if rank == 0:
            print(f"step {step} loss {loss:.4f} {1 / STEP_S:.1f} it/s", flush=True)


def main() -> None:
    group = multiprocessing.get_context("spawn").Barrier(WORLD_SIZE)
    _ranks.launch(rank_main, WORLD_SIZE, (group,))


if __name__ == "__main__":
    main()
