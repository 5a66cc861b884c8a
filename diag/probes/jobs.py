"""The ML jobs of this host, found without a PID: the /proc half of ``diag ps``.

One pass reads the stat of every process (one ``read`` each, the floor on a host of 5,000);
argv and environment only of processes whose kernel name could be Python or a launcher
(``job_signals.worth_reading``), each read bounded; then, for the jobs found only, their
members' listening sockets (sock_diag LISTEN dump + their fd links) and, after
``cpu_window_s``, their CPU ticks again. Nothing reads a stack, attaches or signals: a look
this cheap can be taken on any host at any time, and it is the first thing someone without a
PID (an on-call engineer, a coding agent) needs. GPUs come from an NVML sample the caller
hands in (``GpuSample``, read by the killable worker of ``diag.probes.gpu``).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Set, Tuple

from diag.model import GpuSample
from diag.probes.bounded_reads import STALL_S, Read, read_all
from diag.probes.env import MAX_ENVIRON_BYTES, parse_environ, stream_environ
from diag.probes.job_signals import (
    JobKind,
    Member,
    ProcStat,
    classify_member,
    group_roots,
    is_diag,
    job_kind,
    launcher_kind,
    parse_proc_stat,
    parse_proc_stat_head,
    program_of,
    worth_reading,
)
from diag.probes.procfs import ProcFS, read_capped
from diag.probes.proctree import parse_cmdline
from diag.probes.rank_sources import detect_rank, title_of
from diag.probes.sock_diag import listening_sockets
from diag.probes.sockets import listen_table
from diag.redaction.redact import Redactor

STAT_MAX_BYTES = 4096
CMDLINE_MAX_BYTES = 8192  # a setproctitle title or a launcher's flags; argv past it is cut
# The environment's first variables kept to classify by (RANK, LOCAL_RANK...); the whole
# block (up to MAX_ENVIRON_BYTES) is still read, for the redactor to learn its secrets.
ENVIRON_MAX_BYTES = 256 * 1024
# Where diag cut an argv it read: a learned secret straddling the cut loses its first
# characters too (``Redactor.scrub``'s cut markers).
CUT_MARKER = "\u2026[truncated]"
MAX_FDS_PER_PROCESS = 4096
MAX_JOB_PROCESSES = 4096  # processes of one job looked at for ports and CPU
STATES = ("R", "S", "D", "T", "Z")


class Job(NamedTuple):
    """One job as ``diag ps`` shows it."""

    root_pid: int
    kind: JobKind
    launcher: str  # the root's program: torchrun, python, uvicorn, sglang.launch_server
    command: Tuple[str, ...]  # the root's argv, scrubbed
    pids: Tuple[int, ...]  # root first, then its descendants by pid
    ranks: Tuple[int, ...]
    world_size: Optional[int]
    age_s: Optional[float]
    ports: Tuple[int, ...]
    gpus: Tuple[int, ...]
    states: Dict[str, int]  # R S D T Z -> processes in that state (T includes t)
    cpu_pct: Optional[float]  # all its processes together, over the scan's window
    signals: Tuple[str, ...]  # why it is a job: "env", "title", "launcher", "server", "gpu"


class _Seen(NamedTuple):
    argv: Tuple[str, ...]
    env: Dict[str, str]


class HostScan(NamedTuple):
    """Every process of the host by its stat's head (``parse_proc_stat_head``), and the stat
    lines themselves, parsed whole for the few processes that turn out to be a job's."""

    stats: Dict[int, ProcStat]
    raw: Dict[int, bytes]

    def parse_whole(self, pids: Iterable[int]) -> None:
        for pid in pids:
            whole = parse_proc_stat(pid, self.raw.get(pid, b""))
            if whole is not None:
                self.stats[pid] = whole


def scan_stats(procfs: ProcFS) -> HostScan:
    """Every process of the host (kernel threads left out): one ``read`` of its stat, opened
    relative to /proc's own fd. This loop is the cost of ``diag ps`` on a busy host (5,000
    PIDs: 5,000 opens), so it does nothing else: a stat line comes whole from one read of
    ``STAT_MAX_BYTES`` (a seq file of one record), no second read waits for EOF, and only
    the fields that place a process in the tree are parsed."""
    out = HostScan({}, {})
    try:
        dir_fd = os.open(str(procfs.root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return out
    flags = os.O_RDONLY | os.O_CLOEXEC
    try:
        for pid in procfs.pids():
            try:
                fd = os.open(f"{pid}/stat", flags, dir_fd=dir_fd)
            except OSError:
                continue  # exited since the listing
            try:
                data = os.read(fd, STAT_MAX_BYTES)
            except OSError:
                continue
            finally:
                os.close(fd)
            stat = parse_proc_stat_head(pid, data)
            if stat is not None and stat.ppid != 2 and pid != 2:
                out.stats[pid] = stat
                out.raw[pid] = data
    finally:
        os.close(dir_fd)
    return out


def _children(stats: Mapping[int, ProcStat]) -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = {}
    for stat in stats.values():
        kids.setdefault(stat.ppid, []).append(stat.pid)
    return kids


def _subtree(root: int, kids: Mapping[int, List[int]], excluded: Set[int]) -> List[int]:
    out = [root]
    stack = [root]
    while stack and len(out) < MAX_JOB_PROCESSES:
        for child in sorted(kids.get(stack.pop(), ())):
            if child not in excluded:
                out.append(child)
                stack.append(child)
    return [root, *sorted(out[1:])]


def _own_tree(stats: Mapping[int, ProcStat], kids: Mapping[int, List[int]]) -> Set[int]:
    """diag's own process and everything it started (py-spy, the NVML worker)."""
    me = os.getpid()
    return set(_subtree(me, kids, set())) if me in stats else {me}


def _read_seen(
    procfs: ProcFS, stats: Mapping[int, ProcStat], problems: List[str], redactor: Redactor
) -> Dict[int, _Seen]:
    """argv and environment of every process worth reading, each read bounded in bytes and
    in time (``bounded_reads``: a process stuck in the kernel must not hang ``diag ps``).
    The redactor learns the secrets of each whole environment as it is read (the
    environment kept is its first ``ENVIRON_MAX_BYTES``)."""
    root = str(procfs.root)
    pids = [pid for pid, stat in stats.items() if worth_reading(stat.comm)]
    env_reader = functools.partial(_stream_env, redactor)
    reads = [
        read
        for pid in pids
        for read in (
            Read(f"{root}/{pid}/cmdline", CMDLINE_MAX_BYTES),
            Read(f"{root}/{pid}/environ", MAX_ENVIRON_BYTES, env_reader),
        )
    ]
    done = read_all(reads)
    for i in done.hung:
        problems.append(
            f"{reads[i].path}: the read did not return in {STALL_S:g} s (its memory map is "
            "locked: a thread of it stuck in the kernel, state D?) - left out"
        )
    if done.skipped:
        problems.append(
            f"{len(done.skipped)} more /proc reads not tried after {len(done.hung)} hung: "
            "those processes are left out"
        )
    seen: Dict[int, _Seen] = {}
    for k, pid in enumerate(pids):
        raw, env_raw = done.data[2 * k], done.data[2 * k + 1]
        seen[pid] = _Seen(_argv(raw), parse_environ(env_raw) if env_raw else {})
    return seen


def _stream_env(
    redactor: Redactor, path: str, max_bytes: int, progress: Callable[[], None]
) -> Optional[bytes]:
    return stream_environ(path, redactor, ENVIRON_MAX_BYTES, max_bytes, progress)


def _argv(raw: Optional[bytes]) -> Tuple[str, ...]:
    """argv from a cmdline read up to ``CMDLINE_MAX_BYTES``; one cut there ends in the cut
    marker, so a learned secret the cut split still loses the characters before it."""
    if not raw:
        return ()
    argv = parse_cmdline(raw)
    if len(raw) >= CMDLINE_MAX_BYTES and argv:
        argv = (*argv[:-1], argv[-1] + CUT_MARKER)
    return argv


def gpu_pids(gpu: Optional[GpuSample]) -> Dict[int, Set[int]]:
    """{pid: GPU indices} of the processes NVML lists."""
    out: Dict[int, Set[int]] = {}
    if gpu is None or not gpu.available:
        return out
    for device in gpu.devices:
        for proc in device.processes:
            out.setdefault(proc.pid, set()).add(device.index)
    return out


def find_jobs(
    procfs: Optional[ProcFS] = None,
    *,
    gpu: Optional[GpuSample] = None,
    cpu_window_s: float = 0.1,
    redactor: Optional[Redactor] = None,
    clk_tck: int = 0,
    problems: Optional[List[str]] = None,
) -> List[Job]:
    """The jobs of this host, oldest root first; what could not be read goes to
    ``problems``."""
    procfs = procfs if procfs is not None else ProcFS()
    redactor = redactor if redactor is not None else Redactor()
    clk_tck = clk_tck or os.sysconf("SC_CLK_TCK")
    started = time.monotonic()
    host = scan_stats(procfs)
    stats = host.stats
    kids = _children(stats)
    seen = _read_seen(procfs, stats, problems if problems is not None else [], redactor)
    on_gpu = gpu_pids(gpu)
    excluded = _own_tree(stats, kids) | {p for p, s in seen.items() if is_diag(s.argv)}
    members, launchers = _members(stats, seen, on_gpu, excluded)
    roots = group_roots(stats, members, launchers, excluded)
    trees = {root: _subtree(root, kids, excluded) for root in roots}
    host.parse_whole(p for pids in trees.values() for p in pids)
    ports = _listen_ports(procfs, [p for pids in trees.values() for p in pids])
    _wait_until(started, cpu_window_s)
    after = {p: _cpu_ticks(procfs, p) for pids in trees.values() for p in pids}
    elapsed_s = max(time.monotonic() - started, 1e-3)
    uptime_s = _uptime_s(procfs)
    jobs = [
        _job(root, trees[root], roots[root], stats, seen, members, redactor)._replace(
            ports=tuple(sorted({port for p in trees[root] for port in ports.get(p, ())})),
            gpus=tuple(sorted({i for p in trees[root] for i in on_gpu.get(p, ())})),
            cpu_pct=_cpu_pct(trees[root], stats, after, elapsed_s, clk_tck),
            age_s=(
                max(0.0, uptime_s - stats[root].start_ticks / clk_tck)
                if uptime_s is not None
                else None
            ),
        )
        for root in roots
    ]
    return sorted(jobs, key=lambda j: (stats[j.root_pid].start_ticks, j.root_pid))


def _members(
    stats: Mapping[int, ProcStat],
    seen: Mapping[int, _Seen],
    on_gpu: Mapping[int, Set[int]],
    excluded: Set[int],
) -> Tuple[Dict[int, Member], Set[int]]:
    """The processes that carry a job's signal, and the launchers among all of them (the
    redactor learned every secret of the environments as they were read)."""
    members: Dict[int, Member] = {}
    launchers: Set[int] = set()
    for pid, item in seen.items():
        if pid in excluded:
            continue
        found = classify_member(
            item.argv, title_of(item.argv, stats[pid].comm), item.env, pid in on_gpu
        )
        if found is not None:
            members[pid] = Member(*found)
        if launcher_kind(item.argv) is not None:
            launchers.add(pid)
    for pid in on_gpu:  # a GPU process whose name is not Python's (a C++ server)
        if pid in stats and pid not in members and pid not in excluded:
            members[pid] = Member("gpu", "gpu")
    return members, launchers


def _job(
    root: int,
    pids: List[int],
    member_pids: List[int],
    stats: Mapping[int, ProcStat],
    seen: Mapping[int, _Seen],
    members: Mapping[int, Member],
    redactor: Redactor,
) -> Job:
    ranks: Set[int] = set()
    worlds: Set[int] = set()
    for pid in pids:
        item = seen.get(pid)
        if item is None:
            continue
        info = detect_rank(item.env, item.argv, title_of(item.argv, stats[pid].comm))
        if info.rank is not None:
            ranks.add(info.rank)
        if info.world_size is not None:
            worlds.add(info.world_size)
    states = dict.fromkeys(STATES, 0)
    for pid in pids:
        letter = stats[pid].state.upper() if pid in stats else "?"
        letter = "S" if letter == "I" else letter
        if letter in states:
            states[letter] += 1
    root_seen = seen.get(root)
    argv = root_seen.argv if root_seen is not None else (stats[root].comm,)
    root_member = members.get(root)
    return Job(
        root_pid=root,
        kind=job_kind(
            [members[p].kind for p in member_pids if p in members],
            launcher_kind(argv) or (root_member.kind if root_member else None),
        ),
        launcher=redactor.scrub(program_of(argv) or stats[root].comm),
        command=redactor.scrub_argv(argv),
        pids=tuple(pids),
        ranks=tuple(sorted(ranks)),
        world_size=max(worlds) if worlds else None,
        age_s=None,
        ports=(),
        gpus=(),
        states=states,
        cpu_pct=None,
        signals=tuple(sorted({members[p].signal for p in member_pids if p in members})),
    )


def _wait_until(started: float, window_s: float) -> None:
    left = window_s - (time.monotonic() - started)
    if left > 0:
        time.sleep(left)


def _cpu_ticks(procfs: ProcFS, pid: int) -> Optional[int]:
    data = read_capped(f"{procfs.root}/{pid}/stat", STAT_MAX_BYTES)
    stat = parse_proc_stat(pid, data) if data else None
    return stat.cpu_ticks if stat is not None else None


def _cpu_pct(
    pids: Iterable[int],
    before: Mapping[int, ProcStat],
    after: Mapping[int, Optional[int]],
    elapsed_s: float,
    clk_tck: int,
) -> Optional[float]:
    """CPU of the job's processes between the scan and now, in % of one core."""
    ticks = 0
    for pid in pids:
        now = after.get(pid)
        if now is not None and pid in before:
            ticks += max(0, now - before[pid].cpu_ticks)
    return round(100.0 * ticks / clk_tck / elapsed_s, 1)


def _uptime_s(procfs: ProcFS) -> Optional[float]:
    text = procfs.read_global("uptime")
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def _listen_ports(procfs: ProcFS, pids: Iterable[int]) -> Dict[int, Tuple[int, ...]]:
    """{pid: its listening TCP ports}: one LISTEN-only sock_diag dump for diag's network
    namespace (/proc/PID/net/tcp for a process in another), then each process's fd links."""
    wanted = list(pids)
    if not wanted:
        return {}
    ours = procfs.readlink(os.getpid(), "ns", "net") if procfs.live else None
    tables: Dict[str, Dict[int, int]] = {}
    out: Dict[int, Tuple[int, ...]] = {}
    for pid in wanted:
        netns = procfs.readlink(pid, "ns", "net") or f"pid:{pid}"
        if netns not in tables:
            tables[netns] = _listen_table(procfs, pid, own=netns == ours)
        table = tables[netns]
        if not table:
            continue
        ports: Set[int] = set()
        for fd in procfs.fds(pid)[:MAX_FDS_PER_PROCESS]:
            link = procfs.readlink(pid, "fd", str(fd))
            if link and link.startswith("socket:["):
                inode = link[8:-1]
                if inode.isdigit() and int(inode) in table:
                    ports.add(table[int(inode)])
        if ports:
            out[pid] = tuple(sorted(ports))
    return out


def _listen_table(procfs: ProcFS, pid: int, own: bool) -> Dict[int, int]:
    if own:
        try:
            return listening_sockets()
        except OSError:
            pass
    return listen_table(procfs, pid)
