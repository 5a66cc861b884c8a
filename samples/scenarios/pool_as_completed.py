"""progressing or slow: a build step compiles many small units in a ProcessPoolExecutor
(pure-Python CPU work); the parent collects them with ``as_completed`` and reports each."""

from __future__ import annotations

import concurrent.futures as cf
import sys


def compile_unit(n: int) -> int:
    total = 0
    for i in range(1_500_000):
        total = (total * 31 + i + n) % 1_000_003
    return total


def main() -> None:
    with cf.ProcessPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(compile_unit, n) for n in range(100_000)]
        for done, fut in enumerate(cf.as_completed(futures), 1):
            print(f"compiled unit {done}: {fut.result()}", flush=True)
            if done == 2:
                print("READY", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
