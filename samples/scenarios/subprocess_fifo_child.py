"""deadlocked: a Python job shells out to a non-Python tool (``cat`` on a named pipe) that
nobody ever writes; the parent waits in ``subprocess.run`` with no timeout, the child is
blocked opening the fifo forever - the child is what the user must look at."""

from __future__ import annotations

import os
import subprocess
import tempfile


def fetch_manifest(fifo: str) -> bytes:
    return subprocess.run(["cat", fifo], stdout=subprocess.PIPE, check=True).stdout


def main() -> None:
    fifo = os.path.join(tempfile.mkdtemp(prefix="diag-fifo-"), "manifest")
    os.mkfifo(fifo)
    import threading

    threading.Timer(0.5, lambda: print("READY", flush=True)).start()
    print(fetch_manifest(fifo))


if __name__ == "__main__":
    main()
