"""Which frames are library plumbing and which are the job's own code.

A stack reads as "what is this rank doing" from its innermost frame of *user* code: the
verdict names that frame, the report collapses library frames and keys stack signatures on
their names only (a torch upgrade moves line numbers, not meaning). Both stages need the same
answer, so it lives below both; it knows file names only, nothing about waits. So does the
one stack shape the collector must see too: a lock library polling for a file lock
(``polled_lock``), for which it reads /proc/locks.
"""

from __future__ import annotations

from typing import Sequence, Tuple

from diag.frameworks import union
from diag.model import Frame

# Installed packages are the job's own code (vLLM's engine loop, a trainer installed with pip,
# transformers' from_pretrained: what a reader wants named) unless they are plumbing: the
# framework runtime, servers, event loops, RPC and progress bars a wait passes through.
_PLUMBING_PACKAGES = union.PLUMBING_PACKAGES
# Where installed packages live (the job's own code may be anywhere else).
SITE_DIRS = ("site-packages/", "dist-packages/")
# Standard-library code, wherever a frame's file is, and the packs' code and generated code
# wherever it is installed or written (``library_files``: torch's, Inductor's kernels).
_LIBRARY_MARKERS = (
    "lib/python",
    "<frozen",
    *union.LIBRARY_FILES,
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
    """Plumbing (the standard library, torch, servers, RPC), not the job's own code."""
    name = frame.filename
    for site in SITE_DIRS:
        at = name.rfind(site)
        if at >= 0:
            top = name[at + len(site) :].split("/", 1)[0]
            return top.removesuffix(".py") in _PLUMBING_PACKAGES or top.endswith(".so")
    return (
        any(marker in name for marker in _LIBRARY_MARKERS)
        or name.rsplit("/", 1)[-1] in _STDLIB_FILES
    )


def is_installed_plumbing(frame: Frame) -> bool:
    """Plumbing installed as a package (``site-packages/ray/...``, ``grpc``, ``zmq``, a
    ``.so``), not the standard library: a native wait under such a frame is inside that
    package's own C/C++ code, whose own threads (gRPC's, ZeroMQ's) end it."""
    name = frame.filename
    return is_library(frame) and any(site in name for site in SITE_DIRS)


# A stack's identity, the same for the verdict's rank classes and the report's stack groups:
# each frame's function and file, and its line only in the job's own code (a library upgrade
# moves line numbers, not meaning). Innermost frame first, as stacks are stored.
Signature = Tuple[Tuple[str, str, int], ...]


def stack_signature(frames: Sequence[Frame]) -> Signature:
    """The one stack signature: two stacks are "the same place" when these are equal."""
    return tuple((f.name, f.filename, 0 if is_library(f) else f.line) for f in frames)


def signature_text(sig: Signature) -> str:
    """A signature as people read a call path: outermost first, ``name`` for library frames,
    ``name (file.py:42)`` for the job's own."""
    parts = []
    for name, filename, line in reversed(sig):
        base = filename.rsplit("/", 1)[-1]
        parts.append(f"{name} ({base}:{line})" if line else name)
    return " > ".join(parts)


# Lock libraries that poll for a file lock: (a directory of their package, the functions that
# loop trying it). The sleep between tries is theirs, under these frames (their packs).
_POLLED_LOCKS = union.LOCK_POLLS
POLL_DEPTH = 8  # frames from the top the lock library's retry loop is looked for in


def polled_lock(frames: Sequence[Frame]) -> str:
    """The outermost frame of a polling file-lock library's retry loop near the top of a stack
    (``BaseFileLock.acquire``), or ""."""
    found = ""
    for f in frames[:POLL_DEPTH]:
        for package, names in _POLLED_LOCKS:
            if package in f.filename and f.name.rsplit(".", 1)[-1] in names:
                found = f.name
    return found
