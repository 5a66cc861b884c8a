"""The forked workers that read /proc and stacks (``diag.collect.shards``), on real processes.

A sample taken through workers must say what one taken in diag's own threads says; a worker
that hangs or dies must cost at most its deadline and never the snapshot; workers hold no
file descriptor of diag's but their pipes, and do not outlive diag.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from conftest import PROGRAMS

from diag.collect.collector import Collector
from diag.model import Sample


def _view(sample: Sample) -> Dict[int, Tuple[Any, ...]]:
    """What must not depend on who read it: per process, per thread, state and stack."""
    return {
        p.pid: (
            p.status,
            p.py_status,
            p.stack_reader,
            tuple((t.tid, t.state, t.stack_id, t.py_thread_name) for t in p.threads),
        )
        for p in sample.processes
    }


def _parked_job(spawn: Any) -> Any:
    code = (
        "import subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, {str(PROGRAMS / 'lock_waiters.py')!r},"
        " '2', '1'], stdout=subprocess.PIPE) for _ in range(3)]\n"
        "[k.stdout.readline() for k in kids]\n"
        "print('READY', flush=True)\n"
        "time.sleep(600)\n"
    )
    job = spawn([sys.executable, "-c", code])
    _settle(job.pid)
    return job


def _settle(root: int, timeout_s: float = 10.0) -> None:
    """Wait until no thread of the job runs: each process prints its line just before it
    parks, and a sample's real-time workers (``collect.priority``) can otherwise catch a main
    thread between the print and the sleep - in one of two samples compared, not the other."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [root, *map(int, Path(f"/proc/{root}/task/{root}/children").read_text().split())]
        states = []
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
        if "R" not in states:
            return
        time.sleep(0.02)


def _pyspy() -> str:
    from diag.probes.stacks import find_pyspy

    path = find_pyspy()
    assert path is not None
    return path


def test_workers_and_threads_see_the_same_job(spawn: Any) -> None:
    target = _parked_job(spawn)
    through = Collector(target.pid, pyspy=_pyspy(), workers=2)
    here = Collector(target.pid, pyspy=_pyspy(), workers=0)
    try:
        a = through.take_sample(0).sample
        b = here.take_sample(0).sample
        assert len(through._shards.worker_pids) == 2
        assert not here._shards.worker_pids
    finally:
        through.close()
        here.close()
    assert len(a.processes) == 4
    assert _view(a) == _view(b)
    assert {p.stack_reader for p in a.processes} == {"diag"}
    assert not a.failures and not b.failures


def test_a_hung_worker_costs_its_deadline_then_the_work_is_done_here(spawn: Any) -> None:
    target = _parked_job(spawn)
    collector = Collector(target.pid, pyspy=_pyspy(), workers=2, probe_timeout_s=1.0)
    try:
        collector.take_sample(0)
        for pid in collector._shards.worker_pids:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        stuck = collector.take_sample(1).sample
        took_s = time.monotonic() - started
        after = collector.take_sample(2).sample
    finally:
        collector.close()
    assert took_s < 1.0 + 2.0 + 2.0  # the deadline and its grace, not forever
    reasons = {f.reason for f in stuck.failures}
    assert any("took longer than" in r for r in reasons), reasons
    assert collector._shards.worker_pids == []  # killed (and reaped), not left stopped
    assert all(p.py_status == "ok" for p in after.processes if p.stack_reader)
    assert len([p for p in after.processes if p.py_status == "ok"]) == 4
    assert not after.failures


def test_workers_start_beside_other_threads(spawn: Any) -> None:
    """As in ``diag watch -- CMD``, whose output is teed by a thread."""
    import threading

    target = _parked_job(spawn)
    stop = threading.Event()
    tee = threading.Thread(target=stop.wait, daemon=True)
    tee.start()
    collector = Collector(target.pid, pyspy=_pyspy(), workers=2)
    try:
        sample = collector.take_sample(0).sample
        assert len(collector._shards.worker_pids) == 2
    finally:
        collector.close()
        stop.set()
    assert len([p for p in sample.processes if p.py_status == "ok"]) == 4
    assert not sample.failures


def test_a_dead_worker_loses_nothing(spawn: Any) -> None:
    target = _parked_job(spawn)
    collector = Collector(target.pid, pyspy=_pyspy(), workers=2)
    try:
        first = collector.take_sample(0).sample
        os.kill(collector._shards.worker_pids[0], signal.SIGKILL)
        time.sleep(0.2)
        second = collector.take_sample(1).sample
    finally:
        collector.close()
    assert not second.failures
    assert [p.py_status for p in second.processes] == [p.py_status for p in first.processes]
    assert len([p for p in second.processes if p.py_status == "ok"]) == 4


def _fds(pid: int) -> List[str]:
    base = Path(f"/proc/{pid}/fd")
    return sorted(os.readlink(base / n) for n in os.listdir(base) if int(n) > 2)


def test_workers_hold_only_their_pipes_and_the_job_board(spawn: Any, tmp_path: Path) -> None:
    target = _parked_job(spawn)
    held = open(tmp_path / "held-by-diag", "w")  # noqa: SIM115 - open across the fork
    collector = Collector(target.pid, pyspy=_pyspy(), workers=2)
    try:
        collector.take_sample(0)
        for pid in collector._shards.worker_pids:
            fds = _fds(pid)
            pipes = [f for f in fds if f.startswith("pipe:")]
            # The ticket pipe twice (its shared end and a non-blocking open of it: the worker
            # takes a ticket while native locations are under way), and its answer pipe.
            assert len(pipes) == 3 and len(set(pipes)) == 2, fds
            assert fds == ["/memfd:diag-jobs (deleted)", *pipes], fds
    finally:
        collector.close()
        held.close()


WATCHER = """
import sys, time
from diag.collect.collector import Collector
c = Collector(int(sys.argv[1]), pyspy=None, workers=2)
c.take_sample(0)
print(*c._shards.worker_pids, flush=True)
time.sleep(600)
"""


def test_workers_end_when_diag_is_killed(spawn: Any) -> None:
    target = _parked_job(spawn)
    diag = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(target.pid)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert diag.stdout is not None
        workers = [int(w) for w in diag.stdout.readline().split()]
        assert len(workers) == 2
        diag.kill()
        diag.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
            for w in workers:  # they are diag's children: reap what init did not yet
                try:
                    os.waitpid(w, os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.05)
        alive = [w for w in workers if _running(w)]
        assert not alive, alive
    finally:
        if diag.poll() is None:
            diag.kill()
        if diag.stdout is not None:
            diag.stdout.close()


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_collector_dropped_without_close_ends_its_workers(spawn: Any) -> None:
    import gc

    target = _parked_job(spawn)
    collector = Collector(target.pid, pyspy=None, workers=2)
    collector.take_sample(0)
    workers = list(collector._shards.worker_pids)
    assert len(workers) == 2
    del collector
    gc.collect()
    assert not [w for w in workers if _running(w)]


def test_without_workers_a_sample_of_hung_reads_ends_within_its_budget(
    spawn: Any, monkeypatch: Any
) -> None:
    """Every process's read hangs in turn (D state): the sample still ends, in about the
    probe timeout plus its grace, not one timeout per process."""
    import threading

    from diag.collect.process_work import ProcessReader

    target = _parked_job(spawn)
    collector = Collector(target.pid, pyspy=_pyspy(), workers=0, probe_timeout_s=0.5)
    never = threading.Event()
    monkeypatch.setattr(ProcessReader, "work", lambda self, job: never.wait())
    try:
        started = time.monotonic()
        sample = collector.take_sample(0).sample
        took_s = time.monotonic() - started
    finally:
        never.set()
        collector.close()
    assert took_s < 0.5 + 2 * 2.0 + 1.0
    reasons = [f.reason for f in sample.failures if f.probe == "proc"]
    assert len(reasons) == len(sample.processes) > 2, reasons  # none read
    assert "not read: timed out after 2.5s" in reasons
    assert "not read: the sample's 4.5s for these reads ran out first" in reasons


def test_without_memfd_the_board_is_an_unlinked_file(spawn: Any, monkeypatch: Any) -> None:
    """A Python built without ``os.memfd_create`` still gets workers, and the same records."""
    target = _parked_job(spawn)
    monkeypatch.delattr(os, "memfd_create")
    through = Collector(target.pid, pyspy=_pyspy(), workers=2)
    here = Collector(target.pid, pyspy=_pyspy(), workers=0)
    try:
        a = through.take_sample(0).sample
        b = here.take_sample(0).sample
        workers = through._shards.worker_pids
        assert len(workers) == 2
        board = [f for f in _fds(workers[0]) if not f.startswith("pipe:")]
        assert len(board) == 1 and "diag-jobs-" in board[0] and board[0].endswith("(deleted)")
    finally:
        through.close()
        here.close()
    assert _view(a) == _view(b)
    assert not a.failures
