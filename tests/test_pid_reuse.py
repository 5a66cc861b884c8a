"""A process is (pid, start time): a PID reused mid-capture is not the process recorded under it.

Live: a rank-like child dies and the next child of the same parent is forked into its PID
(``tests/programs/pid_reuse.py``, root only). Recorded: the tree walk over a /proc tree written
here, whose PIDs name other processes than the ones ``known``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import PROGRAMS

from diag.collect.process_table import ProcessTable
from diag.commands.capture import run_capture
from diag.model import HostInfo, Sample
from diag.probes.procfs import ProcFS
from diag.probes.proctree import walk_tree
from diag.redaction.redact import Redactor

SECRET = "Newcomer-Pl4nted-dbpass"  # tests/programs/pid_reuse.py plants it in the newcomer


@pytest.mark.skipif(os.geteuid() != 0, reason="ns_last_pid is written by root only")
def test_reused_pid_reads_exited_and_the_newcomer_is_not_filed_under_it(
    spawn, tmp_path: Path
) -> None:
    log, done = tmp_path / "job.log", tmp_path / "done.json"
    prog = spawn([sys.executable, str(PROGRAMS / "pid_reuse.py"), str(log), str(done)])
    pids: Dict[str, int] = json.loads(prog.lines[-1].split("READY", 1)[1])
    child = pids["child"]
    reused: List[int] = []

    def after(sample: Sample) -> None:
        if sample.index != 0:
            return
        os.kill(prog.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        reused.append(json.loads(done.read_text())["pid"] if done.exists() else None)

    out = tmp_path / "run.json"
    outcome = run_capture(
        prog.pid, interval_s=0.2, count=3, out=str(out), log_paths=[str(log)], on_sample=after
    )
    if reused != [child]:
        pytest.skip("another process of the host took the PID first every time")

    bundle = outcome.bundle
    infos = [p for p in bundle.processes if p.pid == child]
    assert len(infos) == 1 and "old_child_waits" in " ".join(infos[0].cmdline)
    assert infos[0].rank == 0 and infos[0].first_seen_sample == 0
    first, *later = bundle.samples
    assert _status(first, child) == "alive"
    for sample in later:  # the old process reads exited; the newcomer is not sampled as it
        assert _status(sample, child) == "exited", sample.index
    for sample in bundle.samples:
        for ps in sample.processes:
            for thread in ps.threads:
                stack = bundle.stacks.get(thread.stack_id or "")
                assert stack is None or all(f.name != "newcomer_waits" for f in stack.frames)
    assert any(
        f.probe == "identity" and f.pid == child and "took its PID" in f.reason
        for s in later
        for f in s.failures
    )
    assert outcome.redactor is not None and SECRET not in outcome.redactor.scrub(SECRET)
    bundle_text = out.read_text()
    assert "newcomer connects with" in bundle_text  # the newcomer's log line was read...
    for ext in ("json", "html", "md"):  # ...and its secret, told only by its env, scrubbed
        assert SECRET not in (tmp_path / f"run.{ext}").read_text(), ext


def _status(sample: Sample, pid: int) -> str:
    return next(ps.status for ps in sample.processes if ps.pid == pid)


def _stat(pid: int, ppid: int, start: int, name: str = "python") -> str:
    fields = ["S", str(ppid), *["0"] * 17, str(start), "0", "0"]  # fields 3..24
    return f"{pid} ({name}) " + " ".join(fields) + "\n"


def _tree(root: Path, procs: Dict[int, tuple]) -> ProcFS:  # type: ignore[type-arg]
    for pid, (ppid, start) in procs.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "stat").write_text(_stat(pid, ppid, start))
    return ProcFS(root)


def test_walk_leaves_out_a_reused_pid_and_its_children(tmp_path: Path) -> None:
    procfs = _tree(tmp_path, {100: (1, 500), 101: (100, 600), 102: (101, 700), 103: (100, 650)})
    tree = walk_tree(100, procfs)
    assert tree.starts == {100: 500, 101: 600, 102: 700, 103: 650} and tree.reused == {}
    assert tree.pids == [100, 101, 102, 103]
    # 101 was recorded with another start: a new process took its PID.
    tree = walk_tree(100, procfs, {100: 500, 101: 550, 103: 650})
    assert tree.pids == [100, 103] and tree.reused == {101: 600}


def test_walk_of_a_root_whose_pid_names_another_process_is_empty(tmp_path: Path) -> None:
    procfs = _tree(tmp_path, {100: (1, 900), 101: (100, 950)})
    tree = walk_tree(100, procfs, {100: 500})  # the root exited; its PID is another's now
    assert tree.pids == [] and tree.reused == {}
    assert walk_tree(100, procfs, {100: 900}).pids == [100, 101]


def test_newcomers_secrets_are_learned_once_without_a_record(tmp_path: Path) -> None:
    procfs = _tree(tmp_path, {100: (1, 500), 101: (100, 600)})
    (tmp_path / "101" / "environ").write_bytes(b"DB_PASSWORD=" + SECRET.encode() + b"\0")
    (tmp_path / "101" / "cmdline").write_bytes(b"python\0--api-key\0argvPl4ntedKey77\0")
    redactor = Redactor()
    table = ProcessTable(100, procfs, redactor, lambda: HostInfo(hostname="h"), 5.0)
    assert table.learn_newcomers({101: 600}) == [101]
    assert table.learn_newcomers({101: 600}) == []  # once per (pid, start)
    assert SECRET not in redactor.scrub(f"x {SECRET}")
    assert "argvPl4ntedKey77" not in redactor.scrub("argvPl4ntedKey77")
    assert table.infos == {}
    # Read as another process than the walk saw (its start differs): nothing is learned.
    other = Redactor()
    table = ProcessTable(100, procfs, other, lambda: HostInfo(hostname="h"), 5.0)
    assert table.learn_newcomers({101: 599}) == [101]
    assert SECRET in other.scrub(SECRET)


def test_a_root_whose_pid_names_another_process_is_not_alive(tmp_path: Path) -> None:
    from diag.collect.collector import Collector

    procfs = _tree(tmp_path, {100: (1, 500)})
    collector = Collector(100, procfs=procfs)
    try:
        collector.table.discover([100], 0)
        assert collector.alive() and collector.table.starts == {100: 500}
        _tree(tmp_path, {100: (1, 900)})  # the root exited; a new process took its PID
        assert not collector.alive()
        assert collector._tree().pids == []
    finally:
        collector.close()
