"""``diag ps`` on a sick host: a /proc read that never returns (a process whose memory map is
locked by a thread stuck in the kernel - what hangs ``ps aux``) costs a second and a line, not
the command. The hang here is real: in a made-up /proc tree, a process's ``cmdline`` is a
FIFO no one writes, so ``open`` blocks in the kernel exactly as the locked read does."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List

from diag.probes.bounded_reads import Read, read_all
from diag.probes.jobs import find_jobs
from diag.probes.procfs import ProcFS


def _stat_line(pid: int, ppid: int, comm: str) -> bytes:
    fields = ["S", str(ppid), str(pid), str(pid)] + ["0"] * 9 + ["5", "3"] + ["0"] * 6
    fields += ["1234"] + ["0"] * 30
    return f"{pid} ({comm}) ".encode() + " ".join(fields).encode()


def _proc(root: Path, pid: int, ppid: int, argv: List[str], env: str, hang: bool = False) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_bytes(_stat_line(pid, ppid, "python3"))
    if hang:
        os.mkfifo(d / "cmdline")
    else:
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(env.encode() + b"\0")


def test_a_read_that_never_returns_is_given_up_on_and_the_rest_are_read(tmp_path: Path) -> None:
    ok = tmp_path / "ok"
    ok.write_bytes(b"fine")
    stuck = tmp_path / "stuck"
    os.mkfifo(stuck)
    reads = [Read(str(ok), 64), Read(str(stuck), 64), Read(str(ok), 2)]
    started = time.monotonic()
    done = read_all(reads, stall_s=0.3)
    assert time.monotonic() - started < 3.0
    assert done.data == [b"fine", None, b"fi"] and done.hung == (1,) and done.skipped == ()


def test_past_the_stuck_budget_the_rest_are_left_unread(tmp_path: Path) -> None:
    fifos = []
    for i in range(3):
        fifos.append(tmp_path / f"f{i}")
        os.mkfifo(fifos[-1])
    reads = [Read(str(f), 8) for f in fifos]
    done = read_all(reads, stall_s=0.2, max_hung=2)
    assert done.hung == (0, 1) and done.skipped == (2,)


def test_find_jobs_lists_the_job_and_names_the_process_it_could_not_read(tmp_path: Path) -> None:
    root = tmp_path / "proc"
    _proc(root, 100, 1, ["torchrun", "--nproc-per-node", "2", "train.py"], "RANK=0")
    _proc(root, 101, 100, ["python3", "train.py"], "RANK=0")
    _proc(root, 102, 100, [], "", hang=True)
    problems: List[str] = []
    started = time.monotonic()
    jobs = find_jobs(ProcFS(root), cpu_window_s=0.0, problems=problems, clk_tck=100)
    assert time.monotonic() - started < 5.0
    assert [j.root_pid for j in jobs] == [100]
    assert len(problems) == 1 and "/102/cmdline: the read did not return" in problems[0]
