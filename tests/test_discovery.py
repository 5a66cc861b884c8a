"""TreeDiscovery (issue 19): the same tree as a full walk, without reading every stat."""

from __future__ import annotations

import subprocess
import sys
import time

from diag.probes.discovery import TreeDiscovery
from diag.probes.procfs import ProcFS
from diag.probes.proctree import walk_tree

_PARENT = """
import subprocess, sys
kids = []
for line in sys.stdin:
    kids.append(subprocess.Popen(["sleep", "60"]))
    print(kids[-1].pid, flush=True)
"""


def test_steady_calls_find_new_children_and_lose_exited_ones() -> None:
    procfs = ProcFS()
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        walker = TreeDiscovery(parent.pid, procfs, full_every=1000)
        assert walker().pids == [parent.pid]
        parent.stdin.write("\n")
        parent.stdin.flush()
        kid = int(parent.stdout.readline())
        tree = walker()
        assert tree == walk_tree(parent.pid, procfs) and kid in tree.pids
        assert walker.full_scans == 1  # the new child was found without a full scan
        subprocess.run(["kill", str(kid)], check=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and walker() != walk_tree(parent.pid, procfs):
            time.sleep(0.05)
        assert walker() == walk_tree(parent.pid, procfs)
    finally:
        parent.kill()
        parent.wait()
    assert walker().pids == []
