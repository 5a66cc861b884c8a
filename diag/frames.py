"""Which frames are library plumbing and which are the job's own code.

A stack reads as "what is this rank doing" from its innermost frame of *user* code: the
verdict names that frame, the report collapses library frames and keys stack signatures on
their names only (a torch upgrade moves line numbers, not meaning). Both stages need the same
answer, so it lives below both; it knows file names only, nothing about waits.
"""

from __future__ import annotations

from diag.model import Frame

_LIBRARY_MARKERS = (
    "site-packages/",
    "dist-packages/",
    "lib/python",
    "<frozen",
    "torch/",
    "multiprocessing/",
    "asyncio/",
    "concurrent/",
    "http/",
    "importlib/",
)
# py-spy's short filenames drop the directory; these stdlib modules are plumbing too.
_STDLIB_FILES = frozenset(
    [
        "threading.py",
        "queue.py",
        "selectors.py",
        "socket.py",
        "socketserver.py",
        "subprocess.py",
        "ssl.py",
        "connection.py",
        "queues.py",
        "pool.py",
        "popen_fork.py",
        "base_events.py",
        "tasks.py",
        "events.py",
        "synchronize.py",
        "server.py",
    ]
)


def is_library(frame: Frame) -> bool:
    name = frame.filename
    return (
        any(marker in name for marker in _LIBRARY_MARKERS)
        or name.rsplit("/", 1)[-1] in _STDLIB_FILES
    )
