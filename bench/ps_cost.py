"""``diag ps`` on a busy host (issue 26): the cost of finding every ML job without a PID.

A helper (in a session of its own, killed with its group at the end) starts ``others`` ``sleep``
processes; two small rank jobs (a launcher with RANK-carrying children, as torchrun starts
them) run beside them. Timed: ``diag.probes.jobs.find_jobs`` with no CPU window (the window is
a sleep, not work) - one stat read per process of the host, argv and environment of the
Python-looking ones, ports of the jobs' processes - ``repeats`` times, each followed by
``walk_tree``'s full scan (one stat per PID, what a capture's first sample pays): on a shared
machine the load moves both, and their ratio says what ``diag ps`` adds to the bare scan. The
answer must contain both jobs every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

from bench.discovery_cost import _HELPER, _start, _stop
from bench.stats import collect
from diag.probes.jobs import find_jobs
from diag.probes.procfs import ProcFS
from diag.probes.proctree import walk_tree

TARGET_S = 0.1
_RANK_JOB = Path(__file__).resolve().parent.parent / "tests" / "programs" / "rank_job.py"


# The job is started by a short-lived middle process, so it is not a descendant of the
# measuring one: ``find_jobs`` leaves out diag's own process tree (its py-spy, its NVML worker).
_DETACH = """
import subprocess, sys
job = subprocess.Popen(sys.argv[1:], start_new_session=True)
print(job.pid, flush=True)
"""


def _rank_job(world: int) -> Tuple[int, subprocess.Popen[str]]:
    """(the job's pid, the pipe its READY line comes through)."""
    middle = subprocess.Popen(
        [sys.executable, "-c", _DETACH, sys.executable, str(_RANK_JOB), str(world)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert middle.stdout is not None
    pid = int(middle.stdout.readline())
    for line in middle.stdout:  # the job inherited the pipe: its READY comes through it
        if line.startswith("READY"):
            break
    else:
        raise RuntimeError("rank job did not start")
    middle.wait()
    return pid, middle


def measure(others: int = 5000, repeats: int = 30) -> Dict[str, float]:
    procfs = ProcFS()
    crowd = _start(_HELPER, others)
    jobs: List[Tuple[int, subprocess.Popen[str]]] = []
    try:
        jobs = [_rank_job(2), _rank_job(4)]
        wanted = {pid for pid, _ in jobs}
        host_pids = len(procfs.pids())
        times_s: List[float] = []
        walk_s: List[float] = []
        exact = True
        for _ in range(repeats):
            t = time.perf_counter()
            found = find_jobs(procfs, cpu_window_s=0.0)
            times_s.append(time.perf_counter() - t)
            mine = {j.root_pid for j in found} & wanted
            exact = exact and mine == wanted
            t = time.perf_counter()
            walk_tree(1, procfs)  # the capture's full scan, interleaved: what load does to both
            walk_s.append(time.perf_counter() - t)
        st, walk = collect(times_s), collect(walk_s)
        return {
            "host_pids": float(host_pids),
            "repeats": float(repeats),
            "median_s": st.median,
            "min_s": st.min,
            "walk_median_s": walk.median,
            "ratio": st.median / walk.median,
            "found_both": float(exact),
        }
    finally:
        for pid, pipe in jobs:
            try:
                os.killpg(pid, signal.SIGKILL)  # its own session and group: its ranks too
            except ProcessLookupError:
                pass
            if pipe.stdout is not None:
                pipe.stdout.close()
        _stop(crowd)


def rows(f: Dict[str, float]) -> List[Tuple[str, str, str, str, bool]]:
    """The ``diag ps`` row of the table."""
    return [
        (
            f"`diag ps` job scan, {int(f['host_pids']):,} PIDs on the host (2 rank jobs)",
            f"<= {TARGET_S * 1e3:.0f} ms",
            f"{f['median_s'] * 1e3:.1f} ms (min {f['min_s'] * 1e3:.1f}) vs the capture's full "
            f"process scan {f['walk_median_s'] * 1e3:.1f} ms in the same run; both jobs found: "
            f"{'yes' if f['found_both'] else 'NO'}",
            f"{f['ratio']:.2f}",
            bool(f["found_both"]) and f["median_s"] <= TARGET_S,
        )
    ]


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    for key, value in measure(n).items():
        print(f"{key:<12} {value:,.6f}")
