"""deadlocked: the deadlock the subprocess docs warn about - the parent calls ``Popen.wait()``
on a child whose stdout is a pipe nobody reads; the child fills the 64 KB pipe buffer and
blocks in ``write`` forever, the parent waits for it to exit forever."""

from __future__ import annotations

import subprocess
import sys
import threading

CHILD = """
import sys
for i in range(10**6):
    sys.stdout.write(f"record {i}: " + "x" * 100 + "\\n")
"""


def export_records() -> int:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    return child.wait()  # should have been communicate()


if __name__ == "__main__":
    export_records()
