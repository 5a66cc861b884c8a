"""A launcher with RANK-carrying children, like torchrun: ``rank_job.py WORLD [ZOMBIE_RANK]``.

Each child gets RANK, LOCAL_RANK, WORLD_SIZE in its environment at exec time (as torchrun does)
and blocks reading a pipe. With ZOMBIE_RANK, that rank exits with code 3 right away and the
launcher never reaps it: it stays a zombie, as a dead rank does under a launcher that is busy
elsewhere. SIGUSR1 makes the launcher reap its dead children (the zombie then disappears: an
"exited" rank). Prints ``READY <json>`` (rank -> pid) when every live child has said hello and the
zombie is one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

CHILD = (
    "import os, sys, time\n"
    "print('hello', flush=True)\n"
    "if os.environ.get('EXIT_NOW'): sys.exit(3)\n"
    "time.sleep(600)\n"
)


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


def reap(_signum: int, _frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    signal.signal(signal.SIGUSR1, reap)
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    zombie_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    children = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
        if rank == zombie_rank:
            env["EXIT_NOW"] = "1"
        children.append(
            subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE)
        )
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
    if zombie_rank >= 0:
        while state_of(children[zombie_rank].pid) != "Z":
            time.sleep(0.01)
    print("READY " + json.dumps({r: c.pid for r, c in enumerate(children)}), flush=True)
    time.sleep(600)  # never wait(): the zombie stays


if __name__ == "__main__":
    main()
