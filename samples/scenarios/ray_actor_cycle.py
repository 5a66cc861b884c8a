"""deadlocked: two Ray actors call each other synchronously - ``A.ping`` waits in ``ray.get``
for ``B.pong``, which waits for ``A.back``; each actor runs one call at a time, so ``A.back``
is queued behind the ``A.ping`` that waits for it. Nothing died, nothing computes: both actor
processes (``ray::A.ping``, ``ray::B.pong``) and the driver wait for results. It read "a task
was lost (a worker killed, e.g. by the OOM killer)" - the cause is the nested calls.

``run(concurrency=2)`` (ray_actor_calls_back.py): the contrast - A may run two calls at once,
``A.back`` runs beside ``A.ping``, and the driver's loop goes on, round trips back to back.
"""

from __future__ import annotations

import sys
import time

import ray
from _ray import init


@ray.remote
class A:
    def __init__(self) -> None:
        self.b: object = None

    def set(self, b: object) -> None:
        self.b = b

    def ping(self) -> int:
        return int(ray.get(self.b.pong.remote()))  # type: ignore[attr-defined]

    def back(self) -> int:
        return 1


@ray.remote
class B:
    def __init__(self, a: object) -> None:
        self.a = a

    def pong(self) -> int:
        return int(ray.get(self.a.back.remote()))  # type: ignore[attr-defined]


def run(concurrency: int) -> None:
    init()
    a = A.options(max_concurrency=concurrency).remote()  # type: ignore[attr-defined]
    b = B.remote(a)  # type: ignore[attr-defined]
    ray.get(a.set.remote(b))
    first = a.ping.remote()
    time.sleep(3.0)  # both actors are in their calls (or the first round trip is done)
    print("READY", flush=True)
    ray.get(first)
    for n in range(10**9):  # round trips back to back, a line every 20
        got = ray.get(a.ping.remote())
        if n % 20 == 0:
            print(f"round trip {n}: {got}", flush=True)


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
