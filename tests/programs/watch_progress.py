"""A job that makes progress: CPU work per step, one log line per step to the file in argv[1].

Prints READY once the first step is logged, so a watch started then sees it moving.
"""

from __future__ import annotations

import sys
import time


def step(n: int) -> int:
    return sum(i * i for i in range(60_000 + n % 7))


def main() -> None:
    with open(sys.argv[1], "a", buffering=1) as log:
        for n in range(10**9):
            log.write(f"step {n} value {step(n)}\n")
            if n == 0:
                print("READY", flush=True)
            time.sleep(0.02)


if __name__ == "__main__":
    main()
