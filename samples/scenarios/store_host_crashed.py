"""deadlocked: a home-grown launcher starts 3 gloo ranks on one host and tags each rank's
output lines ``[rankN]:`` into job.log, as torchrun does. Rank 0, which hosts the c10d store
(MASTER_ADDR is loopback), fails reading its config before ``init_process_group`` and exits 1
with a traceback; the launcher reaps it and keeps waiting for the others. Ranks 1-2 retry
connecting to a store that will never come up: the wait looks like "the master is late", the
log and the launcher say it is dead.

``launch(late=True)`` (store_host_late.py): the contrast. Rank 0 is merely late - it waits
for its own slow start until after READY, comes up during the capture, and the three meet and
train, logging steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import IO, TextIO

from _gloo import free_port

WORLD = 3
LATE_S = 1.5  # the late host comes up this long after READY: inside the capture


def rank_main(rank: int) -> None:
    import torch
    import torch.distributed as dist

    go = Path(os.environ["MARK_DIR"], "go")
    if rank == 0 and os.environ.get("LATE"):
        while not go.exists():  # its own slow start (a download, a config service)
            time.sleep(0.2)
    if rank == 0 and os.environ.get("CONFIG_PATH"):
        cfg = Path(os.environ["CONFIG_PATH"])
        settings = dict(line.split("=", 1) for line in cfg.read_text().splitlines())
        print(f"lr={settings['lr']}", flush=True)
    Path(os.environ["MARK_DIR"], f"rank{rank}").write_text("")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timedelta(seconds=600))
    grad = torch.ones(4)
    for step in range(1, 10**6):
        dist.all_reduce(grad)
        if rank == 0:
            print(f"step {step} loss={1.0 / step:.4f}", flush=True)
        time.sleep(0.3)


def pump(rank: int, stream: IO[bytes], log: TextIO) -> None:
    """The launcher's tee: every line of a rank's output, tagged with its rank."""
    for raw in iter(stream.readline, b""):
        log.write(f"[rank{rank}]: {raw.decode(errors='replace')}")


def launch(late: bool) -> None:
    work = tempfile.mkdtemp(prefix="diag-store-host-")
    log = open(os.path.join(work, "job.log"), "a", buffering=1)  # noqa: SIM115
    env = dict(
        os.environ,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(WORLD),
        MARK_DIR=work,
        PYTHONUNBUFFERED="1",
    )
    if late:
        env["LATE"] = "1"
    else:
        env["CONFIG_PATH"] = os.path.join(work, "missing.cfg")  # never written
    procs = {}

    def start(rank: int) -> None:
        p = subprocess.Popen(
            [sys.executable, __file__, str(rank)],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        procs[rank] = p
        threading.Thread(target=pump, args=(rank, p.stdout, log), daemon=True).start()

    for rank in range(WORLD):
        start(rank)
    deadline = time.monotonic() + 240
    while not all(Path(work, f"rank{r}").exists() for r in range(1, WORLD)):
        if time.monotonic() > deadline:
            sys.exit("scenario: ranks never started")
        time.sleep(0.1)
    if not late:
        procs[0].wait()  # reaped: rank 0 leaves no zombie, only its traceback and exit status
    time.sleep(2.0)  # the joiners are in their connect loop
    print("READY", flush=True)
    if late:
        time.sleep(LATE_S)
        Path(work, "go").write_text("")
    for rank in range(1, WORLD):
        procs[rank].wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].isdigit():
        rank_main(int(sys.argv[1]))
    else:
        launch(late=False)
