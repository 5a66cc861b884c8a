"""Two ranks logging like NCCL + torch; one hits a CUDA error and dies: ``cuda_error_job.py DIR``.

Each rank's stdout/stderr goes to DIR/rank<N>.log (``> rank$N.log 2>&1`` under a launcher),
starting with NCCL's INFO lines (``host:pid:tid [dev] NCCL INFO ...``). When DIR/trigger
appears, rank 1 prints the traceback torch prints on an illegal memory access and exits with
code 1; the launcher never reaps it (a zombie, as under a busy launcher), while rank 0 keeps
waiting in its "collective". Prints ``READY <json>`` (rank -> pid) once both ranks logged init.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

RANK_CODE = r"""
import os, socket, sys, threading, time
rank = int(os.environ["RANK"])
host, pid, tid = socket.gethostname(), os.getpid(), threading.get_native_id()
prefix = f"{host}:{pid}:{tid} [{rank}] NCCL INFO"
print(f"{prefix} Bootstrap : Using eth0:10.0.0.{rank + 1}<0>", flush=True)
if os.environ.get("HF_TOKEN"):  # a secret that reaches a log line (tests check it never leaks)
    token = os.environ["HF_TOKEN"]
    print(f"{prefix} NET/Plugin : config url https://hub?token={token}", flush=True)
print(f"{prefix} comm 0x55d1c0 rank {rank} nranks 2 cudaDev {rank} "
      f"nvmlDev {rank} busId {rank + 1}8000 commId 0x9af1c2d3 - Init COMPLETE", flush=True)
trigger = os.path.join(os.environ["JOB_DIR"], "trigger")
while not os.path.exists(trigger):
    time.sleep(0.05)
if rank == 1:
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 88, in <module>\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    )
    sys.stderr.flush()
    sys.exit(1)
while True:
    time.sleep(1)  # rank 0: "in all_reduce", waiting for rank 1 forever
"""


def main() -> None:
    directory = sys.argv[1]
    children = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
        env["JOB_DIR"] = directory
        log = open(os.path.join(directory, f"rank{rank}.log"), "w")  # noqa: SIM115
        children.append(
            subprocess.Popen([sys.executable, "-c", RANK_CODE], env=env, stdout=log, stderr=log)
        )
    for rank in range(2):
        path = os.path.join(directory, f"rank{rank}.log")
        while "Init COMPLETE" not in open(path).read():  # noqa: SIM115
            time.sleep(0.05)
    print("READY " + json.dumps({r: c.pid for r, c in enumerate(children)}), flush=True)
    time.sleep(600)  # never wait(): the dead rank stays a zombie


if __name__ == "__main__":
    main()
