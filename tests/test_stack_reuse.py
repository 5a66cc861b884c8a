"""Stacks are not read again for a process none of whose threads ran since its last dump.

Real processes, real py-spy (counted through a wrapper script), real /proc: a process parked on
locks reuses its dump from the second sample on, with identical stacks; a process that keeps
waking never does. The same holds for diag's in-process reader, which is the default on this
machine's CPython 3.11 and never runs py-spy there.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, List

from conftest import PROGRAMS, run_diag

from diag.bundle.io import load_bundle
from diag.collect.collector import Collector
from diag.probes.stacks import find_pyspy


def _counting_pyspy(tmp_path: Path) -> Path:
    real = find_pyspy()
    assert real is not None
    count = tmp_path / "calls"
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> "{count}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _samples(collector: Collector) -> List[Any]:
    """Three samples 0.3 s apart, as a watch takes them (the gap is what lets threads run)."""
    out = []
    try:
        for i in range(3):
            if i:
                time.sleep(0.3)
            out.append(collector.take_sample(i).sample)
    finally:
        collector.close()
    return out


def _calls(tmp_path: Path) -> int:
    """How many times py-spy was asked to dump (not for its --version)."""
    path = tmp_path / "calls"
    return path.read_text().split().count("dump") if path.exists() else 0


def test_parked_process_reuses_its_dump(spawn: Any, tmp_path: Path) -> None:
    target = spawn([sys.executable, str(PROGRAMS / "lock_waiters.py"), "2", "1"])
    pyspy = str(_counting_pyspy(tmp_path))
    samples = _samples(Collector(target.pid, pyspy=pyspy, stack_reader="py-spy"))
    procs = [s.processes[0] for s in samples]
    assert [p.py_status for p in procs] == ["ok", "ok", "ok"]
    assert [p.stacks_reused for p in procs] == [False, True, True]
    assert _calls(tmp_path) == 1
    stacks = [{t.tid: t.stack_id for t in p.threads} for p in procs]
    assert stacks[0] == stacks[1] == stacks[2]
    assert sum(1 for sid in stacks[0].values() if sid) == 4  # main + 3 waiters


BUSY = """
import threading, time
def tick():
    while True:
        time.sleep(0.05)
threading.Thread(target=tick, daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""


def test_process_that_wakes_is_dumped_every_sample(spawn: Any, tmp_path: Path) -> None:
    target = spawn([sys.executable, "-c", BUSY])
    pyspy = str(_counting_pyspy(tmp_path))
    samples = _samples(Collector(target.pid, pyspy=pyspy, stack_reader="py-spy"))
    assert not any(s.processes[0].stacks_reused for s in samples)
    assert _calls(tmp_path) == 3


def test_in_process_reader_reuses_the_same_way_without_pyspy(spawn: Any, tmp_path: Path) -> None:
    parked = spawn([sys.executable, str(PROGRAMS / "lock_waiters.py"), "2", "1"])
    waking = spawn([sys.executable, "-c", BUSY])
    pyspy = str(_counting_pyspy(tmp_path))
    parked_procs = [s.processes[0] for s in _samples(Collector(parked.pid, pyspy=pyspy))]
    waking_procs = [s.processes[0] for s in _samples(Collector(waking.pid, pyspy=pyspy))]
    assert [p.stack_reader for p in parked_procs + waking_procs] == ["diag"] * 6
    assert [p.stacks_reused for p in parked_procs] == [False, True, True]
    assert not any(p.stacks_reused for p in waking_procs)
    assert _calls(tmp_path) == 0
    stacks = [{t.tid: t.stack_id for t in p.threads} for p in parked_procs]
    assert stacks[0] == stacks[1] == stacks[2]
    assert sum(1 for sid in stacks[0].values() if sid) == 4


def test_capture_report_says_when_pyspy_was_skipped(spawn: Any, tmp_path: Path) -> None:
    target = spawn([sys.executable, str(PROGRAMS / "lock_waiters.py"), "2", "1"])
    out = tmp_path / "r.json"
    done = run_diag(
        ["capture", "--pid", str(target.pid), "--interval", "0.3", "--count", "3", "-o", str(out)]
    )
    assert done.returncode == 0, done.stderr
    bundle = load_bundle(out)
    assert [p.stacks_reused for s in bundle.samples for p in s.processes] == [False, True, True]
    html = out.with_suffix(".html").read_text()
    assert "ok, read by diag (not read again in 2 samples" in html
