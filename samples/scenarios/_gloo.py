"""Shared launcher for the torch.distributed (gloo, CPU) scenarios, torchrun style.

Run a scenario without RANK in the environment and it becomes its own launcher: it starts
``world_size`` copies of itself with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (so diag finds
the ranks from /proc/P/environ, as with torchrun), waits until every rank has reported that it
reached the state under test, prints READY, then waits for its children in rank order - so a
rank that exits early stays a zombie, as under a launcher busy waiting for rank 0.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable, List, Optional

LIFETIME_S = 600.0  # the launcher kills everything after this, whatever happens


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank() -> Optional[int]:
    value = os.environ.get("RANK")
    return int(value) if value is not None else None


def mark(note: str = "") -> None:
    """Tell the launcher this rank has reached its state (call right before blocking)."""
    directory = Path(os.environ["DIAG_SCENARIO_DIR"])
    (directory / f"rank{os.environ['RANK']}").write_text(note)


def init(timeout_s: float = LIFETIME_S) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        timeout=timedelta(seconds=timeout_s),
    )


def _exited_unreaped(pid: int) -> bool:
    """True once the child has exited; WNOWAIT leaves it a zombie for diag to see."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def launch(
    script: str,
    world_size: int,
    settle_s: float = 1.5,
    wait_dead: bool = False,
    on_ready: Optional[Callable[[], None]] = None,
) -> None:
    """Start the ranks, wait for every marker, print READY, then wait for the ranks."""
    directory = tempfile.mkdtemp(prefix="diag-scenario-")
    env = dict(os.environ)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        DIAG_SCENARIO_DIR=directory,
        PYTHONUNBUFFERED="1",
    )
    procs: List[subprocess.Popen] = []  # type: ignore[type-arg]
    for r in range(world_size):
        procs.append(
            subprocess.Popen(
                [sys.executable, script], env=dict(env, RANK=str(r), LOCAL_RANK=str(r))
            )
        )
    deadline = time.monotonic() + LIFETIME_S
    markers = [Path(directory) / f"rank{r}" for r in range(world_size)]
    while not all(m.exists() for m in markers):
        if time.monotonic() > deadline:
            _kill(procs)
            sys.exit("scenario: ranks never reached their state")
        time.sleep(0.1)
    if wait_dead:
        while not any(_exited_unreaped(p.pid) for p in procs):
            time.sleep(0.05)
    time.sleep(settle_s)
    if on_ready is not None:
        on_ready()
    print("READY", flush=True)
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(procs)


def run_steps(script: str, world_size: int, train_step: Callable[[int], None]) -> None:
    """A step loop's entry point: at the root, launch ``world_size`` ranks of ``script``; in a
    rank, ``init``, then ``train_step(step)`` for steps 1 to 999 (where the scenario diverges,
    a rank never comes back)."""
    if rank() is None:
        launch(script, world_size)
        return
    init()
    for step in range(1, 1000):
        train_step(step)


def _kill(procs: List[subprocess.Popen]) -> None:  # type: ignore[type-arg]
    for p in procs:
        if p.poll() is None:
            p.kill()
