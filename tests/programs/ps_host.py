"""A host of its own for ``diag ps``: run as PID 1 of a new PID namespace with its own /proc
(``unshare --pid --fork --mount-proc``), so the jobs other tests run beside it on the same
machine are not on this "host" and "exactly these jobs" can be asserted.

Steps, each result one JSON object in a list printed at the end (``RESULT <json>``):
1. a plain shell and one rank job (``rank_job.py 2``) running: ``diag capture --json`` with no
   target takes the one job (stderr says so);
2. a second rank job started: ``diag ps`` and ``diag capture`` (no target) again.
Every job is killed at the end (they are in this namespace: they die with its PID 1 anyway).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
DIAG = [sys.executable, "-m", "diag"]


def start_rank_job(world: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "rank_job.py"), str(world)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    return proc


def run(args: List[str], cwd: str) -> Dict[str, Any]:
    done = subprocess.run([*DIAG, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    return {"args": args, "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def main() -> None:
    out_dir = tempfile.mkdtemp(prefix="ps-host-")
    shell = subprocess.Popen(["sh", "-c", "exec sleep 600"])
    first = start_rank_job(2)
    results: List[Dict[str, Any]] = [{"pids": {"shell": shell.pid, "first": first.pid}}]
    results.append(run(["capture", "--count", "1", "--interval", "0", "--json"], out_dir))
    second = start_rank_job(3)
    results[0]["pids"]["second"] = second.pid
    results.append(run(["ps", "--no-gpu"], out_dir))
    results.append(run(["ps", "--json", "--no-gpu"], out_dir))
    results.append(run(["capture", "--count", "1"], out_dir))
    shell.kill()
    for proc in (first, second):
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
