"""deadlocked: a driver on a CPU-only local Ray cluster submits its embedding step as a task
that asks for a GPU (``num_gpus=1``, copied from the cluster config it ran on) and waits for it
in ``ray.get`` with no timeout. No node has a GPU: Ray's scheduler can never place the task,
and says so on the driver's output ("No available node types can fulfill resource request
{'GPU': 1.0}"), which the driver sends to its log. Nothing computes and nothing ever will.

``run(gpus=0)`` (ray_task_fits.py): the contrast - the same step asks for one CPU, is placed
and computes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

import ray
from _ray import init

WAIT_FOR_LINE_S = 30.0  # Ray reports an infeasible request a few seconds after submission


@ray.remote
def embed(shard: int) -> str:
    digest = hashlib.sha256()
    for i in range(10**9):  # a long CPU-bound step
        digest.update(f"{shard}:{i}".encode())
    return digest.hexdigest()


def run(gpus: int) -> None:
    log_path = os.path.join(tempfile.mkdtemp(prefix="ray-embed-"), "driver.log")
    log = open(log_path, "a", buffering=1)  # noqa: SIM115
    ready = os.fdopen(os.dup(1), "w")  # READY still goes to whoever started the driver
    for fd in (1, 2):  # the driver's output (Ray's scheduler messages among it) to its log
        os.dup2(log.fileno(), fd)
    init()
    step = embed.options(num_gpus=gpus) if gpus else embed.options(num_cpus=1)
    ref = step.remote(0)  # type: ignore[attr-defined]
    deadline = time.monotonic() + WAIT_FOR_LINE_S
    while gpus and time.monotonic() < deadline:
        with open(log_path, errors="replace") as f:
            if "fulfill resource request" in f.read():
                break
        time.sleep(0.2)
    time.sleep(2.0)
    print("READY", file=ready, flush=True)
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    run(gpus=1)
