"""idle: a Ray driver between batches - its local cluster is up (gcs_server, raylet, agents,
two `ray::IDLE` workers that just ran a warm-up batch), and the driver sleeps until the next
batch is due (``time.sleep(60)``). Nothing is running; everything waits for work."""

from __future__ import annotations

import time

import ray
from _ray import init


@ray.remote
def embed(i: int) -> int:
    return i * i


def main() -> None:
    init()
    assert ray.get([embed.remote(i) for i in range(8)]) == [i * i for i in range(8)]
    time.sleep(1.0)  # let the workers go back to waiting for a task
    print("READY", flush=True)
    while True:
        time.sleep(60)  # the next batch is due in a minute
        ray.get([embed.remote(i) for i in range(8)])


if __name__ == "__main__":
    main()
