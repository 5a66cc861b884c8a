"""deadlocked, with the worker named, not "a task was lost (a worker killed...)": a
``ProcessPoolExecutor`` task opens a named pipe (a feature stream another service was to
write) that no process opens for writing; the worker blocks in ``open`` and the main process
waits in ``Future.result``. The kernel names the wait (``wait_for_partner``): the pool worker
is the end of the chain, and the remedy is the pipe's writer. Contrast: ``pool_lost_task``
(a worker SIGKILLed mid-task: nothing names a blocked worker, the task was lost)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import tempfile
import time

LIFETIME_S = 600  # SIGALRM's default action ends the processes then, whatever happens


def read_stream(path: str) -> int:
    signal.alarm(LIFETIME_S)
    with open(path, "rb") as f:  # blocks until a writer opens the pipe
        return len(f.read(1 << 20))


def main() -> None:
    signal.alarm(LIFETIME_S)
    fifo = os.path.join(tempfile.mkdtemp(prefix="diag-fifo-"), "features.fifo")
    os.mkfifo(fifo)
    with cf.ProcessPoolExecutor(max_workers=2) as pool:
        result = pool.submit(read_stream, fifo)
        time.sleep(1.5)
        print("READY", flush=True)
        result.result()


if __name__ == "__main__":
    main()
