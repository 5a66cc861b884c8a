"""Ranks started the tutorial way: ``Process(target=run, args=(rank, size)).start()`` in a
loop, RANK set with ``os.environ`` inside the child (invisible in /proc/P/environ).

``mp_ranks.py fork|spawn|pool SIZE [DEAD_RANK]``: ``fork``/``spawn`` pick the start method;
DEAD_RANK exits with code 2 at once and stays a zombie (the parent never joins it). ``pool``
starts a multiprocessing.Pool of SIZE workers instead (not ranks). Prints ``READY <json>``
(rank -> pid, or the pool's worker pids) when every live child has reported in.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from typing import Any


def run(rank: int, size: int, dead: int, queue: mp.Queue[int], all_started: Any) -> None:
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(size)
    if rank == dead:
        # Exit only once every sibling is started: Process.start() reaps finished children,
        # and a dead rank reaped that early is no zombie (the parent then never got READY).
        all_started.wait()
        sys.exit(2)
    queue.put(rank)
    time.sleep(600)


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


def main() -> None:
    mode, size = sys.argv[1], int(sys.argv[2])
    dead = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    if mode == "pool":
        pool = mp.get_context("fork").Pool(size)
        pool.map_async(time.sleep, [600] * size)
        pids = [p.pid for p in pool._pool]  # type: ignore[attr-defined]
        time.sleep(0.5)
        print("READY " + json.dumps(pids), flush=True)
        time.sleep(600)
        return
    ctx = mp.get_context(mode)
    queue = ctx.Queue()
    all_started = ctx.Event()
    procs = [ctx.Process(target=run, args=(r, size, dead, queue, all_started)) for r in range(size)]
    for proc in procs:
        proc.start()
    all_started.set()
    for _ in range(size - (1 if dead >= 0 else 0)):
        queue.get()
    if dead >= 0:
        while state_of(procs[dead].pid or 0) != "Z":
            time.sleep(0.01)
    print("READY " + json.dumps({r: p.pid for r, p in enumerate(procs)}), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
