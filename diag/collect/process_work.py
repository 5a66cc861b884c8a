"""One process's share of a sample: its /proc read and its stack read, as plain records.

Both the Collector (in its own threads) and the forked shard workers (``diag.collect.shards``) run
exactly this, so a sample means the same whichever did the work. The records are msgspec
Structs because a worker sends them through a pipe.

The stack read keeps ``diag.probes.quiescence``'s rule: a dump is offered for reuse with the
run counters of every thread read before it (``quiet``); a later sample whose counters are
still exactly those - nothing ran from before that dump until now, so nothing ran during it
either - reuses the dump instead of reading again.
"""

from __future__ import annotations

import errno
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.bundle.stack_budget import FRAME_FILE_CHARS, FRAME_NAME_CHARS, shorten_frames
from diag.model import (
    CpuLimits,
    Frame,
    IoLimit,
    MemLimits,
    OpenFile,
    ProcessSample,
    ThreadSample,
)
from diag.probes.cgroup_cpu import CpuLimitReader
from diag.probes.cgroup_io import IoLimitReader
from diag.probes.cgroup_mem import MemLimitReader
from diag.probes.cpython.pymem import warm_symbols
from diag.probes.native_location import NativeAttribution, NativeProbe
from diag.probes.open_files import read_open_files
from diag.probes.procfs import ProcFS
from diag.probes.proctree import Identity, read_identity
from diag.probes.pyspy_dump import PyThreadDump, StackError, stack_id, truncation_of_stacks
from diag.probes.quiescence import Fingerprint, counters_of, read_counters
from diag.probes.quiescence import quiet as quiet_counters
from diag.probes.resources import read_resources
from diag.probes.sched_clock import SchedClock
from diag.probes.stacks import READER_DIAG, read_python_stacks
from diag.probes.threads import decode_wait_status, read_threads


class StackRead(msgspec.Struct, frozen=True):
    """The outcome of one stack read: dumps, or ``reused``, or an error (``StackError``)."""

    # Each thread's frames are in ``stacks`` under its ``stack_id`` (a pipe carries each
    # distinct stack once, and its id is hashed where the read ran); ``join_stacks`` puts them
    # back with each thread.
    dumps: Optional[List[PyThreadDump]] = None
    stacks: Dict[str, Tuple[Frame, ...]] = {}
    reader: Optional[str] = None
    error_kind: Optional[str] = None
    error: Optional[str] = None
    reused: bool = False
    # The counters after a dump during which no thread ran: the key for reusing it.
    quiet: Optional[Fingerprint] = None
    duration_s: float = 0.0
    # What the budgets cut (``pyspy_dump.truncation_of``: "truncated: ..."), None if nothing.
    truncated: Optional[str] = None


class ProcessWork(msgspec.Struct, frozen=True):
    """What to do for one process; ``quiet`` is the key of its reusable dump, if any."""

    pid: int
    stacks: bool = True
    quiet: Optional[Fingerprint] = None
    identity: bool = False  # a process not seen before: read what identifies it too
    # For a worker: "work" (the reads) or "identity" (only what identifies it, answered first).
    task: str = "work"
    lean: bool = False  # a late sample: skip the optional open-files read


class ProcessResult(msgspec.Struct, frozen=True):
    """The /proc read (or why it failed) and the stack read of one process."""

    pid: int
    # A first, partial answer carries only ``identity`` (None: unreadable, read again there).
    partial: bool = False
    identity: Optional[Identity] = None
    sample: Optional[ProcessSample] = None
    proc_error: Optional[str] = None
    # Why running threads got no native location (perf refused, reads stuck): once a reader.
    native_note: Optional[str] = None
    proc_s: float = 0.0
    stacks: Optional[StackRead] = None


class ProcessReader:
    """The per-process reads, with what they need from the Collector and nothing else."""

    def __init__(
        self,
        procfs: ProcFS,
        host: str,
        machine: str,
        page_size_bytes: int,
        pyspy: str,
        stack_reader: str,
        timeout_s: float,
    ) -> None:
        self.procfs = procfs
        self.host = host
        self.machine = machine
        self.page_size_bytes = page_size_bytes
        self.pyspy = pyspy
        self.stack_reader = stack_reader
        self.timeout_s = timeout_s
        self.exit_codes: Dict[int, Optional[int]] = {}
        # Where running threads are in native code, with the ELF function tables of their
        # libraries cached for the capture: a job's ranks share theirs.
        self.native = NativeProbe(procfs, machine)
        # Each CPU's scheduler clock (threads' wait ages), its offsets kept across processes.
        self.clock = SchedClock(procfs)
        self._cpu_limits: Optional[CpuLimitReader] = None  # made at its first use
        self._mem_limits: Optional[MemLimitReader] = None  # likewise
        self._io_limits: Optional[IoLimitReader] = None  # likewise

    def read_proc(self, pid: int, open_files: bool = True) -> ProcessSample:
        sample, native = self._read_proc(pid, open_files)
        return _with_native(sample, native)

    def _read_proc(
        self, pid: int, open_files: bool = True
    ) -> Tuple[ProcessSample, Optional[NativeAttribution]]:
        """The /proc read, its running threads' native locations still under way (``native``:
        its perf window sleeps while the rest of the process is read)."""
        t_s = time.time()
        try:
            res = read_resources(self.procfs, pid, self.page_size_bytes)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ESRCH):
                return ProcessSample(pid=pid, host=self.host, t_s=t_s, status="exited"), None
            raise
        zombie = res.stat.state in ("Z", "X", "x")
        if zombie:
            self.exit_codes[pid] = decode_wait_status(res.stat.exit_code)
        native = None if zombie else self._threads(pid)
        sample = ProcessSample(
            pid=pid,
            host=self.host,
            t_s=t_s,
            status="zombie" if zombie else "alive",
            state=res.stat.state,
            utime_ticks=res.stat.utime_ticks,
            stime_ticks=res.stat.stime_ticks,
            children_ticks=res.stat.children_ticks,
            rss_bytes=res.rss_bytes,
            vms_bytes=res.vms_bytes,
            num_threads=res.stat.num_threads,
            io=res.io,
            threads=() if native is None else native.threads_as_read,
            exit_code=self.exit_codes.get(pid),
            open_files=() if zombie or not open_files else self._open_files(pid),
            cpu_limits=None if zombie else self._limits(pid, res.stat.nice, res.stat.policy),
            mem_limits=None if zombie else self._mem(pid),
            io_limits=None if zombie else self._io(pid),
        )
        return sample, native

    def _threads(self, pid: int) -> NativeAttribution:
        """Its threads, the running ones' native location (where their CPU goes in C: a
        progress engine polling for a message is a wait) started: it fails alone under its
        own timeout (``NativeProbe``)."""
        return self.native.begin(pid, read_threads(self.procfs, pid, self.machine, self.clock))

    def _limits(self, pid: int, nice: int, policy: int) -> Optional[CpuLimits]:
        """Its cgroup CPU limit and throttling, nice and policy (``probes.cgroup_cpu``: ~50 us
        a process, the group's limit kept 30 s); None when unreadable - failing alone."""
        try:
            if self._cpu_limits is None:
                self._cpu_limits = CpuLimitReader(self.procfs)
            return self._cpu_limits.read(pid, nice, policy)
        except Exception:  # one probe's failure must not lose the rest of the sample
            return None

    def _mem(self, pid: int) -> Optional[MemLimits]:
        """Its memory cgroup's limit, usage, events and faults (``probes.cgroup_mem``: a few
        small reads); None when unreadable - failing alone."""
        try:
            if self._mem_limits is None:
                self._mem_limits = MemLimitReader(self.procfs)
            return self._mem_limits.read(pid)
        except Exception:  # one probe's failure must not lose the rest of the sample
            return None

    def _io(self, pid: int) -> Optional[Tuple[IoLimit, ...]]:
        """Its cgroup's I/O throttles (``probes.cgroup_io``); None when unreadable."""
        try:
            if self._io_limits is None:
                self._io_limits = IoLimitReader(self.procfs)
            return self._io_limits.read(pid)
        except Exception:  # one probe's failure must not lose the rest of the sample
            return None

    def _open_files(self, pid: int) -> Tuple[OpenFile, ...]:
        """The big files it loads or writes (weights, checkpoints); () when unreadable."""
        try:
            return read_open_files(self.procfs, pid)
        except Exception:  # one probe's failure must not lose the rest of the sample
            return ()

    def read_stacks(
        self,
        pid: int,
        quiet: Optional[Fingerprint],
        threads: Optional[Sequence[ThreadSample]] = None,
    ) -> StackRead:
        """The stacks of ``pid``, or ``reused`` when its counters still equal ``quiet``.

        ``threads``: the /proc read of its threads made just before (by the same worker); its
        counters are then the ones compared, else they are read here. A dump is offered for
        reuse with the counters read *before* it: a later sample that finds the very same
        counters knows that no thread ran from before this dump until then.
        """
        started = time.monotonic()
        counters = counters_of(threads) if threads is not None else read_counters(self.procfs, pid)
        before = quiet_counters(counters)
        if quiet is not None and before is not None and before == quiet:
            return StackRead(reused=True, quiet=quiet, duration_s=time.monotonic() - started)
        try:
            dumps, reader = read_python_stacks(
                pid, self.timeout_s, self.pyspy, self.procfs, self.stack_reader, activity=False
            )
        except StackError as exc:
            return StackRead(
                error_kind=exc.kind, error=str(exc), duration_s=time.monotonic() - started
            )
        running = {c[0] for c in counters or () if c[1] == "R"}
        ids: Dict[Tuple[Frame, ...], str] = {}
        runs: Dict[str, List[int]] = {}  # by stack id: how many threads run it
        stacks: Dict[str, Tuple[Frame, ...]] = {}
        compact = []
        shortened = 0
        for d in dumps:
            sid = ids.get(d.frames)
            if sid is None:
                sid = ids[d.frames] = stack_id(d.frames)
                stacks[sid] = shorten_frames(d.frames)  # what the bundle keeps, not 4 KiB names
                shortened += stacks[sid] is not d.frames
                runs[sid] = [0]
            runs[sid][0] += 1
            # "active" as py-spy means it (on a CPU) for diag's own reads.
            active = d.os_thread_id in running if reader == READER_DIAG else d.active
            compact.append(msgspec.structs.replace(d, active=active, frames=(), stack_id=sid))
        return StackRead(
            dumps=compact,
            stacks=stacks,
            reader=reader,
            quiet=before,
            duration_s=time.monotonic() - started,
            truncated=_cut_note(
                truncation_of_stacks({f: runs[i][0] for f, i in ids.items()}, len(dumps)), shortened
            ),
        )

    def warm(self, pids: List[int]) -> None:
        """Load what every worker would otherwise load again (the Python binaries' symbols),
        once per executable: the ranks of a job share one, and reading each one's memory map
        to find it again cost ~0.3 ms a rank. (Only a head start: a worker that meets a binary
        not loaded here loads it itself.)"""
        if not self.pyspy or self.stack_reader == "py-spy":
            return
        seen: Set[Optional[str]] = set()
        for pid in pids:
            exe = self.procfs.readlink(pid, "exe")
            if exe not in seen:
                seen.add(exe)
                warm_symbols(self.procfs, pid)

    def identify(self, job: ProcessWork) -> ProcessResult:
        """What identifies a new process (a partial result; None if it cannot be read: the
        Collector then reads it itself and records why)."""
        try:
            identity: Optional[Identity] = read_identity(self.procfs, job.pid)
        except Exception:
            identity = None
        return ProcessResult(pid=job.pid, partial=True, identity=identity)

    def work(self, job: ProcessWork) -> ProcessResult:
        """Both reads of one process; a failed /proc read is reported, never raised."""
        return self.begin(job).finish()

    def begin(self, job: ProcessWork) -> WorkUnderWay:
        """``work`` but for the running threads' native locations, which go on in their own
        thread (``WorkUnderWay.finish`` waits for them): a worker starts the next process
        meanwhile, so the perf windows of a busy job's ranks overlap instead of adding up."""
        started = time.monotonic()
        native: Optional[NativeAttribution] = None
        try:
            sample, native = self._read_proc(job.pid, not job.lean)
            error = None
        except Exception as exc:  # the runner's rule: a probe's failure is a record
            sample, error = None, f"{type(exc).__name__}: {exc}"
        proc_s = time.monotonic() - started
        stacks = None
        if job.stacks and sample is not None and sample.status == "alive":
            # The /proc read just made is the "before" of the dump (same worker, in order).
            stacks = self.read_stacks(job.pid, job.quiet, sample.threads)
        return WorkUnderWay(self, job.pid, sample, error, proc_s, stacks, native)


class WorkUnderWay:
    """A process's reads done but for its native locations (``ProcessReader.begin``)."""

    def __init__(
        self,
        reader: ProcessReader,
        pid: int,
        sample: Optional[ProcessSample],
        error: Optional[str],
        proc_s: float,
        stacks: Optional[StackRead],
        native: Optional[NativeAttribution],
    ) -> None:
        self.reader, self.pid, self.sample, self.error = reader, pid, sample, error
        self.proc_s, self.stacks, self.native = proc_s, stacks, native

    def ready(self) -> bool:
        """Whether ``finish`` would answer without waiting."""
        return self.native is None or self.native.ready()

    def finish(self) -> ProcessResult:
        """The result, the native locations in (waited for up to their own timeout; the
        wait counts in ``proc_s``, the /proc read's time)."""
        started = time.monotonic()
        sample = self.sample if self.sample is None else _with_native(self.sample, self.native)
        return ProcessResult(
            pid=self.pid,
            sample=sample,
            proc_error=self.error,
            native_note=self.reader.native.note(),
            proc_s=self.proc_s + time.monotonic() - started,
            stacks=self.stacks,
        )


def _with_native(sample: ProcessSample, native: Optional[NativeAttribution]) -> ProcessSample:
    if native is None:
        return sample
    threads = native.result()
    if threads is sample.threads:
        return sample
    return msgspec.structs.replace(sample, threads=threads)


def _cut_note(note: Optional[str], shortened: int) -> Optional[str]:
    """The readers' truncation note, plus the stacks whose names the per-frame caps cut."""
    if not shortened:
        return note
    mine = (
        f"{shortened} stack(s) with a function name over {FRAME_NAME_CHARS} or a file name "
        f"over {FRAME_FILE_CHARS} chars cut"
    )
    return f"{note}; {mine}" if note else f"truncated: {mine}"
