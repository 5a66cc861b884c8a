"""progressing: a Ray driver keeps both CPUs busy with pure-Python remote tasks (~1 s each),
collecting each result with ``ray.wait`` and submitting the next; the two `ray::crunch`
workers are at ~100% CPU, the driver waits in ray.wait. No log, no file written."""

from __future__ import annotations

import ray
from _ray import init


@ray.remote
def crunch(seed: int) -> int:
    total = seed
    for i in range(3_000_000):
        total = (total * 31 + i) % 1_000_003
    return total


def main() -> None:
    init()
    pending = [crunch.remote(i) for i in range(2)]
    done_count = 0
    while True:
        done, pending = ray.wait(pending, num_returns=1)
        ray.get(done)
        done_count += 1
        if done_count == 2:
            print("READY", flush=True)  # both workers have run a task; more are running
        pending.append(crunch.remote(done_count))


if __name__ == "__main__":
    main()
