"""Run a scenario under the real ``torchrun`` (torch.distributed.run, elastic agent), as users do.

The scenario process itself becomes torchrun: it forks a detached watcher that waits until every
rank has reported its state (a marker file per rank) and then prints READY, and execs
``torchrun --nproc-per-node N <script>``. So the PID under test is torchrun's, its children are
the ranks with torchrun's own environment (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_*), and no
helper process of the scenario sits in the tree.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

LIFETIME_S = 600.0


def is_rank() -> bool:
    """True in a rank; also makes the rank die with torchrun (the elastic agent starts ranks
    in their own sessions, so killing the scenario's process group would not reach them)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    return True


def rank() -> int:
    return int(os.environ["RANK"])


def mark(note: str = "") -> None:
    """Tell the watcher this rank has reached its state (call right before blocking)."""
    (Path(os.environ["DIAG_SCENARIO_DIR"]) / f"rank{rank()}").write_text(note)


def init() -> None:
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=LIFETIME_S))


def _watch(directory: str, nproc: int, settle_s: float) -> None:
    markers = [Path(directory) / f"rank{r}" for r in range(nproc)]
    deadline = time.monotonic() + LIFETIME_S
    while not all(m.exists() for m in markers):
        if time.monotonic() > deadline:
            os._exit(1)
        time.sleep(0.1)
    time.sleep(settle_s)
    print("READY", flush=True)
    os._exit(0)


def launch(script: str, nproc: int, settle_s: float = 1.5) -> None:
    """Become ``torchrun --nproc-per-node nproc script``; READY comes from a detached watcher."""
    directory = tempfile.mkdtemp(prefix="diag-torchrun-")
    os.environ["DIAG_SCENARIO_DIR"] = directory
    os.environ["PYTHONUNBUFFERED"] = "1"
    if os.fork() == 0:  # double fork: the watcher is nobody's child in the job's tree
        if os.fork() == 0:
            _watch(directory, nproc, settle_s)
        os._exit(0)
    os.wait()
    torchrun = str(Path(sys.executable).parent / "torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [torchrun, "--nproc-per-node", str(nproc), "--master-port", str(port), script]
    os.execv(sys.executable, [sys.executable, *argv])
