"""deadlocked: a job whose log goes through a pipe to a shipper outside the job that stopped
reading - the job writes its records to a FIFO, the shipper (a daemon of its own, not a child
of the job: double-forked, as a log agent is) holds the read end and sleeps, retrying
something of its own, never reading. The pipe fills and the job blocks in ``write``: the
writer and its reader are the picture (rule ``pipe_full``), not 'idle, a timer'.

The shipper exits by itself once the job is gone (it polls for the job's pid)."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time


def shipper(fifo: str, job_pid: int) -> None:
    """The stalled reader, in a process of its own session that outlives its parent."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    fd = os.open(fifo, os.O_RDONLY)
    while os.path.exists(f"/proc/{job_pid}"):
        time.sleep(0.5)  # backing off from its own upstream; it never reads fd
    os.close(fd)
    os._exit(0)


def main() -> None:
    fifo = os.path.join(tempfile.mkdtemp(prefix="diag-shipper-"), "records")
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:
        shipper(fifo, os.getppid())
    os.waitpid(pid, 0)  # the first fork exits at once; the shipper lives on, reparented
    out = os.open(fifo, os.O_WRONLY)
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    line = ("record: " + "x" * 100 + "\n").encode()
    while True:
        os.write(out, line)


if __name__ == "__main__":
    sys.exit(main())
