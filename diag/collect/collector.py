"""The Collector: one sampling round over every process of a job, all probes in parallel.

``take_sample`` re-discovers the process tree (new ranks appear, exited ones are kept and
marked ``exited`` - ranks, launchers and roots in every later sample, other processes once -,
unreaped ones ``zombie`` with their exit code; a process is its (pid, start time), so one whose
PID a new process took reads exited too, and the newcomer is left out), posts per process the
/proc read (resources + every thread) and the stack read to the forked workers
(``diag.collect.shards``), and runs beside them, under ``probes.runner.run_all``, the GPU,
listening-socket and log probes. Each ``ProcessSample`` carries the time its own /proc read
started, so rates stay right when one process is slow to read.

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
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, TypeVar

import msgspec

from diag.bundle.stack_budget import StackBudget
from diag.collect.priority import Boost, BoostPolicy, Burst, policy_from_env
from diag.collect.process_table import ProcessTable
from diag.collect.process_work import ProcessReader, ProcessWork
from diag.collect.round_records import RoundRecords, StackBook, StackOutcome
from diag.collect.shards import Pending, ShardPool
from diag.frames import polled_lock
from diag.model import (
    Bundle,
    FdHolder,
    FileLock,
    FsWait,
    GpuSample,
    HostInfo,
    LogSample,
    ProcessInfo,
    ProcessSample,
    RasSnapshot,
    Sample,
    Stack,
    Target,
)
from diag.probes.cgroup_cpu import read_host_load
from diag.probes.discovery import TreeDiscovery
from diag.probes.fd_ends import FdLinks, JobFds, blocked_fds, job_fd_ends, polled_pipe_fds
from diag.probes.fd_holders import HolderCache, unmatched_waits
from diag.probes.file_locks import job_file_locks, waits_on_file_lock
from diag.probes.gpu.probe import GpuProbe
from diag.probes.host import read_host_info
from diag.probes.logs import LogTracker
from diag.probes.mounts import job_fs_waits, waits_on_filesystem
from diag.probes.nccl.ras import RasProbe
from diag.probes.procfs import ProcFS
from diag.probes.proctree import Identity, Tree
from diag.probes.runner import ProbeCall, ProbeResult, run_all, standby
from diag.probes.sockets import SocketView, socket_views
from diag.probes.stacks import (
    KIND_NOT_PYTHON,
    join_stacks,
)
from diag.probes.threads import parse_task_stat
from diag.redaction.redact import Redactor

T = TypeVar("T")

# The per-process reads get the probe timeout themselves (py-spy kills its subprocess on it);
# the workers' deadline is a little longer, so a read's own timeout is the one recorded.
_STACKS_GRACE_S = 2.0
# What a lean sample skips (``take_sample(lean=True)``): each process's open big files, the
# host scan for holders outside the job of an end a thread waits on, and /proc/locks. The
# verdict reads these from the first and last samples (files) or the latest that has them.
OPTIONAL_PROBES: Tuple[str, ...] = ("open_files", "fd_holders", "file_locks", "fs_waits")


# Probes that run at once on threads of their own (GPU, NCCL RAS, sockets, logs, and the one
# the later probes take in turn).
_PROBE_THREADS = 5


class _Probed(NamedTuple):
    """One sample's answers from the probes that run beside the workers."""

    ports: Dict[int, SocketView]
    logs: Tuple[LogSample, ...]
    gpu: Optional[GpuSample]
    ras: Optional[RasSnapshot]


class SampleDelta(NamedTuple):
    sample: Sample
    new_processes: Tuple[ProcessInfo, ...]
    new_stacks: Dict[str, Stack]


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
        boost: Optional[BoostPolicy] = None,
    ) -> None:
        self.root_pid = root_pid
        # More tops of the same job, sampled as one tree (a Slurm node: the batch script and
        # each step's tasks, whose parent is slurmstepd, not the script).
        self.root_pids: Tuple[int, ...] = (root_pid, *extra_roots)
        self.procfs = procfs if procfs is not None else ProcFS()
        # Discovery: a full /proc scan on the first sample and every 10th, the changes between.
        self._walkers = {root: TreeDiscovery(root, self.procfs) for root in self.root_pids}
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
        self._stack_budget = StackBudget()  # the capture's total (diag.bundle.stack_budget)
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
        # Forked workers for the per-process reads (diag.collect.shards); 0 or 1: all in here.
        self._shards = ShardPool(self._reader, workers)
        self._marked_gone: Set[int] = set()
        # pid -> StackError kind of its latest failed dump (``probes.stacks.KIND_*``).
        self.stack_errors: Dict[int, str] = {}
        # The dumps that may be reused (see probes.quiescence).
        self._book = StackBook()
        # The latest sample of each process (its thread count weighs it among the workers).
        self._last_samples: Dict[int, ProcessSample] = {}
        self._logs = LogTracker(self.redactor, list(log_paths), procfs=self.procfs)
        # NVML in a long-lived killable worker (started by the first sample, ended by close);
        # NCCL RAS only where `ncclras` is installed.
        self.gpu_probe = GpuProbe(timeout_s=probe_timeout_s)
        self.ras_probe = RasProbe(timeout_s=probe_timeout_s, scrub=self.redactor.scrub)
        # Holders outside the job of a pipe/fifo/unix end a thread waits on, by inode.
        self._holders = HolderCache()
        # Each sample's burst runs at a raised priority where diag may (``collect.priority``).
        self.boost = Boost(boost if boost is not None else policy_from_env())

    def close(self) -> None:
        """Release what outlives a sample (the NVML worker process); idempotent. Every user
        calls it when sampling ends, in a ``finally``: capture, watch, a Slurm node."""
        self.gpu_probe.close()
        self._shards.close()

    def bundle(self, samples: Sequence[Sample], created_s: float) -> Bundle:
        """The bundle of what this Collector has seen; the verdict is attached later."""
        return Bundle(
            created_s=created_s,
            host=self.host_info(),
            target=self.target,
            processes=tuple(sorted(self.processes.values(), key=lambda p: p.pid)),
            stacks=dict(self.stacks),
            samples=tuple(samples),
        )

    def host_info(self) -> HostInfo:
        if self._host_info is None:
            self._host_info = read_host_info(self.procfs, self.pyspy)
        return self._host_info

    def alive(self) -> bool:
        """A root process exists and is neither a zombie nor dead."""
        return any(self._root_alive(pid) for pid in self.root_pids)

    def _root_alive(self, pid: int) -> bool:
        try:
            stat = parse_task_stat(self.procfs.read_text(pid, "stat"))
        except (OSError, ValueError, IndexError):
            return False
        if self.table.starts.get(pid, stat.start_ticks) != stat.start_ticks:
            return False  # its PID names another process now
        return stat.state not in ("Z", "X", "x")

    def _tree(self) -> Tree:
        known = self.table.starts
        if len(self.root_pids) == 1:
            return self._walkers[self.root_pid](known)
        starts: Dict[int, int] = {}
        reused: Dict[int, int] = {}
        for root in self.root_pids:
            tree = self._walkers[root](known)
            starts.update(tree.starts)
            reused.update(tree.reused)
        return Tree(dict(sorted(starts.items())), reused)

    # -- one process -------------------------------------------------------------------------

    def _keep_marking(self, pid: int) -> bool:
        """Exited ranks, launchers and roots are marked in every later sample (the verdict
        reads the last one); any other process only in the first sample after it went, so a
        job that runs a short helper every minute does not grow each sample for a day."""
        info = self.processes[pid]
        important = info.rank is not None or info.role in ("rank", "launcher", "process")
        return important or pid in self.root_pids or pid not in self._marked_gone

    def _read_logs(self, pids: List[int]) -> Tuple[LogSample, ...]:
        self._logs.discover(pids)
        return self._logs.sample()

    # -- the round ---------------------------------------------------------------------------

    def _jobs(self, live: List[int], lean: bool) -> List[ProcessWork]:
        out = []
        for pid in live:
            out.append(
                ProcessWork(
                    pid=pid,
                    stacks=bool(self.pyspy) and pid not in self._exit_codes,
                    quiet=self._book.key(pid),
                    identity=pid not in self.processes,
                    lean=lean,
                )
            )
        return out

    def take_sample(self, index: int, *, late_s: float = 0.0, lean: bool = False) -> SampleDelta:
        """One sample, as a burst at a raised priority (``collect.priority``). ``late_s``: how
        long after its scheduled time it starts (recorded); ``lean``: skip the optional probes
        (``OPTIONAL_PROBES``, recorded as skipped) - the caller asks for it when a sample runs
        late on a saturated host, for samples the verdict does not read them from."""
        # The probes' threads exist before the burst raises diag's threads: one started
        # during it would run at the normal priority (``collect.priority``).
        standby(_PROBE_THREADS)
        with self.boost.burst() as burst:
            delta = self._take_sample(index, burst, lean)
            boost = burst.label
        if late_s or lean or boost:
            sample = msgspec.structs.replace(
                delta.sample,
                late_s=round(late_s, 4),
                skipped_probes=OPTIONAL_PROBES if lean else (),
                boost=boost,
            )
            delta = delta._replace(sample=sample)
        return delta

    def _take_sample(self, index: int, burst: Burst, lean: bool) -> SampleDelta:
        t0 = time.time()
        started = time.monotonic()
        walked = self._tree()
        tree = walked.pids
        reused = self.table.learn_newcomers(walked.reused)  # before anything is read or written
        self.table.relearn(tree)  # an exec or a rewritten environ: its secrets, learned again
        pending, new_processes = self._dispatch(tree, index, lean, burst)
        live = [pid for pid in tree if pid in self.processes]
        calls = self._probe_calls(pending, live)
        results = run_all(calls)
        burst.add_helpers([self.gpu_probe.worker_pid])  # one started by this sample's read
        rec = RoundRecords(self.host, index)
        rec.failures.extend(
            msgspec.structs.replace(f, host=self.host, sample=index)
            for f in self.table.identity_failures
        )
        for pid in reused:
            rec.fail(
                "identity",
                f"PID {pid} exited and a new process of the job took its PID: the new one "
                "(and its children) is not sampled, so nothing of it is filed under the old",
                pid,
            )
        probed = self._sort_results(calls, results, rec, index)
        self.stack_errors = rec.stack_errors
        in_tree = set(tree)
        gone = [pid for pid in self.processes if pid not in in_tree and self._keep_marking(pid)]
        self._marked_gone.update(gone)
        samples, new_stacks = self._process_samples(live, rec, probed.ports, t0, index)
        samples, fd_holders, fd_note = self._with_fd_ends(samples, probed.ports, rec, tree, lean)
        file_locks, file_locks_note = self._file_locks(samples, rec) if not lean else ((), "")
        fs_waits, fs_waits_note = self._fs_waits(samples, rec) if not lean else ((), "")
        cpus = os.cpu_count() or 0
        host_load = self._run_one("host_load", partial(read_host_load, self.procfs, cpus), rec)
        samples.extend(
            ProcessSample(
                pid=pid,
                host=self.host,
                t_s=t0,
                status="exited",
                exit_code=self._exit_codes.get(pid),
            )
            for pid in gone
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
            logs=probed.logs,
            gpu=probed.gpu,
            failures=tuple(rec.failures),
            probe_timings_s=rec.timings,
            ras=probed.ras,
            fd_holders=fd_holders,
            fd_scan_note=fd_note,
            file_locks=file_locks,
            file_locks_note=file_locks_note,
            fs_waits=fs_waits,
            fs_waits_note=fs_waits_note,
            host_load=host_load,
        )
        return SampleDelta(result_sample, new_processes, new_stacks)

    def _dispatch(
        self, tree: List[int], index: int, lean: bool, burst: Burst
    ) -> Tuple[Pending, Tuple[ProcessInfo, ...]]:
        """Hand every process's share of the work (what identifies a new one, its /proc, its
        stacks) to the workers now, and discover the new processes from what identifies
        them; without workers it is all done in one thread of this process
        (``diag.collect.shards``)."""
        if self._shards.shares(tree):
            # diag's threads above the real-time workers, before they are forked: a fork
            # at the normal priority on a busy host waits for a CPU (``collect.priority``).
            burst.raise_coordinator()
        self._shards.start(tree)
        burst.add_workers(self._shards.worker_pids)
        burst.add_helpers([self.gpu_probe.worker_pid])
        # Each CPU's scheduler clock, for the workers' wait ages: measured by diag's thread
        # before the workers are woken (``probes.sched_clock``) - above them in real time
        # (``collect.priority``), or with no worker running, it never waits for a CPU.
        offsets = self._reader.clock.refresh()
        weights = {p.pid: p.num_threads + 1 for p in self._last_samples.values()}
        pending = self._shards.submit(self._jobs(tree, lean), weights, offsets)
        known: Dict[int, Identity] = {}
        if pending.workers:
            self.host_info()  # (read once) while the workers read
            found = self._shards.collect_identities(pending, self.probe_timeout_s + _STACKS_GRACE_S)
            known = {pid: ident for pid, ident in found.items() if ident is not None}
        return pending, self.table.discover(tree, index, known)

    def _probe_calls(self, pending: Pending, live: List[int]) -> List[ProbeCall[Any]]:
        """The workers already read; their answers are collected in this thread (the call
        keeps its own deadline) while the other probes run on threads of their own."""
        timeout_s = self.probe_timeout_s
        budget_s = timeout_s + 2 * _STACKS_GRACE_S
        run = partial(self._shards.collect, pending, timeout_s + _STACKS_GRACE_S, budget_s)
        calls: List[ProbeCall[Any]] = [ProbeCall("workers", run, budget_s, bounded=True)]
        calls.append(self.gpu_probe.call())
        if self.ras_probe.available():
            calls.append(self.ras_probe.call())
        calls.append(ProbeCall("sockets", partial(socket_views, self.procfs, live), timeout_s))
        calls.append(ProbeCall("logs", partial(self._read_logs, live), timeout_s))
        return calls

    def _sort_results(
        self,
        calls: Sequence[ProbeCall[Any]],
        results: Sequence[ProbeResult[Any]],
        rec: RoundRecords,
        index: int,
    ) -> _Probed:
        """Each probe's answer to its place, its time and failure on record."""
        ports: Dict[int, SocketView] = {}
        logs: Tuple[LogSample, ...] = ()
        gpu: Optional[GpuSample] = None
        ras: Optional[RasSnapshot] = None
        for call, result in zip(calls, results):
            rec.time(call.probe, result.duration_s)
            value = result.value
            if result.failure is not None:
                rec.failures.append(
                    msgspec.structs.replace(result.failure, host=self.host, sample=index)
                )
            if value is None:
                continue
            if call.probe == "workers":
                rec.from_workers(value, self.processes, self._book, self._exit_codes)
            elif call.probe == "sockets":
                ports = value
            elif call.probe == "logs":
                logs = value
                for log in logs:  # a log not read (not a regular file...): a failure on record
                    if log.error is not None:
                        rec.fail("logs", f"{log.path}: {log.error}", None)
            elif call.probe == "gpu":
                gpu = value
            elif call.probe == "ncclras":
                ras = value
        return _Probed(ports, logs, gpu, ras)

    def _process_samples(
        self,
        live: List[int],
        rec: RoundRecords,
        ports: Dict[int, SocketView],
        t0: float,
        index: int,
    ) -> Tuple[List[ProcessSample], Dict[str, Stack]]:
        """Each live process's sample: the workers' reading (or "unreadable"), its stacks
        filed (new ones collected), its sockets."""
        samples: List[ProcessSample] = []
        new_stacks: Dict[str, Stack] = {}
        for pid in live:
            sample = rec.procs.get(pid) or ProcessSample(
                pid=pid, host=self.host, t_s=t0, status="unreadable"
            )
            sample = self._with_stacks(sample, rec.outcomes.get(pid), new_stacks)
            budget_note = self._stack_budget.failure(self.host, index)
            if budget_note is not None:
                rec.failures.append(budget_note)
            view = ports.get(pid, SocketView(()))
            samples.append(
                msgspec.structs.replace(
                    sample,
                    listen_ports=view.ports,
                    served=view.served,
                    served_more=view.served_more,
                    closed=view.closed,
                )
            )
        return samples, new_stacks

    def _with_fd_ends(
        self,
        samples: List[ProcessSample],
        views: Dict[int, SocketView],
        rec: RoundRecords,
        tree: Sequence[int],
        lean: bool = False,
    ) -> Tuple[List[ProcessSample], Tuple[FdHolder, ...], str]:
        """The pipe/fifo/socket ends of each process (``probes.fd_ends``, from the sockets
        probe's readlink pass and the threads' blocked fds), then - only when a thread waits
        on an end no process of the job holds the other side of - its holders on the host.
        Each is a probe of its own: a failure or a timeout loses that record alone."""
        job = {
            s.pid: JobFds(
                s.threads,
                view.links,
                view.tcp,
                view.own_netns,
                bool(view.ports),
                view.tcp_peers,
                view.owed,
                view.data_ages_ms,
                view.delivery,
            )
            for s in samples
            if s.status == "alive" and (view := views.get(s.pid)) is not None and view.links.links
        }
        if not job:
            return samples, (), ""
        ends = self._run_one("fd_ends", partial(job_fd_ends, self.procfs, job), rec)
        if ends is None:
            return samples, (), ""
        samples = [
            msgspec.structs.replace(
                s,
                fd_ends=ends[s.pid][0],
                fd_ends_more=ends[s.pid][1],
                socket_fds=_socket_count(job[s.pid].links),
            )
            if s.pid in ends
            else s
            for s in samples
        ]
        wanted = unmatched_waits(
            {pid: e for pid, (e, _) in ends.items()},
            {
                pid: blocked_fds(j.threads) + polled_pipe_fds(ends[pid][0], j.threads)
                for pid, j in job.items()
                if pid in ends
            },
            {pid: [link for _, link in j.links.links] for pid, j in job.items()},
        )
        if not wanted or lean:  # lean: the host scan is an optional probe
            return samples, (), ""
        scan = partial(self._holders.holders, self.procfs, wanted, tree)
        found = self._run_one("fd_holders", scan, rec)
        if found is None:
            return samples, (), ""
        holders, note = found
        return samples, holders, note

    def _file_locks(
        self, samples: Sequence[ProcessSample], rec: RoundRecords
    ) -> Tuple[Tuple[FileLock, ...], str]:
        """The file locks threads of the job wait for, and their holders (``/proc/locks``):
        read only when some thread sleeps taking one."""
        waiters: Dict[int, Optional[int]] = {}
        polls = False
        looked: Set[str] = set()  # stacks already looked at: a job's threads share a few
        for s in samples:
            for t in s.threads if s.status == "alive" else ():
                if t.state in ("S", "D") and waits_on_file_lock(t.wchan, t.syscall):
                    waiters.setdefault(s.pid, t.syscall_fd)
                elif not polls and t.stack_id is not None and t.stack_id not in looked:
                    looked.add(t.stack_id)
                    stack = self.stacks.get(t.stack_id)
                    polls = stack is not None and bool(polled_lock(stack.frames))
        if not waiters and not polls:
            return (), ""
        # A poller leaves no waiter line: the locks the job's processes hold are its holders.
        job = frozenset(s.pid for s in samples) if polls else frozenset()
        read = partial(job_file_locks, self.procfs, waiters, job)
        found = self._run_one("file_locks", read, rec)
        return found if found is not None else ((), "")

    def _fs_waits(
        self, samples: Sequence[ProcessSample], rec: RoundRecords
    ) -> Tuple[Tuple[FsWait, ...], str]:
        """The wire filesystems (FUSE, NFS...) threads of the job sleep in, and for FUSE the
        daemon serving the mount (``probes.mounts``): read only when some thread does."""
        waiters: Dict[int, List[Tuple[int, Optional[int]]]] = {}
        for s in samples:
            for t in s.threads if s.status == "alive" else ():
                if waits_on_filesystem(t.state, t.wchan):
                    waiters.setdefault(s.pid, []).append((t.tid, t.syscall_fd))
        if not waiters:
            return (), ""
        found = self._run_one("fs_waits", partial(job_fs_waits, self.procfs, waiters), rec)
        return found if found is not None else ((), "")

    def _run_one(self, probe: str, fn: Callable[[], T], rec: RoundRecords) -> Optional[T]:
        """One probe under its timeout, failing alone: its time and any failure go into
        ``rec``; None when it gave nothing."""
        (done,) = run_all([ProbeCall(probe, fn, self.probe_timeout_s)])
        rec.time(probe, done.duration_s)
        if done.failure is not None:
            rec.failures.append(
                msgspec.structs.replace(done.failure, host=self.host, sample=rec.index)
            )
        return done.value

    def _with_stacks(
        self, sample: ProcessSample, outcome: Optional[StackOutcome], new_stacks: Dict[str, Stack]
    ) -> ProcessSample:
        """Join a py-spy dump to the thread records and set ``py_status``."""
        if sample.status != "alive" or outcome is None:
            return sample
        if outcome.dumps is None:
            kind = outcome.error.kind if outcome.error is not None else ""
            status = "not-python" if kind == KIND_NOT_PYTHON else "failed"
            return msgspec.structs.replace(sample, py_status=status)
        threads, interned = join_stacks(sample.threads, outcome.dumps, sample.pid, outcome.frames)
        for sid, stack in interned.items():
            if sid not in self.stacks:
                stack = self._stack_budget.admit(stack)
                self.stacks[sid] = stack
                new_stacks[sid] = stack
        return msgspec.structs.replace(
            sample,
            threads=threads,
            py_status="ok",
            stacks_reused=outcome.reused,
            stack_reader=outcome.reader,
        )


def _socket_count(links: FdLinks) -> Optional[int]:
    """The sockets of one readlink pass; None when the pass stopped at its cap."""
    if links.more:
        return None
    return sum(1 for _, link in links.links if link.startswith("socket:"))
