"""A rank of the Slurm test job: takes its rank from Slurm, then blocks in a recognisable wait.

Each task prints ``READY rank N pid P`` once it is inside its wait, so the test knows every
rank is in place before diag looks. ``DIAG_TEST_ODD_RANK=K``: rank K diverges - it blocks in
``load_next_shard`` (on a queue nothing feeds) while every other rank waits in
``wait_for_peers``, as a rank stuck in its data loader holds up a collective.
"""

from __future__ import annotations

import os
import queue
import threading


def wait_for_peers(rank: int) -> None:
    never = threading.Event()
    token = os.environ.get("HF_TOKEN")
    if token:  # a careless log line: diag must scrub it from everything it writes
        print(f"rank {rank}: downloading weights with token {token}", flush=True)
    print(f"READY rank {rank} pid {os.getpid()}", flush=True)
    never.wait()


def load_next_shard(rank: int) -> None:
    shards: queue.Queue[int] = queue.Queue()
    print(f"READY rank {rank} pid {os.getpid()}", flush=True)
    shards.get()


if __name__ == "__main__":
    me = int(os.environ["RANK"])
    if os.environ.get("DIAG_TEST_ODD_RANK") == str(me):
        load_next_shard(me)
    else:
        wait_for_peers(me)
