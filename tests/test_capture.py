"""``diag capture`` end to end: real programs, real py-spy, real /proc, the real CLI."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import PROGRAMS, run_diag

from diag.bundle.io import load_bundle
from diag.model import Bundle, ProcessSample

pytestmark = pytest.mark.slow


def _capture(pid: int, out: Path, *extra: str) -> Bundle:
    proc = run_diag(
        ["capture", "--pid", str(pid), "--interval", "0.3", "--count", "2", "-o", str(out), *extra]
    )
    assert proc.returncode == 0, proc.stderr
    json_path = out.with_suffix(".json")
    assert f"wrote {json_path}" in proc.stdout
    return load_bundle(json_path)


def _last(bundle: Bundle, pid: int) -> ProcessSample:
    return next(p for p in bundle.samples[-1].processes if p.pid == pid)


def test_lock_waiters_share_futex_address_and_stacks_join(spawn, tmp_path: Path) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "lock_waiters.py"), "3", "2"])
    tids: Dict[str, List[int]] = json.loads(prog.lines[-1].split("READY", 1)[1])
    log = tmp_path / "app.log"
    log.write_text("step 1\nstep 2\n")
    bundle = _capture(prog.pid, tmp_path / "locks.html", "--log", str(log))
    assert len(bundle.samples) == 2
    assert all(s.failures == () for s in bundle.samples), bundle.samples[-1].failures
    logs = {entry.path: entry for entry in bundle.samples[-1].logs}
    assert logs[str(log)].lines == 2 and logs[str(log)].tail[-1] == "step 2"
    assert bundle.host.clk_tck > 0 and bundle.host.pyspy_version
    proc = _last(bundle, prog.pid)
    assert proc.py_status == "ok"
    threads = {t.tid: t for t in proc.threads}
    addr_a = {threads[tid].futex_addr for tid in tids["a"]}
    addr_b = {threads[tid].futex_addr for tid in tids["b"]}
    assert len(addr_a) == 1 and len(addr_b) == 1 and addr_a != addr_b
    assert None not in addr_a | addr_b
    for key in ("a", "b"):
        for tid in tids[key]:
            thread = threads[tid]
            assert thread.syscall == "futex" and (thread.wchan or "").startswith("futex")
            assert (thread.py_thread_name or "").startswith(f"wait-{key}-")
            assert thread.stack_id is not None
            assert bundle.stacks[thread.stack_id].frames[0].name.endswith("waiter")
    main = threads[prog.pid]
    assert main.py_thread_name == "MainThread" and main.stack_id in bundle.stacks


def test_rank_job_ranks_found_and_zombie_marked(spawn, tmp_path: Path) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "3", "1"])
    pids = {int(r): p for r, p in json.loads(prog.lines[-1].split("READY", 1)[1]).items()}
    bundle = _capture(prog.pid, tmp_path / "ranks")
    infos = {p.pid: p for p in bundle.processes}
    assert set(infos) == {prog.pid, *pids.values()}
    assert infos[prog.pid].role == "launcher" and infos[prog.pid].rank is None
    for rank in (0, 2):
        info = infos[pids[rank]]
        assert (info.rank, info.role, info.rank_source) == (rank, "rank", "env:RANK")
        assert info.world_size == 3 and info.env.get("RANK") == str(rank)
        assert _last(bundle, pids[rank]).py_status == "ok"
    # Dead before diag looked (no environ left): its rank is the one WORLD_SIZE misses.
    assert (infos[pids[1]].rank, infos[pids[1]].rank_source) == (1, "inferred:missing-rank")
    zombie = _last(bundle, pids[1])
    assert zombie.status == "zombie" and zombie.exit_code == 3
    assert zombie.threads == ()


def test_non_python_target_is_captured_with_a_note(spawn, tmp_path: Path) -> None:
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    out = tmp_path / "sleep.json"
    proc = run_diag(
        ["capture", "--pid", str(prog.pid), "--interval", "0.2", "--count", "2", "-o", str(out)]
    )
    assert proc.returncode == 0, proc.stderr
    assert "not a Python process" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    bundle = load_bundle(out)
    sample = _last(bundle, prog.pid)
    assert sample.py_status == "not-python"
    assert [t.syscall for t in sample.threads] == ["clock_nanosleep"]
    assert sample.threads[0].state == "S"


def test_target_exiting_mid_capture_keeps_samples(spawn, tmp_path: Path) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "3"])
    out = tmp_path / "gone.json"
    proc = run_diag(
        ["capture", "--pid", str(prog.pid), "--interval", "1", "--count", "30", "-o", str(out)]
    )
    assert proc.returncode == 0, proc.stderr
    assert "exited during the capture" in proc.stderr
    bundle = load_bundle(out)
    assert 1 <= len(bundle.samples) < 30


def test_default_output_name_in_cwd(spawn, tmp_path: Path) -> None:
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    proc = run_diag(["capture", "--pid", str(prog.pid), "--count", "1"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = list(tmp_path.glob(f"diag-{prog.pid}-*.json"))
    assert len(written) == 1 and f"wrote {written[0]}" in proc.stdout


def test_collector_keeps_a_dead_rank_marked(spawn) -> None:
    """A rank seen alive, then dead (zombie, then reaped), keeps its rank and exit code."""
    from diag.collect.collector import Collector

    prog = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    pids = {int(r): p for r, p in json.loads(prog.lines[-1].split("READY", 1)[1]).items()}
    collector = Collector(prog.pid, pyspy=None)
    first = collector.take_sample(0)
    assert {p.rank for p in first.new_processes} == {None, 0, 1}
    os.kill(pids[1], signal.SIGTERM)
    while _state(pids[1]) != "Z":
        time.sleep(0.01)
    second = collector.take_sample(1)
    assert second.new_processes == ()
    dead = next(p for p in second.sample.processes if p.pid == pids[1])
    assert (dead.status, dead.exit_code) == ("zombie", -signal.SIGTERM)
    os.kill(prog.pid, signal.SIGUSR1)  # the launcher reaps it
    while os.path.exists(f"/proc/{pids[1]}"):
        time.sleep(0.01)
    third = collector.take_sample(2).sample
    gone = next(p for p in third.processes if p.pid == pids[1])
    assert (gone.status, gone.exit_code) == ("exited", -signal.SIGTERM)
    assert collector.processes[pids[1]].rank == 1
    assert collector.alive()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_ranks_set_after_exec_inferred_from_start_order(spawn, tmp_path: Path, mode: str) -> None:
    """RANK set with os.environ in the child is invisible in /proc: ranks come from the order
    the siblings started, and the dead one (a zombie) keeps its place."""
    prog = spawn([sys.executable, str(PROGRAMS / "mp_ranks.py"), mode, "3", "1"])
    pids = {int(r): p for r, p in json.loads(prog.lines[-1].split("READY", 1)[1]).items()}
    bundle = _capture(prog.pid, tmp_path / f"mp-{mode}")
    infos = {p.pid: p for p in bundle.processes}
    for rank, pid in pids.items():
        assert (infos[pid].rank, infos[pid].rank_source) == (rank, "inferred:start-order")
        assert infos[pid].role == "rank"
    assert infos[prog.pid].role == "launcher" and infos[prog.pid].rank is None
    assert _last(bundle, pids[1]).status == "zombie"


def test_worker_pool_is_not_taken_for_ranks(spawn, tmp_path: Path) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "mp_ranks.py"), "pool", "3"])
    workers = json.loads(prog.lines[-1].split("READY", 1)[1])
    bundle = _capture(prog.pid, tmp_path / "pool")
    infos = {p.pid: p for p in bundle.processes}
    assert all(infos[pid].rank is None for pid in workers)
    assert all(infos[pid].role == "worker" for pid in workers)


def test_exited_helper_marked_once_exited_rank_always(spawn) -> None:
    """A short-lived unranked child is marked exited in the sample after it went, not forever
    (a day-long watch of a job that runs a helper every minute must not grow each sample)."""
    from diag.collect.collector import Collector

    prog = spawn(["sh", "-c", "sleep 1000 & echo READY; wait; sleep 1000"])
    collector = Collector(prog.pid, pyspy=None)
    first = collector.take_sample(0).sample
    helper = next(p.pid for p in first.processes if p.pid != prog.pid)
    assert collector.processes[helper].role == "worker"
    os.kill(helper, signal.SIGKILL)
    while os.path.exists(f"/proc/{helper}"):  # sh reaps it
        time.sleep(0.01)
    marked = [collector.take_sample(i).sample for i in (1, 2)]
    statuses = [{p.pid: p.status for p in s.processes}.get(helper) for s in marked]
    assert statuses[0] == "exited" and statuses[1] is None
    assert helper in collector.processes  # its identity stays in the bundle
