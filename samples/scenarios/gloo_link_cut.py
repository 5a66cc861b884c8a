"""deadlocked: two gloo ranks train over a real link - rank 1 lives in its own network
namespace, joined to rank 0's by a veth pair - and the link goes down mid-training (the
namespace side's interface is set down: a cable pulled, a switch port dead, a host that
vanished). Both ranks wait in ``all_reduce``, the same stack, no CPU, no log line: the
picture of a mismatched collective or of a slow peer. Rank 0's kernel says otherwise: the
chunk it sent sits unacknowledged, retransmitted with a backed-off timeout - nothing at the
other end acknowledges, and the collective can never complete.

``run(cut=False)`` (gloo_link_slow_peer.py): the contrast - the same two ranks over the same
link, rank 1 sleeping 60 s in its own code (a slow data fetch) while rank 0 waits in
``all_reduce``: the link is up and quiet, nothing is in flight.

Needs root, iproute2 (veth) and util-linux (``unshare``, ``nsenter``). Rank 1's namespace is
anonymous: it goes with its last process, the veth pair with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List

LIFETIME_S = 300.0
STEPS_BEFORE = 3


def _ip(*args: str, pid: int = 0) -> None:
    """``ip ARGS``, inside the network namespace of ``pid`` when given."""
    enter = ["nsenter", "-t", str(pid), "-n"] if pid else []
    subprocess.run([*enter, "ip", *args], check=True, capture_output=True)


def rank_main(rank: int, cut: bool) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    marks = Path(os.environ["MARK_DIR"])
    while not (marks / "wired").exists():  # rank 1: until its end of the link is set up
        time.sleep(0.05)
    dist.init_process_group("gloo", timeout=timedelta(seconds=1800))
    grad = torch.ones(1 << 20)  # 4 MiB a step: a chunk is in flight whenever the link dies
    for step in range(1, 10**6):
        if step == STEPS_BEFORE + 1:
            (marks / f"rank{rank}").write_text("")
            if rank == 1 and not cut:
                time.sleep(60)  # a slow fetch in its own code
        dist.all_reduce(grad)
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.1)


def run(cut: bool) -> None:
    """Rank 1 starts in a network namespace of its own (``unshare -n``: it lives as long as
    the process, so a launcher killed with SIGKILL leaves nothing behind), and the launcher
    moves one end of a veth pair into it."""
    n = os.getpid() % 200 + 20
    a, b = f"dcA{os.getpid()}", f"dcB{os.getpid()}"
    a_ip, b_ip = f"10.233.{n}.1", f"10.233.{n}.2"
    marks = tempfile.mkdtemp(prefix="diag-link-")
    port = 29000 + os.getpid() % 1000
    env = dict(os.environ, MASTER_ADDR=a_ip, MASTER_PORT=str(port), WORLD_SIZE="2",
               MARK_DIR=marks, PYTHONUNBUFFERED="1")  # fmt: skip
    here = os.path.abspath(__file__)
    procs: List[subprocess.Popen[bytes]] = []
    for rank, (prefix, ifname) in enumerate((([], a), (["unshare", "-n"], b))):
        argv = [*prefix, sys.executable, here, str(rank), "cut" if cut else "slow"]
        renv = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), GLOO_SOCKET_IFNAME=ifname)
        procs.append(subprocess.Popen(argv, env=renv))
    # A launcher killed with SIGKILL (a test's teardown) runs no ``finally``: a detached
    # watcher outside the job's tree removes the link once the launcher is gone.
    subprocess.run(
        ["sh", "-c", f"(while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
         f"ip link del {a}) >/dev/null 2>&1 &"],
        start_new_session=True, check=False,
    )  # fmt: skip
    try:
        ns_pid = procs[1].pid  # unshare execs the rank: the namespace's one process
        time.sleep(0.3)
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        _ip("link", "set", b, "netns", str(ns_pid))
        _ip("addr", "add", f"{a_ip}/30", "dev", a)
        _ip("link", "set", a, "up")
        _ip("addr", "add", f"{b_ip}/30", "dev", b, pid=ns_pid)
        _ip("link", "set", b, "up", pid=ns_pid)
        _ip("link", "set", "lo", "up", pid=ns_pid)
        Path(marks, "wired").write_text("")
        deadline = time.monotonic() + 240
        while not all(Path(marks, f"rank{r}").exists() for r in (0, 1)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                sys.exit("scenario: the ranks never trained")
            time.sleep(0.1)
        if cut:
            time.sleep(0.3)  # the next all_reduce is under way
            _ip("link", "set", b, "down", pid=ns_pid)
            time.sleep(4.0)  # past two back-offs of the retransmission timeout
        else:
            time.sleep(1.0)
        print("READY", flush=True)
        end = time.monotonic() + LIFETIME_S
        while time.monotonic() < end and all(p.poll() is None for p in procs):
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        subprocess.run(["ip", "link", "del", a], capture_output=True)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        rank_main(int(sys.argv[1]), sys.argv[2] == "cut")
    else:
        run(cut=True)
