"""Spread a sample's per-process work over forked workers, one per core, so it uses them all.

Why: the /proc read of a rank's threads and the stack read are Python code, and in one
process they share one interpreter lock: with 8 ranks x 64 threads on a 2-core host, threads
only take turns (and pay for every hand-over). Forked workers run the same code
(``diag.process_work``) truly in parallel; a snapshot of N ranks then costs about N / cores
ranks' worth, and the Collector's own threads are left for the GPU, socket and log probes.

Fork, not a new interpreter: a fork is a few milliseconds and needs no imports, where starting
``python -m`` would cost more than the sample it speeds up. Other threads may exist when it
forks (``diag watch -- CMD`` tees the command's output on one): the child has only the forking
thread, and it touches no lock another thread could hold - every module it needs is imported
before, it never writes to ``sys.stdout``/``stderr`` or a log, and CPython re-creates the GIL
and the import lock in a child. A worker closes every inherited file descriptor but its two
pipes (a launched command's output pipe must not be held open by it), ignores SIGINT (Ctrl-C
is diag's to handle) and exits when its request pipe closes - also when diag dies, so no
worker outlives it.

A worker that misses the deadline is killed and its unanswered processes get a "not read"
record; a worker that dies has its share done by the Collector instead. Either way the pool is
closed, and later samples do all of the work in this process: in one thread, one process after
another, each under its own timeout (``diag.serial_lane``) - as on one core, or for one process.
"""

from __future__ import annotations

import os
import selectors
import signal
import struct
import time
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import msgspec

from diag.probes.proctree import Identity
from diag.process_work import ProcessReader, ProcessResult, ProcessWork
from diag.serial_lane import run_serial

_HEADER = struct.Struct("<I")
_MAX_WORKERS = 8
_IN_FLIGHT = 2  # reads a worker holds at once: the next is there while the last is answered
WORKER_EXITED = "a worker exited"
_jobs_codec = (msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(List[ProcessWork]))
_result_codec = (msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(ProcessResult))


def _write_frame(fd: int, payload: bytes) -> None:
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, size: int) -> Optional[bytes]:
    out = b""
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _serve(reader: ProcessReader, requests: int, answers: int) -> None:
    """The worker's loop: a list of ``ProcessWork`` in, one ``ProcessResult`` per process out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    keep = sorted({0, 1, 2, requests, answers})
    for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)
    encode, decode = _result_codec[0].encode, _jobs_codec[1].decode
    while True:
        head = _read_exact(requests, _HEADER.size)
        if head is None:
            return
        body = _read_exact(requests, _HEADER.unpack(head)[0])
        if body is None:
            return
        for job in decode(body):
            answer = reader.identify(job) if job.task == "identity" else reader.work(job)
            _write_frame(answers, encode(answer))


class _Worker:
    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self.requests = requests
        self.answers = answers
        self.buffer = b""
        self.expected = 0  # results still to come
        self.expected_ids = 0  # identities still to come

    def kill(self) -> None:
        for fd in (self.requests, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass


class Pending:
    """Work handed out by ``submit``, to be gathered by ``collect``."""

    def __init__(self, jobs: List[ProcessWork]) -> None:
        self.jobs = jobs
        self.workers: List[_Worker] = []
        self.identities: Dict[int, Optional[Identity]] = {}
        self.own: List[ProcessWork] = []  # done in this process, by ``collect``
        self.queue: List[ProcessWork] = []  # for the next worker that answers
        self.results: Dict[int, ProcessResult] = {}


class ShardPool:
    """Forked workers doing ``ProcessReader.work``; ``run`` gives each a share of a sample."""

    def __init__(self, reader: ProcessReader, workers: Optional[int] = None) -> None:
        self._reader = reader
        wanted = workers if workers is not None else min(os.cpu_count() or 1, _MAX_WORKERS)
        self._wanted = max(wanted, 0)
        self._workers: List[_Worker] = []
        self.broken: Optional[str] = None  # why the pool stopped being used
        # A Collector dropped without close() must not leave its workers until diag exits.
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)

    def start(self, pids: List[int]) -> None:
        """Fork the workers if there is work to share and it is safe now (no other thread in
        this process); without them, ``submit`` keeps all the work here."""
        if self._workers or self.broken is not None or self._wanted < 2 or len(pids) < 2:
            return
        self._reader.warm(pids)
        self._workers.extend(self._fork() for _ in range(self._wanted))

    def _fork(self) -> _Worker:
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                os.close(req_w)
                os.close(ans_r)
                _serve(self._reader, req_r, ans_w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(req_r)
        os.close(ans_w)
        return _Worker(pid, req_w, ans_r)

    @property
    def worker_pids(self) -> List[int]:
        return [w.pid for w in self._workers]

    def submit(self, jobs: Sequence[ProcessWork], weights: Dict[int, int]) -> Pending:
        """Hand each worker its share now (heaviest processes first, to the least loaded), so
        they work while this process does the rest of the sample; ``collect`` gathers.
        Without workers (one core, one process, or none could be started) all of it is done
        here, in one thread: threads of one process would only take turns on its lock."""
        pending = Pending(list(jobs))
        if not self._workers:
            pending.own = list(jobs)
            return pending
        # What identifies new processes is asked first, spread evenly: the Collector discovers
        # them while the workers go on. The reads follow, heaviest process first, a couple at
        # a time: each worker gets the next as it answers, so a faster core (or a worker that
        # drew lighter processes) takes more of them.
        firsts: List[List[ProcessWork]] = [[] for _ in self._workers]
        for i, job in enumerate(j for j in jobs if j.identity):
            firsts[i % len(firsts)].append(msgspec.structs.replace(job, task="identity"))
        pending.queue = sorted(jobs, key=lambda j: -weights.get(j.pid, 1))
        for worker, first in zip(self._workers, firsts):
            work = pending.queue[:_IN_FLIGHT]
            del pending.queue[:_IN_FLIGHT]
            worker.expected, worker.expected_ids, worker.buffer = len(work), len(first), b""
            if not self._send(worker, [*first, *work]):
                pending.own, pending.workers, pending.queue = list(jobs), [], []
                return pending  # all of it here, this time and from now on
            pending.workers.append(worker)
        return pending

    def _send(self, worker: _Worker, jobs: List[ProcessWork]) -> bool:
        if not jobs:
            return True
        try:
            _write_frame(worker.requests, _jobs_codec[0].encode(jobs))
        except OSError as exc:
            self._break(f"a worker could not be asked ({exc.strerror})")
            return False
        return True

    def collect_identities(
        self, pending: Pending, timeout_s: float
    ) -> Dict[int, Optional[Identity]]:
        """What identifies each new process a worker read (None: unreadable there), as soon
        as it is in; the others are for the Collector's discovery to read (with timeouts)."""
        self._pump(pending, lambda: all(w.expected_ids == 0 for w in pending.workers), timeout_s)
        return pending.identities

    def collect(
        self, pending: Pending, timeout_s: float
    ) -> Tuple[Dict[int, ProcessResult], Dict[int, str]]:
        """Results by pid, and for each process without one, why (timeout, worker died).

        What a worker that died left undone is done here too, in the same lane as this
        process's own share (a worker that hung is not retried: the read would hang here)."""
        failed = self._run_here(pending, pending.own, timeout_s)
        self._pump(
            pending,
            lambda: not pending.queue and all(w.expected == 0 for w in pending.workers),
            timeout_s,
        )
        if self.broken == WORKER_EXITED:
            undone = [job for job in pending.jobs if job.pid not in pending.results]
            failed.update(self._run_here(pending, undone, timeout_s))
        missing = {
            job.pid: f"not read: {failed.get(job.pid) or self.broken or 'no answer'}"
            for job in pending.jobs
            if job.pid not in pending.results
        }
        return pending.results, missing

    def _run_here(
        self, pending: Pending, jobs: List[ProcessWork], timeout_s: float
    ) -> Dict[int, str]:
        """``jobs`` one after another in one thread of this process (``diag.serial_lane``)."""
        by_pid = {job.pid: job for job in jobs}
        done, failed = run_serial(
            list(by_pid), lambda pid: self._reader.work(by_pid[pid]), timeout_s
        )
        pending.results.update(done)
        return failed

    def _pump(self, pending: Pending, done: Callable[[], bool], timeout_s: float) -> None:
        """Read the workers' answers until ``done()``, a worker dies or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            for worker in pending.workers if self.broken is None else []:
                if worker.expected or worker.expected_ids:
                    selector.register(worker.answers, selectors.EVENT_READ, worker)
            while not done() and selector.get_map() and self.broken is None:
                remaining = deadline - time.monotonic()
                events = selector.select(remaining) if remaining > 0 else []
                if not events:
                    self._break(f"a worker took longer than {timeout_s:g}s")
                for key, _ in events:
                    worker = key.data
                    chunk = os.read(worker.answers, 1 << 20)
                    if not chunk:
                        self._break(WORKER_EXITED)
                        break
                    worker.buffer += chunk
                    self._take_frames(worker, pending)
                    if worker.expected == 0 and worker.expected_ids == 0:
                        selector.unregister(worker.answers)

    def _take_frames(self, worker: _Worker, pending: Pending) -> None:
        while len(worker.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(worker.buffer)
            if len(worker.buffer) < _HEADER.size + size:
                return
            body = worker.buffer[_HEADER.size : _HEADER.size + size]
            worker.buffer = worker.buffer[_HEADER.size + size :]
            result = _result_codec[1].decode(body)
            if result.partial:
                pending.identities[result.pid] = result.identity
                worker.expected_ids -= 1
            else:
                pending.results[result.pid] = result
                worker.expected -= 1
                if pending.queue and self._send(worker, [pending.queue[0]]):
                    pending.queue.pop(0)
                    worker.expected += 1

    def _break(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
        self.close()

    def close(self) -> None:
        """End the workers (idempotent); later samples run without them."""
        _kill_all(self._workers)


def _kill_all(workers: List[_Worker]) -> None:
    """Kill and reap every worker, emptying the (shared) list."""
    while workers:
        workers.pop().kill()
