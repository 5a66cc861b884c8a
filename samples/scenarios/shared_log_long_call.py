"""slow: a job of two processes that share one log (``python job.py 2> job.log``): the main
process computes one long ``np.linalg.svd`` after another - busy, on the same line at every
sample - while its helper child's ``telemetry`` thread died at start-up ("Exception in thread
telemetry: ConnectionError" in the shared log) and the helper sleeps. The death is the
helper's: nothing of the main process waits on it. It once read "deadlocked: spins ... for
thread telemetry, which died - kill it" (spins_for_dead_thread took the shared log's death line
for the busy process's own).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np


def helper() -> None:
    def telemetry() -> None:
        raise ConnectionError("statsd at 10.0.0.5:8125 unreachable")

    threading.Thread(target=telemetry, name="telemetry").start()
    time.sleep(10**6)


def main() -> None:
    work = tempfile.mkdtemp(prefix="diag-shared-log-")
    log = open(os.path.join(work, "job.log"), "a", buffering=1)  # noqa: SIM115
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)  # both processes' tracebacks go to the one log
    subprocess.Popen([sys.executable, __file__, "helper"])
    threading.Timer(2.0, lambda: print("READY", file=ready_out, flush=True)).start()
    a = np.random.default_rng(0).random((2500, 2500))
    while True:
        np.linalg.svd(a)


if __name__ == "__main__":
    if sys.argv[1:2] == ["helper"]:
        helper()
    else:
        main()
