"""deadlocked: a data-prep driver runs a shard exporter as a child with ``stdout=PIPE`` and,
to show a heartbeat, waits for it with ``while proc.poll() is None: time.sleep(0.25)`` -
reading its output only once it exits. The exporter prints a JSON manifest line per shard,
fills the 64 KiB pipe and blocks in ``write``: it waits for the driver to read, the driver
for it to exit. The driver's timer wakes it four times a second and each time it only asks
whether the child is done.

``run(drain=True)`` (child_pipe_drained.py): the contrast, a driver that reads the child's
output line by line as it comes (``for line in proc.stdout``) - the exporter goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

EXPORTER = r"""
import json, sys, time
for shard in range(10**6):
    sys.stdout.write(json.dumps({"shard": shard, "path": f"/data/out/{shard:06d}.bin",
                                 "rows": 4096, "sha": "0" * 64}) + "\n")
    if shard % 50 == 0:
        sys.stdout.flush()
        time.sleep(0.01)
"""


def run(drain: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-c", EXPORTER], stdout=subprocess.PIPE, text=True)
    print("READY", flush=True)
    assert proc.stdout is not None
    if drain:
        rows = 0
        for line in proc.stdout:
            rows += json.loads(line)["rows"]
        return
    while proc.poll() is None:
        time.sleep(0.25)
    manifest = proc.stdout.read()
    print(len(manifest.splitlines()), "shards")


if __name__ == "__main__":
    run(drain=False)
