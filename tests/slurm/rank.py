"""A rank of the Slurm test job: takes its rank from Slurm, then blocks in a recognisable wait.

Each task prints ``READY rank N`` once it is inside ``wait_for_peers``, so the test knows every
rank is in place before diag looks.
"""

from __future__ import annotations

import os
import threading


def wait_for_peers(rank: int) -> None:
    never = threading.Event()
    token = os.environ.get("HF_TOKEN")
    if token:  # a careless log line: diag must scrub it from everything it writes
        print(f"rank {rank}: downloading weights with token {token}", flush=True)
    print(f"READY rank {rank} pid {os.getpid()}", flush=True)
    never.wait()


if __name__ == "__main__":
    wait_for_peers(int(os.environ["RANK"]))
