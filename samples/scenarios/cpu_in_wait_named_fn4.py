"""slow: a single process, no torch, no peers, averages "gradients" in a pure-Python function
the user named ``all_reduce()``. Its hot loop sits on one line, so every sample shows the same
innermost frame and line at ~100% of a core, RSS flat, no log. A function named like a
collective in the job's own file is no collective: CPU-bound work - not "spins in a wait",
not "deadlocked, kill the job"."""

from __future__ import annotations

import random
from typing import List

N = 1_000_000
g0, g1, g2, g3 = ([random.random() for _ in range(N)] for _ in range(4))


def all_reduce(out: List[float]) -> None:
    # One line on purpose: every sample shows `all_reduce` at this line, as a wait would.
    for i in range(N): out[i] = (g0[i] + g1[i] + g2[i] + g3[i]) * 0.25  # fmt: skip  # noqa: E701


def synchronize(out: List[float]) -> None:
    all_reduce(out)


def main() -> None:
    out = [0.0] * N
    print("READY", flush=True)
    while True:
        synchronize(out)


if __name__ == "__main__":
    main()
