"""idle: rank 0 runs a helper script (``subprocess.run``) that polls on a timer for something
that has not come yet - a file, a lock, a host - while ranks 1-2 wait for rank 0 in a
``multiprocessing.Barrier`` (a futex shared between processes). Read by their own waits alone,
nothing can wake the ranks ("deadlocked: waiting on each other"); the chain of waits goes
ranks 1-2 → (shared lock) → the launcher's family → rank 0 → (child) → the helper, asleep on a
timer: whether it is healthy depends on what the helper polls for, and that is where to look."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys

HELPER = "import time\nwhile True:\n    time.sleep(0.5)  # polls for a file that is not there yet\n"


def rank(r: int, barrier: mp.synchronize.Barrier) -> None:
    if r == 0:
        subprocess.run([sys.executable, "-c", HELPER], check=False)
    barrier.wait()


if __name__ == "__main__":
    barrier = mp.Barrier(3)
    procs = [mp.Process(target=rank, args=(r, barrier)) for r in range(3)]
    for p in procs:
        p.start()
    print("READY", flush=True)
    for p in procs:
        p.join()
