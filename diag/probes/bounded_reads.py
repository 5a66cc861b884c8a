"""Many small /proc reads in one pass, none of which may hang the pass.

Why: reading ``/proc/PID/cmdline`` or ``environ`` takes the target's memory-map lock; a process
whose lock is held by a thread stuck in the kernel (state D: a hung NFS page-in, a wedged GPU
driver) blocks the reader, uninterruptibly, for as long as it stays stuck - the ``ps aux`` that
hangs on a sick host, which is exactly the host diag is run on. ``diag ps`` reads the argv and
environment of every Python-looking process in-process (a fork per process would cost 100x),
so the reads run in a worker thread the caller watches: a read that has not returned after
``stall_s`` is given up on (recorded, its thread abandoned - nothing can interrupt it) and a
fresh worker goes on with the next one. Past ``max_hung`` stuck reads the rest are left unread
and recorded: a host where every read hangs gets an answer in seconds, not never.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from diag.probes.procfs import read_capped

STALL_S = 1.0
MAX_HUNG = 4


class Read(NamedTuple):
    path: str
    max_bytes: int
    # How to read it (path, max_bytes, progress) -> bytes or None, calling progress() after
    # each piece it read - the stall is timed from the last one; ``read_capped`` when not
    # given (an environ block is streamed whole by ``probes.env.stream_environ`` instead).
    reader: Optional[Callable[[str, int, Callable[[], None]], Optional[bytes]]] = None


class Outcome(NamedTuple):
    """Each read's bytes (None: unreadable, stuck or not tried), which got stuck, and which
    were not tried because too many had."""

    data: List[Optional[bytes]]
    hung: Tuple[int, ...]
    skipped: Tuple[int, ...]


class _Worker(threading.Thread):
    def __init__(self, reads: Sequence[Read], first: int, data: List[Optional[bytes]]) -> None:
        super().__init__(name="diag-proc-reads", daemon=True)  # never keeps diag from exiting
        self.reads = reads
        self.first = first
        self.data = data
        self.at: Tuple[int, float] = (first, time.monotonic())  # (read in flight, since)
        self.abandoned = False

    def touch(self) -> None:
        """The read in flight moved on (a piece of it came back): its stall starts again."""
        self.at = (self.at[0], time.monotonic())

    def run(self) -> None:
        for i in range(self.first, len(self.reads)):
            if self.abandoned:
                return
            self.at = (i, time.monotonic())
            read = self.reads[i]
            if read.reader is not None:
                value = read.reader(read.path, read.max_bytes, self.touch)
            else:
                value = read_capped(read.path, read.max_bytes)
            if self.abandoned:
                return  # given up on: a fresh worker owns the rest
            self.data[i] = value


def read_all(reads: Sequence[Read], stall_s: float = STALL_S, max_hung: int = MAX_HUNG) -> Outcome:
    """Every read of ``reads``, in order, each given ``stall_s`` to return."""
    data: List[Optional[bytes]] = [None] * len(reads)
    hung: List[int] = []
    first = 0
    while first < len(reads):
        worker = _Worker(reads, first, data)
        worker.start()
        stuck = _watch(worker, stall_s)
        if stuck is None:
            break
        worker.abandoned = True
        hung.append(stuck)
        first = stuck + 1
        if len(hung) >= max_hung:
            return Outcome(data, tuple(hung), tuple(range(first, len(reads))))
    return Outcome(data, tuple(hung), ())


def _watch(worker: _Worker, stall_s: float) -> Optional[int]:
    """Wait for ``worker``; the index of the read it is stuck in, or None when it finished."""
    while True:
        worker.join(timeout=min(0.05, stall_s))
        if not worker.is_alive():
            return None
        index, since = worker.at
        if time.monotonic() - since > stall_s:
            return index
