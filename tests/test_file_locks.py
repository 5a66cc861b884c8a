"""File locks (diag.probes.file_locks): /proc/locks parsed and read through an injected root,
bounded; then real processes - a job waiting for a flock or fcntl lock another process holds,
running, stopped or asleep - and the verdict that follows from the holder, not the waiter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest
from conftest import run_diag, start_ready

from diag.probes import file_locks as fl
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_syscall

LOCKS = """\
1: FLOCK  ADVISORY  WRITE 17150 fe:00:2155416 0 EOF
1: -> FLOCK  ADVISORY  WRITE 17152 fe:00:2155416 0 EOF
2: POSIX  ADVISORY  WRITE 900 08:02:131 0 EOF
2: -> POSIX  ADVISORY  WRITE 17153 08:02:131 0 EOF
3: OFDLCK ADVISORY  READ  -1 00:05:77 0 EOF
4: POSIX  ADVISORY  READ  901 08:02:131 100 200
garbage line
5: LEASE  ACTIVE    READ  902 08:02:999 0 EOF
"""


def test_parse_locks_reads_holders_and_waiters() -> None:
    lines = fl.parse_locks(LOCKS)
    assert len(lines) == 7
    assert lines[0] == fl.LockLine(1, False, "flock", "WRITE", 17150, "fe:00", 2155416)
    assert lines[1].blocked and lines[1].pid == 17152 and lines[1].ordinal == 1
    assert lines[4].kind == "ofd" and lines[4].pid == -1
    assert lines[6].kind == "lease"


def test_select_locks_the_jobs_waits_and_their_blockers() -> None:
    chosen = fl.select_locks(fl.parse_locks(LOCKS), {17152, 17153})
    # The waits first, then the blockers by ordinal, then other holders of the same file.
    assert [(ln.pid, ln.blocked) for ln in chosen] == [
        (17152, True),
        (17153, True),
        (17150, False),
        (900, False),
        (901, False),
    ]
    assert fl.select_locks(fl.parse_locks(LOCKS), {4242}) == []
    assert len(fl.select_locks(fl.parse_locks(LOCKS), {17152, 17153}, cap=2)) == 2


def test_flock_and_fcntl_syscalls_record_their_fd() -> None:
    assert parse_syscall("73 0x3 0x2 0x0 0x0 0x0 0x0 0x7ffd 0x7f01").syscall == "flock"
    assert parse_syscall("73 0x3 0x2 0x0 0x0 0x0 0x0 0x7ffd 0x7f01").fd == 3
    assert parse_syscall("72 0x5 0x7 0x7f00 0x0 0x0 0x0 0x7ffd 0x7f01").fd == 5  # F_SETLKW
    assert parse_syscall("32 0x4 0x2 0x0 0x0 0x0 0x0 0x0 0x0", "aarch64").fd == 4
    assert fl.waits_on_file_lock("locks_lock_inode_wait", None)
    assert fl.waits_on_file_lock(None, "flock")
    assert not fl.waits_on_file_lock("futex_wait_queue", "futex")


def _fake_proc(root: Path, locks: str, procs: Dict[int, Tuple[str, str]]) -> ProcFS:
    """A /proc tree with a locks file and each pid's stat (and fd 3 -> its lock file)."""
    (root / "locks").write_text(locks)
    for pid, (name, state) in procs.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) {state} 1 1 1 0 -1\n")
        os.symlink("/data/cache/.lock", root / str(pid) / "fd" / "3")
    return ProcFS(root)


def test_job_file_locks_through_an_injected_root(tmp_path: Path) -> None:
    procfs = _fake_proc(tmp_path, LOCKS, {17152: ("python", "S"), 17150: ("wget", "T")})
    locks, note = fl.job_file_locks(procfs, {17152: 3})
    assert note == ""
    waiter, holder = locks
    assert (waiter.pid, waiter.blocked, waiter.path) == (17152, True, "/data/cache/.lock")
    assert (holder.pid, holder.blocked, holder.name, holder.state) == (17150, False, "wget", "T")
    assert holder.path == ""  # a holder's fd is not looked for


def test_a_huge_proc_locks_is_cut_and_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fl, "MAX_LOCKS_BYTES", 200)
    filler = "".join(
        f"{n + 10}: POSIX  ADVISORY  WRITE {n + 5000} 08:02:{n} 0 EOF\n" for n in range(50)
    )
    procfs = _fake_proc(tmp_path, LOCKS + filler, {17152: ("python", "S")})
    locks, note = fl.job_file_locks(procfs, {17152: 3})
    assert "only its start was read" in note
    assert [lk.pid for lk in locks] == [17152, 17150]  # what was read is still used


# --- real processes -------------------------------------------------------------------------

HOLDER = r"""
import fcntl, sys, time
f = open(sys.argv[1], "w")
(fcntl.flock if sys.argv[2] == "flock" else fcntl.lockf)(f, fcntl.LOCK_EX)
print("READY", flush=True)
if sys.argv[3] == "spin":
    while True:
        pass
time.sleep(10**6)
"""

WAITER = r"""
import fcntl, os, sys, time
f = open(sys.argv[1], "a")
print("READY", flush=True)
(fcntl.flock if sys.argv[2] == "flock" else fcntl.lockf)(f, fcntl.LOCK_EX)
"""


@pytest.fixture
def holder(request: Any, tmp_path: Path) -> Iterator[Tuple[subprocess.Popen[bytes], str, str]]:
    lock_kind, doing = request.param
    path = str(tmp_path / "cache.lock")
    proc = start_ready([sys.executable, "-c", HOLDER, path, lock_kind, doing], timeout_s=30)
    try:
        yield proc.proc, path, lock_kind
    finally:
        proc.stop()


def _capture(tmp_path: Path, path: str, lock_kind: str) -> Dict[str, Any]:
    waiter = start_ready([sys.executable, "-c", WAITER, path, lock_kind], timeout_s=30)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # in the kernel's wait, not just before it
            with open(f"/proc/{waiter.pid}/wchan") as fh:
                if fl.waits_on_file_lock(fh.read(), None):
                    break
            time.sleep(0.05)
        out = tmp_path / "bundle.json"
        done = run_diag(
            [
                "capture",
                "--pid",
                str(waiter.pid),
                "--count",
                "2",
                "--interval",
                "0.5",
                "-o",
                str(out),
            ]
        )
    finally:
        waiter.stop()
    assert done.returncode == 0, done.stderr
    bundle: Dict[str, Any] = json.loads(out.read_text())
    bundle["_waiter"] = waiter.pid
    return bundle


@pytest.mark.slow
@pytest.mark.parametrize("holder", [("flock", "spin"), ("posix", "spin")], indirect=True)
def test_a_lock_held_by_a_busy_process_outside_the_job_is_slow(holder: Any, tmp_path: Path) -> None:
    """Before: "deadlocked: one lock nobody releases ... kill it" - while the holder ran."""
    proc, path, kind = holder
    bundle = _capture(tmp_path, path, kind)
    verdict = bundle["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("waits_for_file_lock", "slow"), verdict
    assert verdict["suspects"][0]["pid"] == proc.pid
    # the wording is the feature: the advice the old verdict got wrong
    assert "don't kill the job" in verdict["summary"]
    edges = {(e["src"], e["dst"], e["kind"]) for e in verdict["graph"]["edges"]}
    assert (f"/{bundle['_waiter']}", f"/{proc.pid}", "file-lock") in edges, edges
    locks = bundle["samples"][-1]["file_locks"]
    assert {(lk["pid"], lk["blocked"]) for lk in locks} >= {
        (proc.pid, False),
        (bundle["_waiter"], True),
    }


@pytest.mark.slow
@pytest.mark.parametrize("holder", [("flock", "sleep")], indirect=True)
def test_a_lock_held_by_a_stopped_process_is_deadlocked_on_it(holder: Any, tmp_path: Path) -> None:
    proc, path, kind = holder
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        bundle = _capture(tmp_path, path, kind)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    verdict = bundle["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("waits_on_stopped_outsider", "deadlocked")
    assert verdict["suspects"][0]["pid"] == proc.pid
    # the wording is the feature: the command that resumes the holder
    assert f"kill -CONT {proc.pid}" in verdict["summary"]


@pytest.mark.slow
@pytest.mark.parametrize("holder", [("flock", "sleep")], indirect=True)
def test_a_lock_held_by_a_sleeping_process_is_its_business(holder: Any, tmp_path: Path) -> None:
    proc, path, kind = holder
    bundle = _capture(tmp_path, path, kind)
    verdict = bundle["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("waits_for_file_lock", "slow"), verdict
    assert verdict["suspects"][0]["pid"] == proc.pid
    # the wording is the feature: how to see what the holder waits for
    assert f"`py-spy dump --pid {proc.pid}`" in verdict["summary"]


def test_a_pollers_job_keeps_the_locks_its_processes_hold() -> None:
    """A poller leaves no ``->`` line: the locks the job's own processes hold are kept for it
    (after the waits and their holders), and no lock of another process of the host."""
    from diag.probes.file_locks import parse_locks, select_locks

    text = (
        "1: FLOCK  ADVISORY  WRITE 100 fe:00:10 0 EOF\n"
        "2: FLOCK  ADVISORY  WRITE 200 fe:00:20 0 EOF\n"
        "3: POSIX  ADVISORY  WRITE 300 fe:00:30 0 EOF\n"
    )
    lines = parse_locks(text)
    assert select_locks(lines, set()) == []
    kept = select_locks(lines, set(), job=frozenset({100, 300, 999}))
    assert [ln.pid for ln in kept] == [100, 300]
