"""The processes of one capture: who they are, which rank, which role - kept across samples.

``diag.collect.collector.Collector`` asks it, each sample, to take in the PIDs of the current
tree: new ones are read once (argv, environment at exec time, start time) under the probe
timeout, their secrets taught to the redactor before anything is written, their rank detected
(``probes.proctree``). Ranks that can only be inferred - a dead rank from the WORLD_SIZE its
siblings miss, spawned/forked sibling groups from their start order once their stacks show they
are not a worker pool - may change a process's rank or role after it was first recorded; such
processes are re-issued (a ``diag watch`` journal keeps the last record of each PID).

A process is (pid, start ticks): ``starts`` is what the tree walk compares with
(``probes.proctree.walk_tree``). A PID that names a new process of the job - the one recorded
exited and its PID was reused - is not taken in under the old record (the Collector marks that
one exited and leaves the newcomer out); the newcomer's environment and argv still teach the
redactor (``learn_newcomers``), since what it writes to a shared log is read.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import msgspec

from diag.frameworks import union
from diag.model import HostInfo, ProbeFailure, ProcessInfo, ProcessSample, Stack
from diag.probes.env import (
    MAX_ENVIRON_BYTES,
    MAX_KEPT_ENV_BYTES,
    MAX_KEPT_VARS,
    bounded_env,
    learn_environ,
    parse_environ,
)
from diag.probes.procfs import ProcFS
from diag.probes.proctree import (
    POOL_WORKER_FILES,
    Identity,
    RankInfo,
    assign_roles,
    detect_rank,
    infer_dead_rank,
    local_rank_families,
    parse_cmdline,
    read_identity,
    start_order_groups,
    title_of,
)
from diag.probes.runner import ProbeCall, ProbeResult, run_all
from diag.redaction.redact import Redactor
from diag.vocab import Role


class ProcessTable:
    def __init__(
        self,
        root_pid: int,
        procfs: ProcFS,
        redactor: Redactor,
        host_info: Callable[[], HostInfo],
        probe_timeout_s: float,
        host: str = "",
    ) -> None:
        self.root_pid = root_pid
        self.procfs = procfs
        self.redactor = redactor
        self.host_info = host_info
        self.probe_timeout_s = probe_timeout_s
        self.host = host
        self.infos: Dict[int, ProcessInfo] = {}
        self.identity_failures: List[ProbeFailure] = []  # of the latest ``discover``
        self._ranks: Dict[int, RankInfo] = {}
        self._parents: Dict[int, Optional[int]] = {}
        self._cmdlines: Dict[int, Tuple[str, ...]] = {}
        self._start_ticks: Dict[int, int] = {}
        self._learned: Set[Tuple[int, int]] = set()  # (pid, start ticks) of newcomers read
        # pid -> (exe, hash of its environ block) when its secrets were last learned
        self._env_seen: Dict[int, Tuple[Optional[str], int]] = {}

    @property
    def starts(self) -> Mapping[int, int]:
        """pid -> start ticks of every process recorded: the identity a PID must still have."""
        return self._start_ticks

    def learn_newcomers(self, reused: Mapping[int, int]) -> List[int]:
        """Teach the redactor the secrets of processes of the job that took a recorded
        process's PID (``reused``: pid -> their start ticks), each once; they get no record.
        Returns the PIDs seen reused for the first time."""
        fresh = [pid for pid, start in reused.items() if (pid, start) not in self._learned]
        read = run_all(
            [
                ProbeCall(
                    "identity", partial(read_identity, self.procfs, pid), self.probe_timeout_s, pid
                )
                for pid in fresh
            ]
        )
        for pid, result in zip(fresh, read):
            self._learned.add((pid, reused[pid]))
            ident = result.value
            if ident is None or ident.stat.start_ticks != reused[pid]:
                continue  # gone already, or yet another process
            _learn(self.redactor, ident.environ)
            self.redactor.scrub_argv(ident.cmdline)  # learns the values of secret flags
        return fresh

    def relearn(self, pids: Sequence[int]) -> None:
        """Learn again the secrets of recorded processes whose exe or environ block changed.

        The environment was read once, when a PID was first seen; a wrapper that ``export``s
        a token and ``exec``s the job (same PID, same start time, new exe and environ) or a
        target that rewrites its environ block would keep a secret diag never learned - and
        which the job then prints. Costs a readlink and one read of environ per process and
        sample, each under the probe timeout (a process in D state can block the read).
        """
        seen = [pid for pid in pids if pid in self._env_seen]
        read = run_all(
            [
                ProbeCall(
                    "environ",
                    partial(_exe_and_environ, self.procfs, pid),
                    self.probe_timeout_s,
                    pid,
                )
                for pid in seen
            ]
        )
        for pid, result in zip(seen, read):
            if result.value is None:
                continue
            exe, environ, cmdline = result.value
            key = (exe, hash(environ))
            if key == self._env_seen[pid]:
                continue
            self._env_seen[pid] = key
            _learn(self.redactor, environ)
            self.redactor.scrub_argv(cmdline)  # learns the values of secret flags

    def discover(
        self, pids: Sequence[int], index: int, known: Optional[Mapping[int, Identity]] = None
    ) -> Tuple[ProcessInfo, ...]:
        """Read the PIDs not seen before (``known``: identities a worker already read);
        returns the new or changed ProcessInfos."""
        known = known or {}
        new = [pid for pid in pids if pid not in self.infos]
        to_read = [pid for pid in new if pid not in known]
        read = run_all(
            [
                ProbeCall(
                    "identity", partial(read_identity, self.procfs, pid), self.probe_timeout_s, pid
                )
                for pid in to_read
            ]
        )
        by_pid = dict(zip(to_read, read))
        results = [by_pid.get(pid) or ProbeResult(known[pid], None, 0.0) for pid in new]
        self.identity_failures = [
            r.failure
            for r in results
            if r.failure is not None and "No such file" not in r.failure.reason  # just exited
        ]
        envs: Dict[int, Dict[str, str]] = {}
        identities: Dict[int, Identity] = {}
        for pid, result in zip(new, results):
            if result.value is None:
                continue
            ident = result.value
            env = parse_environ(ident.environ) if ident.environ else {}
            _learn(self.redactor, ident.environ)  # every secret, before anything is written
            self._env_seen[pid] = (ident.exe, hash(ident.environ or b""))
            identities[pid] = ident
            envs[pid] = env
            self._parents[pid] = ident.stat.ppid
            self._cmdlines[pid] = ident.cmdline
            self._start_ticks[pid] = ident.stat.start_ticks
            self._ranks[pid] = detect_rank(
                env, ident.cmdline, title_of(ident.cmdline, ident.stat.name)
            )
        zombies = {pid for pid, ident in identities.items() if ident.stat.state == "Z"}
        self._ranks.update(infer_dead_rank(self._parents, self._ranks, zombies))
        self._ranks.update(local_rank_families(self._parents, self._ranks, self._cmdlines))
        roles = assign_roles(self.root_pid, self._parents, self._ranks)
        changed = [
            self._new_info(ident, envs[pid], roles, index) for pid, ident in identities.items()
        ]
        changed.extend(self._refresh(roles, skip=set(identities)))
        return tuple(changed)

    def _new_info(
        self, ident: Identity, env: Dict[str, str], roles: Mapping[int, Role], index: int
    ) -> ProcessInfo:
        host = self.host_info()
        rank = self._ranks[ident.pid]
        start_s = None
        if host.boot_time_s is not None:
            start_s = host.boot_time_s + ident.stat.start_ticks / host.clk_tck
        kept, left_out = bounded_env(env, self.redactor)
        self._note_env_budget(ident, left_out, index)
        info = ProcessInfo(
            pid=ident.pid,
            host=self.host,
            ppid=ident.stat.ppid,
            name=self.redactor.scrub(ident.stat.name),
            exe=ident.exe,
            cmdline=self.redactor.scrub_argv(ident.cmdline),
            role=roles.get(ident.pid, "process"),
            rank=rank.rank,
            local_rank=rank.local_rank,
            world_size=rank.world_size,
            rank_source=rank.source,
            env=kept,
            start_time_s=start_s,
            first_seen_sample=index,
            uid=ident.uid,
        )
        self.infos[ident.pid] = info
        return info

    def _note_env_budget(self, ident: Identity, left_out: int, index: int) -> None:
        """Record what the environment budgets cut from a newcomer (issue #25)."""
        reasons = []
        if left_out:
            reasons.append(
                f"truncated: {left_out} more allowlisted environment variables not kept "
                f"(budget: {MAX_KEPT_VARS} variables, {MAX_KEPT_ENV_BYTES >> 10} KiB a process)"
            )
        if ident.environ is not None and len(ident.environ) >= MAX_ENVIRON_BYTES:
            reasons.append(
                f"truncated: environ block read up to {MAX_ENVIRON_BYTES >> 20} MiB only"
            )
        for reason in reasons:
            self.identity_failures.append(
                ProbeFailure(
                    probe="environ", reason=reason, pid=ident.pid, host=self.host, sample=index
                )
            )

    def _refresh(self, roles: Mapping[int, Role], skip: Set[int]) -> List[ProcessInfo]:
        """Re-issue the ProcessInfos whose role or rank changed."""
        changed: List[ProcessInfo] = []
        for pid, info in list(self.infos.items()):
            rank = self._ranks.get(pid, RankInfo())
            role = roles.get(pid, info.role)
            now = (role, rank.rank, rank.source)
            if pid in skip or now == (info.role, info.rank, info.rank_source):
                continue
            self.infos[pid] = msgspec.structs.replace(
                info,
                role=role,
                rank=rank.rank,
                rank_source=rank.source,
                local_rank=info.local_rank if info.local_rank is not None else rank.local_rank,
                world_size=info.world_size if info.world_size is not None else rank.world_size,
            )
            changed.append(self.infos[pid])
        return changed

    def infer_start_order(
        self, samples: Sequence[ProcessSample], stacks: Mapping[str, Stack]
    ) -> List[ProcessInfo]:
        """Ranks of spawned/forked sibling groups by start order (``start_order_groups``),
        once stacks of the group are in and none of them runs a worker-pool loop."""
        by_pid = {s.pid: s for s in samples}
        dead = {pid for pid, s in by_pid.items() if s.status in ("zombie", "exited")}
        groups = start_order_groups(
            self._parents, self._ranks, self._cmdlines, self._start_ticks, dead
        )
        inferred = False
        for group in groups:
            live = [by_pid[p] for p in group if p in by_pid and by_pid[p].status == "alive"]
            dumped = [s for s in live if s.py_status == "ok"]
            # Pool members all run the same loop: one dumped member is enough to tell.
            if not dumped or any(_in_pool(s, stacks) for s in dumped):
                continue
            # A server the job started beside its workers (a multiprocessing manager, forked
            # from the same parent) answers their calls: no rank, and not counted among them.
            servers = {s.pid for s in dumped if _serves_siblings(s, stacks)}
            group = [pid for pid in group if pid not in servers]
            if len(group) < 2:
                continue
            for rank, pid in enumerate(group):
                local = self._ranks.get(pid, RankInfo()).local_rank
                self._ranks[pid] = RankInfo(rank, local, len(group), "inferred:start-order")
            inferred = True
        if not inferred:
            return []
        return self._refresh(assign_roles(self.root_pid, self._parents, self._ranks), set())


def _learn(redactor: Redactor, environ: Optional[bytes]) -> None:
    """The secrets of an environ block read up to MAX_ENVIRON_BYTES: one the bound cut
    inside a secret variable makes that value a cut secret (``learn_environ``)."""
    if environ:
        learn_environ(redactor, environ, cut=len(environ) >= MAX_ENVIRON_BYTES)


def _exe_and_environ(procfs: ProcFS, pid: int) -> Tuple[Optional[str], bytes, Tuple[str, ...]]:
    """What ``relearn`` compares and learns from: exe link, environ block, argv."""
    exe = procfs.readlink(pid, "exe")
    environ = procfs.read_bytes_capped(pid, "environ", MAX_ENVIRON_BYTES)
    try:
        cmdline = parse_cmdline(procfs.read_bytes(pid, "cmdline"))
    except OSError:
        cmdline = ()
    return exe, environ, cmdline


def _serves_siblings(sample: ProcessSample, stacks: Mapping[str, Stack]) -> bool:
    """A thread of it runs a server loop of the job's own (``union.SERVER_FRAMES``)."""
    for thread in sample.threads:
        stack = stacks.get(thread.stack_id or "")
        if stack and any(
            union.matches(union.SERVER_FRAMES, frame.name.rsplit(".", 1)[-1], frame.filename)
            for frame in stack.frames
        ):
            return True
    return False


def _in_pool(sample: ProcessSample, stacks: Mapping[str, Stack]) -> bool:
    for thread in sample.threads:
        stack = stacks.get(thread.stack_id or "")
        if stack and any(
            marker in frame.filename for frame in stack.frames for marker in POOL_WORKER_FILES
        ):
            return True
    return False
