"""The Collector: one sampling round over every process of a job, all probes in parallel.

``take_sample`` re-discovers the process tree (new ranks appear, exited ones are kept and
marked ``exited`` - ranks, launchers and roots in every later sample, other processes once -,
unreaped ones ``zombie`` with their exit code), then runs, all at once under
``probes.runner.run_all``: per process the /proc read (resources + every thread) and the py-spy
dump, plus the listening-socket and log probes. Each ``ProcessSample`` carries the time its own
/proc read started, so rates stay right when one process is slow to read.

Stacks: ``probes.stacks.read_python_stacks`` reads CPython 3.11-3.13 stacks in-process
(``probes.pyframes``, no pause, a fraction of py-spy's cost) and runs py-spy for the rest:
``--nonblocking`` on Python >= 3.11, blocking below (there ``--nonblocking`` cannot find OS
thread ids, and without them stacks cannot be joined to the /proc thread records - the join is
the point; a blocking dump pauses the target ~8 ms at 64 threads). ``ProcessSample.stack_reader``
says which read it. Zombies are not dumped. A non-Python process gets ``py_status``
"not-python" and no failure record; every other dump failure is recorded with its reason. Pass
``pyspy=None`` to collect without stacks. A process none of whose threads ran since its last
dump (same run counters before and after that dump and now) reuses that dump instead of reading
again (``probes.quiescence``; ``ProcessSample.stacks_reused``): a parked job's watch samples
then cost a few /proc reads per rank.

``take_sample`` returns only what is new (processes first seen or whose role changed, stacks
not seen before), which is exactly what a ``diag watch`` journal line needs; ``processes`` and
``stacks`` hold the accumulated state for a one-shot ``.json`` bundle.
"""

from __future__ import annotations

import os
import platform
import time
from functools import partial
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import (
    HostInfo,
    LogSample,
    ProbeFailure,
    ProcessInfo,
    ProcessSample,
    Sample,
    Stack,
    Target,
)
from diag.probes.gpu import GpuProbe
from diag.probes.host import read_host_info
from diag.probes.logs import LogTracker
from diag.probes.ncclras import RasProbe
from diag.probes.procfs import ProcFS
from diag.probes.proctree import Identity, descendants
from diag.probes.quiescence import Fingerprint
from diag.probes.runner import ProbeCall, run_all
from diag.probes.sockets import listen_ports
from diag.probes.stacks import (
    KIND_ERROR,
    KIND_GONE,
    KIND_NOT_PYTHON,
    KIND_ZOMBIE,
    PyThreadDump,
    StackError,
    join_stacks,
)
from diag.process_table import ProcessTable
from diag.process_work import ProcessReader, ProcessResult, ProcessWork, StackRead
from diag.redact import Redactor
from diag.shards import WORKER_EXITED, Pending, ShardPool

# py-spy gets the probe timeout itself (and kills its subprocess); the thread waiting on it a
# little more, so the subprocess's own timeout message is the one recorded.
_STACKS_GRACE_S = 2.0


class SampleDelta(NamedTuple):
    sample: Sample
    new_processes: Tuple[ProcessInfo, ...]
    new_stacks: Dict[str, Stack]


class _StackOutcome(NamedTuple):
    dumps: Optional[List[PyThreadDump]]
    error: Optional[StackError]
    reused: bool = False
    reader: Optional[str] = None


class _QuietDump(NamedTuple):
    """A dump taken while no thread ran, and the run counters right after it."""

    fingerprint: Fingerprint
    dumps: List[PyThreadDump]
    reader: str


class Collector:
    def __init__(
        self,
        root_pid: int,
        *,
        procfs: Optional[ProcFS] = None,
        log_paths: Sequence[str] = (),
        pyspy: Optional[str] = None,
        probe_timeout_s: float = 10.0,
        host: str = "",
        extra_roots: Sequence[int] = (),
        stack_reader: str = "auto",
        workers: Optional[int] = None,
    ) -> None:
        self.root_pid = root_pid
        # More tops of the same job, sampled as one tree (a Slurm node: the batch script and
        # each step's tasks, whose parent is slurmstepd, not the script).
        self.root_pids: Tuple[int, ...] = (root_pid, *extra_roots)
        self.procfs = procfs if procfs is not None else ProcFS()
        self.pyspy = pyspy
        self.stack_reader = stack_reader  # "auto": in-process where it can, else py-spy
        self.probe_timeout_s = probe_timeout_s
        self.host = host
        self.redactor = Redactor()
        self.target = Target(root_pid=root_pid, log_paths=tuple(log_paths))
        self.table = ProcessTable(
            root_pid, self.procfs, self.redactor, self.host_info, probe_timeout_s, host
        )
        self.processes: Dict[int, ProcessInfo] = self.table.infos  # the same dict, kept current
        self.stacks: Dict[str, Stack] = {}
        self._machine = platform.machine()
        self._host_info: Optional[HostInfo] = None
        self._reader = ProcessReader(
            self.procfs,
            host,
            self._machine,
            os.sysconf("SC_PAGE_SIZE"),  # what host_info() records, without its py-spy run
            pyspy or "",
            stack_reader,
            probe_timeout_s,
        )
        self._exit_codes = self._reader.exit_codes  # the same dict: pid -> exit code of a zombie
        # Forked workers for the per-process reads (diag.shards); 0 or 1: all in this process.
        self._shards = ShardPool(self._reader, workers)
        self._marked_gone: Set[int] = set()
        # pid -> StackError kind of its latest failed dump (``probes.stacks.KIND_*``).
        self.stack_errors: Dict[int, str] = {}
        # pid -> its last dump taken while nothing ran (see probes.quiescence).
        self._quiet_dumps: Dict[int, _QuietDump] = {}
        # The latest sample of each process (its thread count weighs it among the workers).
        self._last_samples: Dict[int, ProcessSample] = {}
        self._logs = LogTracker(self.redactor, list(log_paths), procfs=self.procfs)
        # NVML in a long-lived killable worker (started by the first sample, ended by close);
        # NCCL RAS only where `ncclras` is installed.
        self.gpu_probe = GpuProbe(timeout_s=probe_timeout_s)
        self.ras_probe = RasProbe(timeout_s=probe_timeout_s, scrub=self.redactor.scrub)

    def close(self) -> None:
        """Release what outlives a sample (the NVML worker process); idempotent. Every user
        calls it when sampling ends, in a ``finally``: capture, watch, a Slurm node."""
        self.gpu_probe.close()
        self._shards.close()

    def host_info(self) -> HostInfo:
        if self._host_info is None:
            self._host_info = read_host_info(self.procfs, self.pyspy)
        return self._host_info

    def alive(self) -> bool:
        """A root process exists and is neither a zombie nor dead."""
        return any(self._root_alive(pid) for pid in self.root_pids)

    def _root_alive(self, pid: int) -> bool:
        try:
            state = self.procfs.read_text(pid, "stat").rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X", "x")

    def _tree(self) -> List[int]:
        if len(self.root_pids) == 1:
            return descendants(self.root_pid, self.procfs)
        return sorted({pid for root in self.root_pids for pid in descendants(root, self.procfs)})

    # -- one process -------------------------------------------------------------------------

    def _keep_marking(self, pid: int) -> bool:
        """Exited ranks, launchers and roots are marked in every later sample (the verdict
        reads the last one); any other process only in the first sample after it went, so a
        job that runs a short helper every minute does not grow each sample for a day."""
        info = self.processes[pid]
        important = info.rank is not None or info.role in ("rank", "launcher", "process")
        return important or pid in self.root_pids or pid not in self._marked_gone

    def _read_proc(self, pid: int) -> ProcessSample:
        return self._reader.read_proc(pid)

    def _read_logs(self, pids: List[int]) -> Tuple[LogSample, ...]:
        self._logs.discover(pids)
        return self._logs.sample()

    # -- the round ---------------------------------------------------------------------------

    def _dump(self, pid: int) -> _StackOutcome:
        """The stack read of ``pid`` here, or the last one when no thread has run since it was
        taken (a parked job's stacks cannot have moved; see ``probes.quiescence``)."""
        quiet = self._quiet_dumps.get(pid)
        read = self._reader.read_stacks(pid, quiet.fingerprint if quiet else None)
        return self._absorb(pid, read)

    def _absorb(self, pid: int, read: StackRead) -> _StackOutcome:
        """A stack read (here or in a worker) as an outcome; keeps a dump taken while quiet."""
        quiet = self._quiet_dumps.pop(pid, None)
        if read.reused and quiet is not None:
            self._quiet_dumps[pid] = quiet
            return _StackOutcome(quiet.dumps, None, reused=True, reader=quiet.reader)
        dumps = read.full_dumps()
        if dumps is None:
            kind = read.error_kind or KIND_ERROR
            return _StackOutcome(None, StackError(kind, read.error or "no stacks were read"))
        if read.quiet is not None:
            self._quiet_dumps[pid] = _QuietDump(read.quiet, dumps, read.reader or "")
        return _StackOutcome(dumps, None, reader=read.reader)

    def _collect(
        self, pending: Pending, timeout_s: float
    ) -> Tuple[Dict[int, ProcessResult], Dict[int, str]]:
        """The workers' results; what a worker that died left undone is done here instead (a
        worker that hung is not retried: the same read would likely hang here too)."""
        results, missing = self._shards.collect(pending, timeout_s)
        if self._shards.broken == WORKER_EXITED:
            for job in pending.jobs:
                if job.pid in missing:
                    results[job.pid] = self._reader.work(job)
                    del missing[job.pid]
        return results, missing

    def _jobs(self, live: List[int]) -> List[ProcessWork]:
        out = []
        for pid in live:
            quiet = self._quiet_dumps.get(pid)
            out.append(
                ProcessWork(
                    pid=pid,
                    stacks=bool(self.pyspy) and pid not in self._exit_codes,
                    quiet=quiet.fingerprint if quiet is not None else None,
                    identity=pid not in self.processes,
                )
            )
        return out

    def take_sample(self, index: int) -> SampleDelta:
        t0 = time.time()
        started = time.monotonic()
        tree = self._tree()
        # Workers start on every process now (what identifies a new one, its /proc, its stacks)
        # and discovery waits for them; without workers it comes first, here.
        pending = None
        if self._shards.usable(tree):
            weights = {p.pid: p.num_threads + 1 for p in self._last_samples.values()}
            pending = self._shards.submit(self._jobs(tree), weights)
            if self._shards.broken is not None:
                pending = None  # a worker died since the last sample: all of it here
        timeout_s = self.probe_timeout_s
        known: Dict[int, Identity] = {}
        if pending is not None:
            self.host_info()  # (once: it runs py-spy --version) while the workers read
            found = self._shards.collect_identities(pending, timeout_s + _STACKS_GRACE_S)
            known = {pid: ident for pid, ident in found.items() if ident is not None}
        new_processes = self.table.discover(tree, index, known)
        live = [pid for pid in tree if pid in self.processes]
        # The subprocesses (py-spy, NVML, ncclras) are the slowest probes: started first, they
        # run while the /proc reads hold the GIL instead of waiting for them (bench/snapshot.py).
        calls: List[ProbeCall[Any]] = []
        sharded = pending is not None
        if pending is not None:  # /proc and stacks of every process, spread over the workers
            run = partial(self._collect, pending, timeout_s + _STACKS_GRACE_S)
            calls.append(ProbeCall("workers", run, timeout_s + 2 * _STACKS_GRACE_S))
        elif self.pyspy:
            calls += [
                ProbeCall("stacks", partial(self._dump, pid), timeout_s + _STACKS_GRACE_S, pid)
                for pid in live
                if pid not in self._exit_codes  # a zombie seen before: nothing to dump
            ]
        calls.append(self.gpu_probe.call())
        if self.ras_probe.available():
            calls.append(self.ras_probe.call())
        if not sharded:
            calls += [
                ProbeCall("proc", partial(self._read_proc, pid), timeout_s, pid) for pid in live
            ]
        calls.append(ProbeCall("sockets", partial(listen_ports, self.procfs, live), timeout_s))
        calls.append(ProbeCall("logs", partial(self._read_logs, live), timeout_s))
        results = run_all(calls)
        self.stack_errors = {}

        failures: List[ProbeFailure] = []
        timings: Dict[str, float] = {}
        procs: Dict[int, ProcessSample] = {}
        outcomes: Dict[int, _StackOutcome] = {}
        ports: Dict[int, Tuple[int, ...]] = {}
        logs: Tuple[LogSample, ...] = ()
        gpu = ras = None
        from_workers: Optional[Tuple[Dict[int, ProcessResult], Dict[int, str]]] = None
        for call, result in zip(calls, results):
            timings[call.probe] = max(timings.get(call.probe, 0.0), round(result.duration_s, 4))
            failure = result.failure
            value = result.value
            if isinstance(value, _StackOutcome) and value.error is not None:
                outcomes[call.pid or 0] = value
                self.stack_errors[call.pid or 0] = value.error.kind
                if value.error.kind not in (KIND_NOT_PYTHON, KIND_ZOMBIE, KIND_GONE):
                    failure = ProbeFailure(
                        probe="stacks",
                        reason=str(value.error),
                        duration_s=round(result.duration_s, 4),
                        pid=call.pid,
                    )
            if failure is not None:
                failures.append(msgspec.structs.replace(failure, host=self.host, sample=index))
                if call.probe == "stacks" and call.pid is not None:
                    outcomes.setdefault(call.pid, _StackOutcome(None, None))
            if value is None:
                continue
            if call.probe == "workers":
                from_workers = value
            elif call.probe == "proc":
                procs[call.pid or 0] = value
            elif call.probe == "stacks":
                outcomes.setdefault(call.pid or 0, value)
            elif call.probe == "sockets":
                ports = value
            elif call.probe == "logs":
                logs = value
            elif call.probe == "gpu":
                gpu = value
            elif call.probe == "ncclras":
                ras = value

        if from_workers is not None:
            self._from_workers(from_workers, procs, outcomes, failures, timings, index)
        failures[:0] = [
            msgspec.structs.replace(f, host=self.host, sample=index)
            for f in self.table.identity_failures
        ]
        in_tree = set(tree)
        gone = [pid for pid in self.processes if pid not in in_tree and self._keep_marking(pid)]
        self._marked_gone.update(gone)

        samples: List[ProcessSample] = []
        new_stacks: Dict[str, Stack] = {}
        for pid in live:
            sample = procs.get(pid) or ProcessSample(
                pid=pid, host=self.host, t_s=t0, status="unreadable"
            )
            sample = self._with_stacks(sample, outcomes.get(pid), new_stacks)
            samples.append(msgspec.structs.replace(sample, listen_ports=ports.get(pid, ())))
        for pid in gone:
            samples.append(
                ProcessSample(
                    pid=pid,
                    host=self.host,
                    t_s=t0,
                    status="exited",
                    exit_code=self._exit_codes.get(pid),
                )
            )
        inferred: Dict[int, ProcessInfo] = {}
        if self.pyspy:  # groups are told from worker pools by their stacks
            inferred = {i.pid: i for i in self.table.infer_start_order(samples, self.stacks)}
        if inferred:
            kept = tuple(info for info in new_processes if info.pid not in inferred)
            new_processes = (*kept, *inferred.values())
        self._last_samples = {p.pid: p for p in samples}
        result_sample = Sample(
            index=index,
            t_s=t0,
            duration_s=round(time.monotonic() - started, 4),
            processes=tuple(sorted(samples, key=lambda s: s.pid)),
            logs=logs,
            gpu=gpu,
            failures=tuple(failures),
            probe_timings_s=timings,
            ras=ras,
        )
        return SampleDelta(result_sample, new_processes, new_stacks)

    def _from_workers(
        self,
        value: Tuple[Dict[int, ProcessResult], Dict[int, str]],
        procs: Dict[int, ProcessSample],
        outcomes: Dict[int, _StackOutcome],
        failures: List[ProbeFailure],
        timings: Dict[str, float],
        index: int,
    ) -> None:
        """The workers' results as if each process's probes had run here (same records)."""
        results, missing = value
        # Work was handed out before discovery: a process it could not identify is dropped.
        results = {pid: r for pid, r in results.items() if pid in self.processes}
        missing = {pid: why for pid, why in missing.items() if pid in self.processes}

        def fail(probe: str, reason: str, pid: int, took_s: float = 0.0) -> None:
            failures.append(
                ProbeFailure(
                    probe=probe,
                    reason=reason,
                    duration_s=round(took_s, 4),
                    pid=pid,
                    host=self.host,
                    sample=index,
                )
            )

        for pid, why in missing.items():
            fail("proc", why, pid)
        for pid, result in results.items():
            timings["proc"] = max(timings.get("proc", 0.0), round(result.proc_s, 4))
            if result.proc_error is not None:
                fail("proc", result.proc_error, pid, result.proc_s)
            if result.sample is not None:
                procs[pid] = result.sample
                if result.sample.status == "zombie":
                    self._exit_codes[pid] = result.sample.exit_code
            read = result.stacks
            if read is None:
                continue
            timings["stacks"] = max(timings.get("stacks", 0.0), round(read.duration_s, 4))
            outcome = self._absorb(pid, read)
            outcomes[pid] = outcome
            if outcome.error is not None:
                self.stack_errors[pid] = outcome.error.kind
                if outcome.error.kind not in (KIND_NOT_PYTHON, KIND_ZOMBIE, KIND_GONE):
                    fail("stacks", str(outcome.error), pid, read.duration_s)

    def _with_stacks(
        self, sample: ProcessSample, outcome: Optional[_StackOutcome], new_stacks: Dict[str, Stack]
    ) -> ProcessSample:
        """Join a py-spy dump to the thread records and set ``py_status``."""
        if sample.status != "alive" or outcome is None:
            return sample
        if outcome.dumps is None:
            kind = outcome.error.kind if outcome.error is not None else ""
            status = "not-python" if kind == KIND_NOT_PYTHON else "failed"
            return msgspec.structs.replace(sample, py_status=status)
        threads, interned = join_stacks(sample.threads, outcome.dumps, sample.pid)
        for sid, stack in interned.items():
            if sid not in self.stacks:
                self.stacks[sid] = stack
                new_stacks[sid] = stack
        return msgspec.structs.replace(
            sample,
            threads=threads,
            py_status="ok",
            stacks_reused=outcome.reused,
            stack_reader=outcome.reader,
        )
