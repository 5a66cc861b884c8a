"""idle: a job that stops to ask a question (``input()``) on stdin that nobody answers (a
pipe whose writer stays open and silent, as under a launcher) - it waits on the user, not on a
peer: diag must say it reads stdin, so the user answers the prompt or closes stdin."""

from __future__ import annotations

import os
import threading


def detach_stdin() -> int:
    """Stdin becomes a pipe whose write end this process keeps open and never writes (as a
    launcher that holds the job's stdin does); returns the write end so it stays open."""
    read_fd, write_fd = os.pipe()
    os.dup2(read_fd, 0)
    os.close(read_fd)
    return write_fd


def confirm_overwrite() -> bool:
    threading.Timer(0.5, lambda: print("READY", flush=True)).start()
    return input("checkpoint exists, overwrite? [y/N] ").strip().lower() == "y"


if __name__ == "__main__":
    _keep = detach_stdin()
    confirm_overwrite()
