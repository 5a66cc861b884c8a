"""deadlocked: a home-grown launcher starts two ranks; rank 1 is SIGKILLed (the OOM killer, in
real life) and the launcher reaps it and logs torchrun's line - ``failed (exitcode: -9)
local_rank: 1 (pid: N)`` - but, unlike torchrun, never tears the job down. Rank 0 busy-polls
for rank 1's contribution, burning a core in ``wait_for_peer``: it looks CPU-bound (slow), yet
the rank it waits for is gone for good and only the log says which one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

RANK_PROGRAM = r"""
import os, sys, time

def wait_for_peer(flag):
    # A busy poll for the peer's shard (a spin, as a shared-memory all-reduce does).
    spins = 0
    while not os.path.exists(flag):
        spins += 1
    return spins

def main():
    flag = sys.argv[1]
    if os.environ["RANK"] == "0":
        wait_for_peer(flag)
    else:
        time.sleep(10**6)  # never gets to write its shard: it is killed first

main()
"""


def main() -> None:
    work = tempfile.mkdtemp(prefix="diag-lost-rank-")
    log = open(os.path.join(work, "launcher.log"), "a", buffering=1)  # noqa: SIM115
    flag = os.path.join(work, "rank1.shard")
    ranks = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
        ranks.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK_PROGRAM, flag], env=env, stdout=log, stderr=log
            )
        )
    log.write(f"launcher: started ranks {[p.pid for p in ranks]}\n")
    time.sleep(1.0)
    victim = ranks[1]
    os.kill(victim.pid, signal.SIGKILL)
    code = victim.wait()  # reaped: no zombie is left for anyone to see
    log.write(
        f"[E1201 10:00:00.000 launcher.py:88] failed (exitcode: {code}) local_rank: 1 "
        f"(pid: {victim.pid}) of binary: {sys.executable}\n"
    )
    print("READY", flush=True)
    os.dup2(log.fileno(), 1)  # from here the launcher's own output goes to its log too
    while True:
        time.sleep(5)  # a launcher that never notices the job cannot finish


if __name__ == "__main__":
    main()
