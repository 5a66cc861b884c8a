"""What makes a process look like part of an ML job, and where its job starts (pure).

``diag ps`` finds jobs without a PID, so it must tell a rank from the thousands of other
processes of a host by what /proc shows cheaply. A process is a *member* when it carries one
of these signals (first match wins, ``Signal`` names it):

- ``env``: ``RANK`` / ``LOCAL_RANK`` (or an MPI launcher's rank variable) in its environment at
  exec time - what torchrun, mpirun and Slurm's srun give every rank;
- ``title``: a framework's process title - ``sglang::scheduler_TP0``, ``VLLM::EngineCore``,
  ``VLLM::Worker_TP1``, ``VllmWorker``, ``ray::IDLE`` / ``ray::Actor.method``;
- ``launcher``: a launcher by its argv - ``torchrun``, ``python -m torch.distributed.run``,
  ``accelerate launch``, ``deepspeed``, ``mpirun``, ``sglang.launch_server``, ``vllm serve``,
  Ray's ``raylet`` / ``gcs_server``;
- ``server``: a Python serving stack - ``uvicorn``, ``gunicorn`` (a model server's API front end);
- ``gpu``: a process NVML lists on a GPU.

A job is a process tree: from each member diag climbs to its parent while the parent is a
member too, or a launcher, or (not a shell, nor diag) in the same session - so a plain
``python train.py`` started from a shell is its own root, and the test runner or the shell that
started a job is never taken for it. Signals are read from argv, title and environment only:
nothing here reads stacks or pauses anything.
"""

from __future__ import annotations

import os
from typing import Dict, List, Literal, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from diag.probes.rank_sources import LOCAL_RANK_ENV, RANK_ENV

Signal = Literal["env", "title", "launcher", "server", "gpu"]
JobKind = Literal["torchrun", "mpi", "sglang", "vllm", "ray", "server", "ranks", "gpu"]

# Kernel names (stat's comm, at most 15 characters) of processes whose argv and environment
# are worth reading: everything else on the host (sleep, sshd, kworkers) costs one stat read.
_READ_COMMS = (
    "python",
    "pt_",  # torch renames the main thread: pt_main_thread, pt_elastic
    "torchrun",
    "accelerate",
    "deepspeed",
    "mpirun",
    "mpiexec",
    "orterun",
    "prterun",
    "sglang",
    "vllm",
    "VLLM",
    "Vllm",
    "ray::",
    "raylet",
    "gcs_server",
    "uvicorn",
    "gunicorn",
)
_TITLE_PREFIXES: Tuple[Tuple[str, JobKind], ...] = (
    ("sglang::", "sglang"),
    ("VLLM::", "vllm"),
    ("VllmWorker", "vllm"),
    ("ray::", "ray"),
)
_LAUNCHER_MODULES: Tuple[Tuple[str, JobKind], ...] = (
    ("torch.distributed.run", "torchrun"),
    ("torch.distributed.launch", "torchrun"),
    ("sglang.launch_server", "sglang"),
    ("vllm.entrypoints", "vllm"),
)
_LAUNCHER_PROGRAMS: Dict[str, JobKind] = {
    "torchrun": "torchrun",
    "accelerate": "torchrun",
    "deepspeed": "torchrun",
    "mpirun": "mpi",
    "mpiexec": "mpi",
    "orterun": "mpi",
    "prterun": "mpi",
    "vllm": "vllm",
    "raylet": "ray",
    "gcs_server": "ray",
}
_SERVER_PROGRAMS = ("uvicorn", "gunicorn")
# Never climbed into: a job's root is below these (a login, a terminal, a supervisor).
_SHELLS = frozenset(
    {"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh", "busybox", "tmux", "screen"}
    | {"sshd", "systemd", "init", "login", "su", "sudo", "containerd-shim", "runc"}
    | {"slurmstepd", "srun", "sbatch", "salloc", "make", "nohup", "setsid", "timeout"}
)


_KIND_ORDER: Tuple[JobKind, ...] = ("sglang", "vllm", "ray", "torchrun", "mpi", "server", "gpu")


class ProcStat(NamedTuple):
    """The fields of /proc/PID/stat a host scan needs of every process."""

    pid: int
    comm: str
    state: str  # R S D T t Z X I
    ppid: int
    sid: int
    cpu_ticks: int  # utime + stime
    start_ticks: int
    threads: int


def parse_proc_stat(pid: int, data: bytes) -> Optional[ProcStat]:
    """One stat line, split after the LAST ``)`` (a name may hold one); None when it is no
    stat line (a process that exited mid-read leaves an empty file)."""
    close_at = data.rfind(b")")
    if close_at < 0:
        return None
    rest = data[close_at + 2 :].split(b" ", 21)
    if len(rest) < 21:
        return None
    try:
        return ProcStat(
            pid=pid,
            comm=data[data.find(b"(") + 1 : close_at].decode("utf-8", "replace"),
            state=rest[0].decode("ascii", "replace"),
            ppid=int(rest[1]),
            sid=int(rest[3]),
            cpu_ticks=int(rest[11]) + int(rest[12]),
            threads=int(rest[17]),
            start_ticks=int(rest[19]),
        )
    except ValueError:
        return None


def parse_proc_stat_head(pid: int, data: bytes) -> Optional[ProcStat]:
    """The name, state, parent and session only (CPU and start ticks left 0): what the host
    scan needs of each of its thousands of processes, at a third of ``parse_proc_stat``'s
    cost; a job's own processes are parsed whole afterwards."""
    close_at = data.rfind(b")")
    rest = data[close_at + 2 :].split(b" ", 4)
    if close_at < 0 or len(rest) < 5:
        return None
    try:
        ppid, sid = int(rest[1]), int(rest[3])
    except ValueError:
        return None
    comm = data[data.find(b"(") + 1 : close_at].decode("utf-8", "replace")
    return ProcStat(pid, comm, rest[0].decode("ascii", "replace"), ppid, sid, 0, 0, 0)


def is_kernel_thread(stat: ProcStat) -> bool:
    return stat.pid == 2 or stat.ppid == 2


def worth_reading(comm: str) -> bool:
    """Whether argv and environment of a process named ``comm`` are read at all."""
    return comm.startswith(_READ_COMMS)


def program_of(argv: Sequence[str]) -> str:
    """The program an argv runs: ``python -m torch.distributed.run`` -> the module,
    ``/usr/bin/python3 /x/bin/torchrun`` -> ``torchrun``, else argv[0]'s base name."""
    if not argv:
        return ""
    base = os.path.basename(argv[0].split(" ", 1)[0])
    if base.startswith("python"):
        for i, arg in enumerate(argv[1:4], start=1):
            if arg == "-m" and i + 1 < len(argv):
                return argv[i + 1]
            if not arg.startswith("-"):
                return os.path.basename(arg)
    return base


def is_diag(argv: Sequence[str]) -> bool:
    """diag itself (its CLI, its NVML worker, a Slurm collector): never a job's member."""
    program = program_of(argv)
    return program == "diag" or program.startswith("diag.")


def launcher_kind(argv: Sequence[str]) -> Optional[JobKind]:
    """The kind of job a launcher's argv starts (None: no launcher)."""
    program = program_of(argv)
    kind = _LAUNCHER_PROGRAMS.get(program)
    if kind is not None:
        if program == "vllm" and "serve" not in argv[1:3]:
            return None
        return kind
    for module, kind in _LAUNCHER_MODULES:
        if program.startswith(module):
            return kind
    return None


def title_kind(title: str) -> Optional[JobKind]:
    for prefix, kind in _TITLE_PREFIXES:
        if title.startswith(prefix):
            return kind
    return None


def has_rank_env(env: Mapping[str, str]) -> bool:
    return any(name in env for name in RANK_ENV + LOCAL_RANK_ENV)


def classify_member(
    argv: Sequence[str], title: str, env: Mapping[str, str], on_gpu: bool
) -> Optional[Tuple[Signal, Optional[JobKind]]]:
    """Why this process belongs to an ML job, and what kind of job it suggests; None: no sign.
    Its title and argv say more about the kind than RANK does, so they are asked first."""
    kind = title_kind(title)
    if kind is not None:
        return "title", kind
    kind = launcher_kind(argv)
    if kind is not None:
        return "launcher", kind
    if has_rank_env(env):
        return "env", None
    if program_of(argv) in _SERVER_PROGRAMS:
        return "server", "server"
    if on_gpu:
        return "gpu", "gpu"
    return None


class Member(NamedTuple):
    signal: Signal
    kind: Optional[JobKind]


def climbs_to(
    child: ProcStat,
    parent: Optional[ProcStat],
    members: Mapping[int, Member],
    launcher_pids: Set[int],
    excluded: Set[int],
) -> bool:
    """Whether ``parent`` belongs to the same job as ``child``: it is a member or a launcher,
    or it shares the child's session and is neither a shell nor a supervisor. A child that
    leads its own session (``start_new_session``, torchrun's ranks) is climbed out of only
    into a member or a launcher, so the program that started it is not taken for its job."""
    if parent is None or parent.pid <= 1 or parent.pid in excluded or is_kernel_thread(parent):
        return False
    if parent.pid in members or parent.pid in launcher_pids:
        return True
    if child.sid == child.pid or parent.sid != child.sid:
        return False
    return parent.comm not in _SHELLS


def group_roots(
    stats: Mapping[int, ProcStat],
    members: Mapping[int, Member],
    launcher_pids: Set[int],
    excluded: Set[int],
) -> Dict[int, List[int]]:
    """{root pid: its members}: each member climbs to its job's root; a root below another
    job's process is folded into that job."""
    roots: Dict[int, List[int]] = {}
    for pid in sorted(members):
        node = stats[pid]
        seen = {pid}
        while True:
            parent = stats.get(node.ppid)
            if parent is None or parent.pid in seen:
                break
            if not climbs_to(node, parent, members, launcher_pids, excluded):
                break
            seen.add(parent.pid)
            node = parent
        roots.setdefault(node.pid, []).append(pid)
    return _fold_nested(stats, roots)


def _fold_nested(
    stats: Mapping[int, ProcStat], roots: Dict[int, List[int]]
) -> Dict[int, List[int]]:
    """A root whose ancestor is another root joins that job (a helper that started a session
    of its own under a rank)."""
    out: Dict[int, List[int]] = {}
    for root in sorted(roots):
        top = root
        node = stats.get(stats[root].ppid)
        hops = 0
        while node is not None and hops < 4096:
            if node.pid in roots:
                top = node.pid
            node = stats.get(node.ppid) if node.ppid != node.pid else None
            hops += 1
        out.setdefault(top, []).extend(roots[root])
    return out


def job_kind(kinds: Sequence[Optional[JobKind]], root_kind: Optional[JobKind]) -> JobKind:
    """The job's kind: its root's launcher first, then the most telling member."""
    if root_kind is not None:
        return root_kind
    for wanted in _KIND_ORDER:
        if wanted in kinds:
            return wanted
    return "ranks"
