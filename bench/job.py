"""The situations the benchmarks measure, built from real processes (stdlib only).

Run as a script, this file is the program of each situation; imported, it starts them:

* ``start_job(ranks, threads)``: a torchrun-like launcher with ``ranks`` children carrying
  RANK/LOCAL_RANK/WORLD_SIZE, each with ``threads`` OS threads. The threads are what makes a
  dump expensive, so they look like a wedged training rank's: the main thread parked in a
  "barrier" (an Event), workers parked a few frames deep on Events and queues, a few waking up
  every half second (timers, heartbeats). Nothing spins: a hung job is the case diag is for,
  and 8 spinning ranks on a 2-core machine would measure the scheduler, not diag.
* ``start_job(ranks, threads, busy=N)``: the same job with ``N`` of each rank's threads
  spinning (a loop of C-level work, ``sum`` over a range, with the interpreter lock handed
  over as usual): the common case of a real GPU job, whose ranks each have a thread in state R
  (an NCCL/CUDA host spin, a busy-polling scheduler). What it measures is the native-location
  probe's cost (``diag.probes.native_location``: a perf window for every process with a running
  thread), not the scheduler's, so keep ``N`` small.
* ``start_counter()``: a CPU-bound target that counts iterations of a fixed unit of Python
  work into a shared 8-byte file (mmap), so its throughput can be read from outside at any
  moment without talking to it; it also has a few parked threads, as a real trainer does.

Both print ``READY`` once in the state to be measured (the handshake tests/conftest.py uses);
``stop()`` kills the whole process group.
"""

from __future__ import annotations

import json
import mmap
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional, Sequence, TypeVar

_COUNT = struct.Struct("<Q")
_FLUSH_EVERY = 256  # iterations between writes of the counter (a write costs ~0.1 µs)


# -- the programs (run in the child processes) ------------------------------------------------


def _park(depth: int, kind: int, stop: threading.Event, work: queue.Queue[int]) -> None:
    """Wait a few frames deep, as library code does; ``kind`` picks the wait."""
    if depth > 0:
        _park(depth - 1, kind, stop, work)
        return
    if kind == 0:
        stop.wait()
    elif kind == 1:
        work.get()
    else:
        while not stop.wait(0.5):
            pass


def _start_threads(count: int) -> threading.Event:
    stop = threading.Event()
    work: queue.Queue[int] = queue.Queue()
    for i in range(count):
        kind = 2 if i % 16 == 15 else i % 2
        threading.Thread(
            target=_park, args=(4 + i % 5, kind, stop, work), name=f"worker-{i}", daemon=True
        ).start()
    return stop


def _spin(stop: threading.Event) -> None:
    """A thread always in state R: C-level work in a loop that never waits."""
    while not stop.is_set():
        sum(range(256))


def _rank_main(threads: int, busy: int = 0) -> None:
    busy = min(busy, max(threads - 1, 0))
    barrier = _start_threads(max(threads - 1 - busy, 0))
    for i in range(busy):
        threading.Thread(target=_spin, args=(barrier,), name=f"spin-{i}", daemon=True).start()
    print("hello", flush=True)
    barrier.wait()


def _launcher_main(ranks: int, threads: int, busy: int = 0) -> None:
    children = []
    for rank in range(ranks):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(ranks),
            LOCAL_WORLD_SIZE=str(ranks),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT="29500",
        )
        argv = [sys.executable, __file__, "rank", str(threads), str(busy)]
        children.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE))
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
    print("READY " + json.dumps([c.pid for c in children]), flush=True)
    while True:
        time.sleep(3600)


def _counter_main(path: str, threads: int) -> None:
    _start_threads(threads)
    fd = os.open(path, os.O_RDWR)
    shared = mmap.mmap(fd, _COUNT.size)
    count = 0
    print("READY", flush=True)
    while True:
        for _ in range(_FLUSH_EVERY):
            sum(range(64))  # the fixed unit of work: ~1 µs of interpreter time
        count += _FLUSH_EVERY
        _COUNT.pack_into(shared, 0, count)


# -- starting them (the benchmark side) -------------------------------------------------------


_S = TypeVar("_S", bound="ProcessGroup")


class ProcessGroup:
    """A program in its own process group; killed as a group by ``stop``. (The tests'
    ``Started`` is one too: ``tests/conftest.py``.)"""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class Started(ProcessGroup):
    """A benchmark program that printed its READY line (which may carry data)."""

    def __init__(self, proc: subprocess.Popen[str], ready_line: str) -> None:
        super().__init__(proc)
        self.ready_line = ready_line


def _start(argv: Sequence[str], timeout_s: float = 60.0) -> Started:
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("READY"):
            return Started(proc, line.strip())
    Started(proc, "").stop()
    raise RuntimeError(f"{list(argv)} did not print READY within {timeout_s:g}s")


class Job(Started):
    """The launcher of a started job; ``rank_pids`` in rank order."""

    @property
    def rank_pids(self) -> List[int]:
        pids: List[int] = json.loads(self.ready_line.split(" ", 1)[1])
        return pids


def start_job(ranks: int, threads: int = 64, busy: int = 0) -> Job:
    """``busy``: threads of each rank (of its ``threads``) that spin, always in state R."""
    started = _start([sys.executable, __file__, "job", str(ranks), str(threads), str(busy)])
    return Job(started.proc, started.ready_line)


class Counter(Started):
    """The CPU-bound target; ``count()`` reads its iteration counter."""

    def __init__(self, proc: subprocess.Popen[str], ready_line: str, path: Path) -> None:
        super().__init__(proc, ready_line)
        self.path = path
        self._fh = open(path, "rb")  # noqa: SIM115 - kept open for the counter's lifetime
        self._map = mmap.mmap(self._fh.fileno(), _COUNT.size, access=mmap.ACCESS_READ)

    def count(self) -> int:
        """The counter, read until two reads agree: the 8-byte copy is not atomic, and a read
        torn by the target's write once gave a window a negative throughput."""
        while True:
            first: int = _COUNT.unpack_from(self._map, 0)[0]
            if _COUNT.unpack_from(self._map, 0)[0] == first:
                return first

    def stop(self) -> None:
        super().stop()
        self._map.close()
        self._fh.close()


def start_counter(path: Path, threads: int = 8) -> Counter:
    path.write_bytes(bytes(_COUNT.size))
    started = _start([sys.executable, __file__, "counter", str(path), str(threads)])
    return Counter(started.proc, started.ready_line, path)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    role = args[0] if args else ""
    if role == "job":
        _launcher_main(int(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else 0)
    elif role == "rank":
        _rank_main(int(args[1]), int(args[2]) if len(args) > 2 else 0)
    elif role == "counter":
        _counter_main(args[1], int(args[2]))
    else:
        raise SystemExit(
            "usage: job.py job RANKS THREADS [BUSY] | rank THREADS [BUSY] | counter PATH THREADS"
        )


if __name__ == "__main__":
    main()
