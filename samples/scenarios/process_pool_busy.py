"""slow: a ProcessPoolExecutor whose workers are CPU-bound on long tasks while the parent
waits in ``Future.result`` - quiet (no output until the batch ends), but working."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import time


def simulate_rollout(seed: int) -> int:
    state = seed
    for _ in range(10**10):  # hours of pure-Python work per task
        state = (state * 1103515245 + 12345) % (1 << 31)
    return state


def main() -> None:
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        pool.submit(int).result()  # workers are up
        futures = [pool.submit(simulate_rollout, s) for s in range(2)]
        time.sleep(0.5)
        print("READY", flush=True)
        print(sum(f.result() for f in futures))


if __name__ == "__main__":
    main()
