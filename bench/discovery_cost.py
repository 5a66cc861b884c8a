"""Process discovery on a busy host (issue 19): the per-sample cost with ~5,000 other PIDs.

``diag.probes.proctree.walk_tree`` reads the stat of every process on the host (the full scan);
``diag.probes.discovery.TreeDiscovery`` does that on its first call and every 10th, and in
between lists /proc, reads the stat of the tree's own processes and of PIDs new since the last
listing, and the main threads' ``children``. Measured: a helper (in a session of its own, killed
with its group at the end) starts ``others`` ``sleep`` processes; the job is a small tree (a
root and ``ranks`` children); the same tree is asked for ``repeats`` times each way, alternating,
and the answers are compared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Dict, List

from bench.stats import collect
from diag.probes.discovery import TreeDiscovery
from diag.probes.procfs import ProcFS
from diag.probes.proctree import walk_tree

_HELPER = """
import subprocess, sys
procs = [subprocess.Popen(["sleep", "3600"]) for _ in range(int(sys.argv[1]))]
print("ready", flush=True)
sys.stdin.read()
"""

_JOB = """
import subprocess, sys, time
kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(int(sys.argv[1]))]
print("ready", flush=True)
sys.stdin.read()
"""


def _start(code: str, n: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: killed as one, by its id, at the end
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("helper did not start")
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def measure(others: int = 5000, ranks: int = 8, repeats: int = 50) -> Dict[str, float]:
    procfs = ProcFS()
    crowd = _start(_HELPER, others)
    job = None
    try:
        job = _start(_JOB, ranks)
        host_pids = len(procfs.pids())
        walker = TreeDiscovery(job.pid, procfs, full_every=10**9)  # steady calls only
        first = walker()
        full_s: List[float] = []
        steady_s: List[float] = []
        same = True
        for _ in range(repeats):
            t = time.perf_counter()
            full = walk_tree(job.pid, procfs)
            full_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            steady = walker()
            steady_s.append(time.perf_counter() - t)
            same = same and steady == full == first
        full_st, steady_st = collect(full_s), collect(steady_s)
        return {
            "host_pids": float(host_pids),
            "tree": float(len(first.starts)),
            "repeats": float(repeats),
            "full_median_s": full_st.median,
            "full_min_s": full_st.min,
            "steady_median_s": steady_st.median,
            "steady_min_s": steady_st.min,
            "ratio": steady_st.median / full_st.median,
            "same_answer": float(same),
            "full_scans": float(walker.full_scans),
        }
    finally:
        if job is not None:
            _stop(job)
        _stop(crowd)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    for key, value in measure(n).items():
        print(f"{key:<16} {value:,.6f}")
