"""deadlocked: a home-made launcher starts 3 ranks with ``stdout=PIPE`` and then stops
reading (it waits for rank 0 to exit first); every rank fills its 64 KB pipe with log lines
and blocks in ``write`` - the whole job hangs on a pipe nobody drains."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

RANK_CODE = """
import sys
for step in range(10**7):
    print(f"step {step}: loss=0.123 lr=3e-4 " + "." * 80)
"""


def launch(world_size: int) -> int:
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK_CODE],
            stdout=subprocess.PIPE,
            env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(world_size), LOCAL_RANK=str(r)),
        )
        for r in range(world_size)
    ]
    threading.Timer(1.5, lambda: print("READY", flush=True)).start()
    return ranks[0].wait()  # should stream every rank's stdout instead


if __name__ == "__main__":
    launch(3)
