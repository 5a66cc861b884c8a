"""Spread a sample's per-process work over forked workers, one per core, so it uses them all.

Why: the /proc read of a rank's threads and the stack read are Python code, and in one
process they share one interpreter lock: with 8 ranks x 64 threads on a 2-core host, threads
only take turns (and pay for every hand-over). Forked workers run the same code
(``diag.collect.process_work``) truly in parallel; a snapshot of N ranks then costs about N / cores
ranks' worth, and the Collector's own threads are left for the GPU, socket and log probes.

Fork, not a new interpreter: a fork is a few milliseconds and needs no imports, where starting
``python -m`` would cost more than the sample it speeds up. Other threads may exist when it
forks (``diag watch -- CMD`` tees the command's output on one): the child has only the forking
thread, and it touches no lock another thread could hold - every module it needs is imported
before, it never writes to ``sys.stdout``/``stderr`` or a log, and CPython re-creates the GIL
and the import lock in a child. A worker closes every inherited file descriptor but the
ticket pipe, the job board and its answer pipe (a launched command's output pipe must not be
held open by it), ignores SIGINT (Ctrl-C is diag's to handle) and exits when the ticket pipe
closes - also when diag dies, so no worker outlives it. How work reaches the workers:
``diag.collect.shard_wire``.

A worker that misses the deadline is killed and its unanswered processes get a "not read"
record; a worker that dies has its share done by the Collector instead. Either way the pool is
closed, and later samples do all of the work in this process: in one thread, one process after
another, each under its own timeout (``diag.collect.serial_lane``) - as on one core, or for
one process.
"""

from __future__ import annotations

import os
import selectors
import signal
import tempfile
import time
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import msgspec

from diag.collect.process_work import ProcessReader, ProcessResult, ProcessWork
from diag.collect.serial_lane import DEADLINE_PASSED, run_serial
from diag.collect.shard_wire import post_board, post_tickets, serve, take_frames
from diag.probes.proctree import Identity

_MAX_WORKERS = 8
WORKER_EXITED = "a worker exited"


class _Worker:
    def __init__(self, pid: int, answers: int) -> None:
        self.pid = pid
        self.answers = answers
        self.buffer = b""

    def kill(self) -> None:
        try:
            os.close(self.answers)
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
    """Work posted by ``submit``, to be gathered by ``collect``."""

    def __init__(self, jobs: List[ProcessWork]) -> None:
        self.jobs = jobs
        self.workers: List[_Worker] = []
        self.identities: Dict[int, Optional[Identity]] = {}
        self.ids_due = 0  # identity answers still to come
        self.results_due = 0  # work answers still to come
        self.own: List[ProcessWork] = []  # done in this process, by ``collect``
        self.results: Dict[int, ProcessResult] = {}


class _Shared:
    """The pool's ends of what all workers share: the ticket pipe and the job board."""

    def __init__(self) -> None:
        self.tickets_r, self.tickets_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self.tickets_w, False)  # see ``post_tickets``
        self.board = _new_board()


def _new_board() -> int:
    """A memfd; or, for a Python built without ``os.memfd_create`` (builds made against an
    old glibc for portability, as some standalone and uv-managed ones are), an unlinked
    temporary file: the workers only ``pread`` what the Collector ``pwrite``s there."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("diag-jobs", os.MFD_CLOEXEC)
    fd, path = tempfile.mkstemp(prefix="diag-jobs-")
    os.unlink(path)
    return fd


class ShardPool:
    """Forked workers doing ``ProcessReader.work``; ``submit`` posts a sample's work."""

    def __init__(self, reader: ProcessReader, workers: Optional[int] = None) -> None:
        self._reader = reader
        wanted = workers if workers is not None else min(os.cpu_count() or 1, _MAX_WORKERS)
        self._wanted = max(wanted, 0)
        self._workers: List[_Worker] = []
        self._fds: List[int] = []  # the ticket pipe's write end and the board, while open
        self._round = 0
        self.broken: Optional[str] = None  # why the pool stopped being used
        # A Collector dropped without close() must not leave its workers until diag exits.
        self._finalizer = weakref.finalize(self, _close_all, self._workers, self._fds)

    def shares(self, pids: List[int]) -> bool:
        """Whether this round's work goes to workers (running, or forked by ``start``)."""
        if self.broken is not None:
            return False
        return bool(self._workers) or (self._wanted >= 2 and len(pids) >= 2)

    def start(self, pids: List[int]) -> None:
        """Fork the workers if there is work to share; without them, ``submit`` keeps all
        the work here."""
        if self._workers or not self.shares(pids):
            return
        self._reader.warm(pids)
        try:
            shared = _Shared()
        except OSError as exc:  # no memfd (an old kernel), or out of descriptors
            self.broken = f"workers could not be set up ({exc.strerror})"
            return
        self._workers.extend(self._fork(shared) for _ in range(self._wanted))
        os.close(shared.tickets_r)  # only the workers read tickets
        self._fds.extend((shared.tickets_w, shared.board))

    def _fork(self, shared: _Shared) -> _Worker:
        ans_r, ans_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                os.close(ans_r)
                os.close(shared.tickets_w)
                serve(self._reader, shared.tickets_r, shared.board, ans_w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(ans_w)
        return _Worker(pid, ans_r)

    @property
    def worker_pids(self) -> List[int]:
        return [w.pid for w in self._workers]

    def submit(
        self,
        jobs: Sequence[ProcessWork],
        weights: Dict[int, int],
        offsets: Optional[Dict[int, float]] = None,
    ) -> Pending:
        """Post the round's work: what identifies new processes first (the Collector
        discovers them while the workers go on), then the reads, heaviest process first.
        Without workers (one core, one process, or none could be started) all of it is done
        here, in one thread: threads of one process would only take turns on its lock."""
        pending = Pending(list(jobs))
        identities = [msgspec.structs.replace(j, task="identity") for j in jobs if j.identity]
        posted = identities + sorted(jobs, key=lambda j: -weights.get(j.pid, 1))
        if not self._workers:
            pending.own = list(jobs)
            return pending
        self._round += 1
        tickets_w, board = self._fds
        try:
            # ``offsets``: each CPU's clock for the threads' wait ages (``probes.sched_clock``).
            post_board(board, self._round, posted, offsets)
            count = post_tickets(tickets_w, self._round, len(posted))
        except OSError as exc:
            self._break(f"work could not be posted to the workers ({exc.strerror})")
            pending.own = list(jobs)
            return pending
        # Jobs without a ticket (a pipe smaller than the round) are this process's: an
        # identity is then read by discovery, a read by ``collect``.
        pending.own = [job for job in posted[count:] if job.task == "work"]
        pending.workers = list(self._workers)
        pending.ids_due = min(count, len(identities))
        pending.results_due = max(count - len(identities), 0)
        return pending

    def collect_identities(
        self, pending: Pending, timeout_s: float
    ) -> Dict[int, Optional[Identity]]:
        """What identifies each new process a worker read (None: unreadable there), as soon
        as it is in; the others are for the Collector's discovery to read (with timeouts)."""
        self._pump(pending, lambda: pending.ids_due == 0, timeout_s)
        return pending.identities

    def collect(
        self, pending: Pending, timeout_s: float, budget_s: float
    ) -> Tuple[Dict[int, ProcessResult], Dict[int, str]]:
        """Results by pid, and for each process without one, why (timeout, worker died).

        ``timeout_s`` bounds each read done here and the wait for the workers; ``budget_s`` the
        whole (the caller runs this in its own thread, trusting it to end). What a worker that
        died left undone is done here too, in the same lane as this process's own share (a
        worker that hung is not retried: the read would hang here)."""
        end = time.monotonic() + budget_s
        failed = self._run_here(pending, pending.own, timeout_s, end)
        self._pump(
            pending,
            lambda: pending.results_due == 0 and pending.ids_due == 0,
            min(timeout_s, end - time.monotonic()),
        )
        if self.broken == WORKER_EXITED:
            undone = [job for job in pending.jobs if job.pid not in pending.results]
            failed.update(self._run_here(pending, undone, timeout_s, end))
        missing = {
            job.pid: f"not read: {self._why(failed.get(job.pid), budget_s)}"
            for job in pending.jobs
            if job.pid not in pending.results
        }
        return pending.results, missing

    def _why(self, failed: Optional[str], budget_s: float) -> str:
        if failed == DEADLINE_PASSED:
            return f"the sample's {budget_s:g}s for these reads ran out first"
        return failed or self.broken or "no answer"

    def _run_here(
        self, pending: Pending, jobs: List[ProcessWork], timeout_s: float, end: float
    ) -> Dict[int, str]:
        """``jobs`` one after another in one thread of this process (``collect.serial_lane``)."""
        by_pid = {job.pid: job for job in jobs}
        done, failed = run_serial(
            list(by_pid),
            lambda pid: self._reader.work(by_pid[pid]),
            timeout_s,
            deadline=end,
        )
        pending.results.update(done)
        return failed

    def _pump(self, pending: Pending, done: Callable[[], bool], timeout_s: float) -> None:
        """Read the workers' answers until ``done()``, a worker dies or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            for worker in pending.workers if self.broken is None else []:
                selector.register(worker.answers, selectors.EVENT_READ, worker)
            while not done() and self.broken is None:
                remaining = deadline - time.monotonic()
                events = selector.select(remaining) if remaining > 0 else []
                if not events:
                    self._break(f"a worker took longer than {timeout_s:g}s")
                for key, _ in events:
                    worker = key.data
                    chunk = os.read(worker.answers, 1 << 16)
                    if not chunk:
                        self._break(WORKER_EXITED)
                        break
                    results, worker.buffer = take_frames(worker.buffer + chunk)
                    for result in results:
                        if result.partial:
                            pending.identities[result.pid] = result.identity
                            pending.ids_due -= 1
                        else:
                            pending.results[result.pid] = result
                            pending.results_due -= 1

    def _break(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
        self.close()

    def close(self) -> None:
        """End the workers (idempotent); later samples run without them."""
        _close_all(self._workers, self._fds)


def _close_all(workers: List[_Worker], fds: List[int]) -> None:
    """Close the shared ends (a worker waiting for a ticket then exits) and kill and reap
    every worker, emptying the (shared) lists."""
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
    while workers:
        workers.pop().kill()
