"""slow, not deadlocked (issue #37): the job of ``gloo_cpu_quota`` (3 gloo ranks,
data-parallel), with rank 1 at nice 19 beside CPU hogs at the normal priority - two per core,
started by the launcher in the job's own session (with autogroups, a nice value only orders
the tasks of one session). Rank 1 is runnable in every sample and its run-queue delay grows
by nearly the whole capture; ranks 0, 2 wait for it in ``all_reduce``. diag names the rank,
its nice value and its run-queue delay.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import List

import _gloo
import gloo_cpu_quota

HOG = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


def main() -> None:
    hogs: List[subprocess.Popen] = []  # type: ignore[type-arg]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}

    def start_hogs() -> None:
        for _ in range(2 * (os.cpu_count() or 1)):
            hogs.append(subprocess.Popen([sys.executable, "-c", HOG], env=env))

    os.environ["DIAG_LOW_PRIORITY"] = "1"
    try:
        _gloo.launch(gloo_cpu_quota.__file__, gloo_cpu_quota.WORLD_SIZE, on_ready=start_hogs)
    finally:
        for h in hogs:
            h.kill()


if __name__ == "__main__":
    main()
