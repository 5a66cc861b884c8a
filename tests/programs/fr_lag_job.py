"""A gloo job on CPU where one rank never reaches the last all_reduce: ``fr_lag_job.py DIR [N]``.

A launcher (like torchrun) starts N ranks (default 3) with RANK/LOCAL_RANK/WORLD_SIZE/MASTER_*
and TORCH_FR_DUMP_TEMP_FILE=DIR/fr_rank_ in their environment. Every rank runs 3 all_reduces
and a barrier with Flight Recorder on; then the last rank (the laggard) goes to "load data"
(sleeps) while the others enter all_reduce #5, which can never complete. Each rank writes its
Flight Recorder dump to DIR/fr_rank_<rank> the way torch does on a timeout - even ranks as
JSON, odd ranks as a pickle - before blocking. The launcher prints ``READY <json>`` (rank ->
pid) once every dump exists, and then waits on its children.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

RANK_CODE = r"""
import os, sys, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
t = torch.ones(8)
for _ in range(3):
    dist.all_reduce(t)
dist.barrier()
laggard = rank == world - 1
work = None
if not laggard:
    work = dist.all_reduce(t, async_op=True)  # collective #5: the laggard never joins
c10d = torch._C._distributed_c10d
path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
if rank % 2 == 0:
    data = c10d._dump_fr_trace_json(True, True)
    data = data.encode() if isinstance(data, str) else data
else:
    data = c10d._dump_fr_trace(True, True)
with open(path + ".tmp", "wb") as fh:
    fh.write(data)
os.rename(path + ".tmp", path)
if work is not None:
    work.wait()  # blocks: a rank waiting in all_reduce for a peer that never comes
while True:
    time.sleep(1)  # the laggard, "still loading data"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    directory = sys.argv[1]
    world = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    port = free_port()
    prefix = os.path.join(directory, "fr_rank_")
    children = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            TORCH_FR_BUFFER_SIZE="64",
            TORCH_FR_DUMP_TEMP_FILE=prefix,
            OMP_NUM_THREADS="1",
        )
        children.append(subprocess.Popen([sys.executable, "-c", RANK_CODE], env=env))
    deadline = time.monotonic() + 120
    while not all(os.path.exists(f"{prefix}{r}") for r in range(world)):
        if any(c.poll() is not None for c in children) or time.monotonic() > deadline:
            print("FAILED: a rank exited or the dumps did not appear", flush=True)
            for c in children:
                c.kill()
            sys.exit(1)
        time.sleep(0.1)
    print("READY " + json.dumps({r: c.pid for r, c in enumerate(children)}), flush=True)
    for child in children:
        child.wait()


if __name__ == "__main__":
    main()
