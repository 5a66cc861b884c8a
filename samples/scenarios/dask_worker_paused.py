"""slow (paused for memory): a Dask client waits for ten tasks on a LocalCluster whose only
worker paused itself: an earlier task leaked ~87% of the worker's memory limit into a module
global (unmanaged memory: spilling cannot free it), distributed's memory monitor logged "Worker
is at N% memory usage. Pausing worker." and runs no task until memory falls below its
``distributed.worker.memory.pause`` threshold (0.80 of the limit). A wait with a party -
memory - that can end it, not an idle cluster.

Its output (and the worker's, which inherits it) goes to ``dask.log`` in a temporary
directory, as a job's ``> job.log 2>&1`` does; READY goes to the original stdout.

``--running``: the contrast - the same cluster computes a stream of small tasks and the client
logs each result (progressing).
``--cli``: the scheduler and the worker are ``dask scheduler`` / ``dask worker --memory-limit
600MiB`` processes whose output goes nowhere diag can read (``/dev/null``, as a container's
stdout pipe): the pause is known only by the worker's memory against its limit."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import List

LIMIT_BYTES = 600 * 2**20


def leak_to(fraction: float) -> int:
    """Grow this worker's RSS to ``fraction`` of its memory limit with memory dask does not
    manage (a module global), as a leaking library would; returns the RSS reached."""
    import builtins

    import psutil

    # held by the interpreter (builtins), not by the task: cloudpickle ships this function
    # by value, so a global of this module would die with the task.
    leak: List[bytearray] = builtins.__dict__.setdefault("_diag_leak", [])
    rss = psutil.Process().memory_info().rss
    need = int(fraction * LIMIT_BYTES) - rss
    if need > 0:
        leak.append(bytearray(b"\x01") * need)  # touched: resident
    return int(psutil.Process().memory_info().rss)


def work(i: int) -> int:
    total = 0
    for k in range(200_000):
        total += k * i
    return total


def paused_status(client: object) -> bool:
    info = client.scheduler_info()  # type: ignore[attr-defined]
    return any(w.get("status") == "paused" for w in info["workers"].values())


def cli_cluster() -> object:
    """`dask scheduler` and `dask worker` processes (children of this client), their output
    discarded; the client once the worker has joined."""
    import subprocess

    from dask.distributed import Client

    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    info = os.path.join(tempfile.mkdtemp(prefix="diag-dask-"), "scheduler.json")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    common = ["--scheduler-file", info]
    subprocess.Popen([dask, "scheduler", "--port", "0", "--no-dashboard", *common], **quiet)
    while not os.path.exists(info):
        time.sleep(0.1)
    worker = [dask, "worker", *common, "--nworkers", "1", "--nthreads", "2", "--no-dashboard"]
    subprocess.Popen([*worker, "--memory-limit", str(LIMIT_BYTES)], **quiet)
    client = Client(scheduler_file=info)
    client.wait_for_workers(1, timeout=60)
    return client


def main() -> None:
    ready = os.fdopen(os.dup(1), "w")
    log = os.path.join(tempfile.mkdtemp(prefix="diag-dask-"), "dask.log")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    from dask.distributed import Client, LocalCluster

    if "--cli" in sys.argv:
        client: Client = cli_cluster()  # type: ignore[assignment]
    else:
        cluster = LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=True,
            memory_limit=LIMIT_BYTES,
            dashboard_address=None,
        )
        client = Client(cluster)
    if "--running" in sys.argv:
        print("READY", flush=True, file=ready)
        i = 0
        while True:
            for f in client.map(work, range(i, i + 4)):
                print("task result", f.result(), flush=True)
            i += 4
    client.submit(leak_to, 0.87, pure=False).result()
    deadline = time.monotonic() + 60
    while not paused_status(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    futures = client.map(work, range(10))
    time.sleep(0.5)
    print("READY", "paused" if paused_status(client) else "running", flush=True, file=ready)
    print(sum(client.gather(futures)))


if __name__ == "__main__":
    main()
