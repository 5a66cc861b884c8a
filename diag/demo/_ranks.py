"""The demo jobs' launcher: ranks as real processes, with the environment torchrun gives them.

Stdlib only (the demos must run where diag is installed, without torch or numpy). The root
process is the launcher: it starts ``world_size`` rank processes with the ``spawn`` start
method, which *execs* a fresh interpreter per rank, so each rank's ``/proc/PID/environ`` (the
environment at exec time) carries the ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` diag reads ranks
from; a ``fork`` child would inherit the launcher's environment unchanged. The shared
``multiprocessing.Barrier`` stands in for a process group: the functions here are named like
the ``torch.distributed`` calls they imitate (``barrier``, ``all_reduce``) because diag names
a rank's wait by the function it is parked in.

Readiness handshake: each rank touches ``rank<N>`` in the job's work directory once it has
reached the state the demo shows (right before blocking); the launcher then waits a settle
period and writes ``READY`` to the file descriptor named by ``DIAG_DEMO_READY_FD`` (the demo
runner reads it), and finally waits for its ranks in rank order - so a rank that exits early
stays a zombie, as under a launcher busy waiting for rank 0.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Sequence

LIFETIME_S = 600.0  # a launcher orphaned by a crashed runner ends by itself after this
READY_FD_ENV = "DIAG_DEMO_READY_FD"
WORK_DIR_ENV = "DIAG_DEMO_WORK_DIR"

RankMain = Callable[..., None]


def work_dir() -> Path:
    """The job's scratch directory (the weights file, the readiness markers)."""
    path = Path(os.environ[WORK_DIR_ENV])
    path.mkdir(parents=True, exist_ok=True)
    return path


def rank() -> int:
    return int(os.environ["RANK"])


def mark(note: str = "") -> None:
    """Tell the launcher this rank has reached its state (call right before blocking)."""
    (work_dir() / f"rank{rank()}").write_text(note)


def wait_for_marks(ranks: Sequence[int]) -> None:
    """Block until these ranks have marked (a rank that must crash *after* the others wait)."""
    while not all((work_dir() / f"rank{r}").exists() for r in ranks):
        time.sleep(0.02)


def barrier(group: Any) -> None:
    """``dist.barrier()``: wait, without a timeout, until every rank arrives."""
    group.wait()


def all_reduce(group: Any) -> None:
    """``dist.all_reduce(t)``: a collective every rank must join; no timeout either."""
    group.wait()


def signal_ready() -> None:
    """Write READY to the runner's pipe (or stdout when run by hand) and close it."""
    fd = os.environ.get(READY_FD_ENV)
    if fd is None:
        print("READY", flush=True)
        return
    os.write(int(fd), b"READY\n")
    os.close(int(fd))


def _exited_unreaped(pid: int) -> bool:
    """True once the child has exited; WNOWAIT leaves it a zombie for diag to see."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")


def launch(
    rank_main: RankMain,
    world_size: int,
    args: Sequence[Any] = (),
    *,
    settle_s: float = 1.0,
    wait_dead: bool = False,
    wait_stopped: bool = False,
) -> None:
    """Start the ranks (``rank_main(*args)`` each), wait for every marker, signal READY, then
    wait for the ranks in rank order."""
    directory = work_dir()
    ctx = multiprocessing.get_context("spawn")
    procs: List[Any] = []
    os.environ.update(
        WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size), PYTHONUNBUFFERED="1"
    )
    for r in range(world_size):
        os.environ.update(RANK=str(r), LOCAL_RANK=str(r))  # seen by the exec'd rank
        proc = ctx.Process(target=rank_main, args=tuple(args), name=f"rank{r}")
        proc.start()
        procs.append(proc)
    for name in ("RANK", "LOCAL_RANK"):
        os.environ.pop(name, None)  # the launcher itself is no rank
    deadline = time.monotonic() + LIFETIME_S
    markers = [directory / f"rank{r}" for r in range(world_size)]
    while not all(m.exists() for m in markers):
        crashed = [
            r for r, p in enumerate(procs) if not markers[r].exists() and _exited_unreaped(p.pid)
        ]
        if crashed or time.monotonic() > deadline:
            _kill(procs)
            sys.exit(f"demo: rank(s) {crashed or 'all'} never reached their state")
        time.sleep(0.05)
    while wait_dead and not any(_exited_unreaped(p.pid) for p in procs):
        time.sleep(0.05)
    while wait_stopped and not any(_stopped(p.pid) for p in procs):
        time.sleep(0.05)
    time.sleep(settle_s)
    signal_ready()
    for proc in procs:
        proc.join(timeout=max(1.0, deadline - time.monotonic()))
    _kill(procs)


def _kill(procs: Sequence[Any]) -> None:
    for proc in procs:
        if proc.exitcode is None:
            proc.kill()
