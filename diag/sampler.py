"""The Collector: one sampling round over every process of a job, all probes in parallel.

``take_sample`` re-discovers the process tree (new ranks appear, exited ones are kept and
marked ``exited``, unreaped ones ``zombie`` with their exit code), then runs, all at once under
``probes.runner.run_all``: per process the /proc read (resources + every thread) and the py-spy
dump, plus the listening-socket and log probes. Each ``ProcessSample`` carries the time its own
/proc read started, so rates stay right when one process is slow to read.

Stacks use py-spy in its default *blocking* mode (decided with the stacks probe): it pauses the
target for ~8 ms at 64 threads, but on Python < 3.11 ``--nonblocking`` cannot find OS thread
ids, and without them stacks cannot be joined to the /proc thread records (futex address, CPU
ticks) - the join is the point. Pass ``pyspy=None`` to collect without stacks.

``take_sample`` returns only what is new (processes first seen or whose role changed, stacks
not seen before), which is exactly what a ``diag watch`` journal line needs; ``processes`` and
``stacks`` hold the accumulated state for a one-shot ``.json`` bundle.
"""

from __future__ import annotations

import errno
import platform
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

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
from diag.probes import stacks as stacks_probe
from diag.probes.env import parse_environ, select_env
from diag.probes.host import read_host_info
from diag.probes.logs import LogTracker
from diag.probes.procfs import ProcFS
from diag.probes.proctree import (
    Identity,
    RankInfo,
    assign_roles,
    descendants,
    detect_rank,
    read_identity,
    title_of,
)
from diag.probes.resources import read_resources
from diag.probes.runner import ProbeCall, run_all
from diag.probes.sockets import listen_ports
from diag.probes.threads import decode_wait_status, read_threads
from diag.redact import Redactor

# py-spy gets the probe timeout itself (and kills its subprocess); the thread waiting on it a
# little more, so the subprocess's own timeout message is the one recorded.
_STACKS_GRACE_S = 2.0


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
    ) -> None:
        self.root_pid = root_pid
        # More tops of the same job, sampled as one tree (a Slurm node: the batch script and
        # each step's tasks, whose parent is slurmstepd, not the script).
        self.root_pids: Tuple[int, ...] = (root_pid, *extra_roots)
        self.procfs = procfs if procfs is not None else ProcFS()
        self.pyspy = pyspy
        self.probe_timeout_s = probe_timeout_s
        self.host = host
        self.redactor = Redactor()
        self.target = Target(root_pid=root_pid, log_paths=tuple(log_paths))
        self.processes: Dict[int, ProcessInfo] = {}
        self.stacks: Dict[str, Stack] = {}
        self._machine = platform.machine()
        self._host_info: Optional[HostInfo] = None
        self._ranks: Dict[int, RankInfo] = {}
        self._parents: Dict[int, Optional[int]] = {}
        self._exit_codes: Dict[int, Optional[int]] = {}
        self._logs = LogTracker(self.redactor, list(log_paths))

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
            return descendants(self.root_pid)
        return sorted({pid for root in self.root_pids for pid in descendants(root)})

    # -- discovery -------------------------------------------------------------------------

    def _discover(self, pids: List[int], index: int) -> Tuple[ProcessInfo, ...]:
        """Identity of new pids, then roles for all; returns the new or changed ProcessInfos."""
        new = [pid for pid in pids if pid not in self.processes]
        results = run_all(
            [
                ProbeCall("identity", lambda p=pid: read_identity(self.procfs, p), 5.0, pid)
                for pid in new
            ]
        )
        envs: Dict[int, Dict[str, str]] = {}
        identities: Dict[int, Identity] = {}
        for pid, result in zip(new, results):
            if result.value is None:
                continue
            ident = result.value
            env = parse_environ(ident.environ) if ident.environ else {}
            self.redactor.add_environ(env)  # learn every secret before anything is written
            identities[pid] = ident
            envs[pid] = env
            self._parents[pid] = ident.stat.ppid
            self._ranks[pid] = detect_rank(
                env, ident.cmdline, title_of(ident.cmdline, ident.stat.name)
            )
        roles = assign_roles(self.root_pid, self._parents, self._ranks)
        host = self.host_info()
        changed: List[ProcessInfo] = []
        for pid, ident in identities.items():
            rank = self._ranks[pid]
            start_s = None
            if host.boot_time_s is not None:
                start_s = host.boot_time_s + ident.stat.start_ticks / host.clk_tck
            env = {k: self.redactor.scrub(v) for k, v in select_env(envs[pid]).items()}
            self.processes[pid] = ProcessInfo(
                pid=pid,
                host=self.host,
                ppid=ident.stat.ppid,
                name=self.redactor.scrub(ident.stat.name),
                exe=ident.exe,
                cmdline=self.redactor.scrub_argv(ident.cmdline),
                role=roles.get(pid, "process"),
                rank=rank.rank,
                local_rank=rank.local_rank,
                world_size=rank.world_size,
                rank_source=rank.source,
                env=env,
                start_time_s=start_s,
                first_seen_sample=index,
            )
            changed.append(self.processes[pid])
        for pid, info in list(self.processes.items()):
            role = roles.get(pid, info.role)
            if pid not in identities and role != info.role:
                self.processes[pid] = msgspec.structs.replace(info, role=role)
                changed.append(self.processes[pid])
        return tuple(changed)

    # -- one process -------------------------------------------------------------------------

    def _read_proc(self, pid: int) -> ProcessSample:
        t_s = time.time()
        try:
            res = read_resources(self.procfs, pid, self.host_info().page_size_bytes)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ESRCH):
                return ProcessSample(pid=pid, host=self.host, t_s=t_s, status="exited")
            raise
        zombie = res.stat.state in ("Z", "X", "x")
        if zombie:
            self._exit_codes[pid] = decode_wait_status(res.stat.exit_code)
        return ProcessSample(
            pid=pid,
            host=self.host,
            t_s=t_s,
            status="zombie" if zombie else "alive",
            state=res.stat.state,
            utime_ticks=res.stat.utime_ticks,
            stime_ticks=res.stat.stime_ticks,
            rss_bytes=res.rss_bytes,
            vms_bytes=res.vms_bytes,
            num_threads=res.stat.num_threads,
            io=res.io,
            threads=() if zombie else read_threads(self.procfs, pid, self._machine),
            exit_code=self._exit_codes.get(pid),
        )

    def _read_logs(self, pids: List[int]) -> Tuple[LogSample, ...]:
        self._logs.discover(self.procfs, pids)
        return self._logs.sample()

    # -- the round ---------------------------------------------------------------------------

    def take_sample(self, index: int) -> SampleDelta:
        t0 = time.time()
        started = time.monotonic()
        tree = self._tree()
        new_processes = self._discover(tree, index)
        live = [pid for pid in tree if pid in self.processes]
        gone = [pid for pid in self.processes if pid not in set(tree)]
        timeout_s = self.probe_timeout_s
        proc_calls = [
            ProbeCall("proc", lambda p=pid: self._read_proc(p), timeout_s, pid) for pid in live
        ]
        stack_pids = [pid for pid in live if self.pyspy]
        stack_calls = [
            ProbeCall(
                "stacks",
                lambda p=pid: stacks_probe.dump_stacks(p, timeout_s, self.pyspy or ""),
                timeout_s + _STACKS_GRACE_S,
                pid,
            )
            for pid in stack_pids
        ]
        other_calls: List[ProbeCall[object]] = [
            ProbeCall("sockets", lambda: listen_ports(self.procfs, live), timeout_s),
            ProbeCall("logs", lambda: self._read_logs(live), timeout_s),
        ]
        results = run_all([*proc_calls, *stack_calls, *other_calls])  # type: ignore[list-item]
        failures: List[ProbeFailure] = []
        timings: Dict[str, float] = {}
        for call, result in zip([*proc_calls, *stack_calls, *other_calls], results):
            timings[call.probe] = max(timings.get(call.probe, 0.0), round(result.duration_s, 4))
            if result.failure is not None:
                failures.append(
                    msgspec.structs.replace(result.failure, host=self.host, sample=index)
                )
        n_proc, n_stack = len(proc_calls), len(stack_calls)
        proc_results = results[:n_proc]
        stack_results = dict(zip(stack_pids, results[n_proc : n_proc + n_stack]))
        ports_result, logs_result = results[n_proc + n_stack :]
        ports: Dict[int, Tuple[int, ...]] = ports_result.value or {}  # type: ignore[assignment]

        samples: List[ProcessSample] = []
        new_stacks: Dict[str, Stack] = {}
        for pid, result in zip(live, proc_results):
            sample = result.value
            if not isinstance(sample, ProcessSample):
                sample = ProcessSample(pid=pid, host=self.host, t_s=t0, status="unreadable")
            sample = self._with_stacks(sample, stack_results.get(pid), new_stacks)
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
        logs = logs_result.value if isinstance(logs_result.value, tuple) else ()
        sample = Sample(
            index=index,
            t_s=t0,
            duration_s=round(time.monotonic() - started, 4),
            processes=tuple(sorted(samples, key=lambda s: s.pid)),
            logs=logs,
            failures=tuple(failures),
            probe_timings_s=timings,
        )
        return SampleDelta(sample, new_processes, new_stacks)

    def _with_stacks(
        self, sample: ProcessSample, result: object, new_stacks: Dict[str, Stack]
    ) -> ProcessSample:
        """Join a py-spy dump to the thread records and set ``py_status``."""
        if sample.status != "alive" or result is None:
            return sample
        failure = getattr(result, "failure", None)
        dumps = getattr(result, "value", None)
        if failure is not None:
            reason = str(getattr(failure, "reason", "")).lower()
            status = "not-python" if "not a python" in reason else "failed"
            return msgspec.structs.replace(sample, py_status=status)
        if dumps is None:
            return sample
        threads, interned = stacks_probe.join_stacks(sample.threads, dumps)
        for stack_id, stack in interned.items():
            if stack_id not in self.stacks:
                self.stacks[stack_id] = stack
                new_stacks[stack_id] = stack
        return msgspec.structs.replace(sample, threads=threads, py_status="ok")
