"""Which processes make up the job, and which rank each one is.

Discovery: the root PID and all its descendants (a walk of the ppid map), re-run every
sample so ranks spawned late appear and exited ones are noticed. Zombies stay in the tree
(their presence is the evidence: "rank 3 exited, its peers wait").

Rank detection: first what a process says about itself (``diag.probes.rank_sources``:
environment, argv, process title, first match wins); otherwise only a role from the tree
position, except that a zombie child whose environ is gone takes the one rank its siblings'
WORLD_SIZE is missing (``inferred:missing-rank``), and siblings spawned/forked as a group
(torch.multiprocessing.spawn, a loop of multiprocessing.Process) take ranks in start order
(``inferred:start-order``) unless their stacks show a worker pool (see
``start_order_groups``); a sibling running a server loop of the job's own (a multiprocessing
manager, ``union.SERVER_FRAMES``) serves the others and is left out of the group.

Roles: ``rank`` (holds a rank), ``helper`` (a descendant of a rank that inherited the same rank
from the same source, e.g. a forked DataLoader worker), ``launcher`` (has ranked descendants,
or is the root with children), ``worker`` (an unranked child), ``process`` (a lone root).
Parsers and the rank/role rules are pure; ``read_identity`` and ``descendants`` are the I/O.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from diag.frameworks import union
from diag.probes.env import MAX_ENVIRON_BYTES
from diag.probes.procfs import ProcFS
from diag.probes.rank_sources import RankInfo, detect_rank, title_of
from diag.probes.threads import TaskStat, parse_parent, parse_task_stat
from diag.vocab import Role

# One process's own rank (env, argv, title) is re-exported: callers know it as part of this probe.
__all__ = [
    "POOL_WORKER_FILES",
    "Identity",
    "RankInfo",
    "Tree",
    "assign_roles",
    "descendants",
    "detect_rank",
    "infer_dead_rank",
    "local_rank_families",
    "parse_cmdline",
    "read_identity",
    "start_order_groups",
    "title_of",
    "walk_tree",
]


class Identity(NamedTuple):
    """What /proc says about a process once: the raw material of a ProcessInfo."""

    pid: int
    stat: TaskStat
    exe: Optional[str]
    cmdline: Tuple[str, ...]
    environ: Optional[bytes]  # None when unreadable (zombie, another user's process)
    uid: Optional[int] = None  # the owner of /proc/PID (its real uid); whose files it writes


def assign_roles(
    root_pid: int, parents: Mapping[int, Optional[int]], ranks: Mapping[int, RankInfo]
) -> Dict[int, Role]:
    """Role of every pid in ``parents`` (pid -> ppid) from its rank and tree position."""

    def ancestors(pid: int) -> List[int]:
        out: List[int] = []
        seen = {pid}
        parent = parents.get(pid)
        while parent is not None and parent in parents and parent not in seen:
            out.append(parent)
            seen.add(parent)
            parent = parents.get(parent)
        return out

    ranked = {pid for pid, info in ranks.items() if info.rank is not None}
    has_ranked_descendant = {a for pid in ranked for a in ancestors(pid)}
    has_children = {ppid for ppid in parents.values() if ppid is not None}
    roles: Dict[int, Role] = {}
    for pid in parents:
        info = ranks.get(pid, RankInfo())
        ranked_up = [a for a in ancestors(pid) if a in ranked]
        if info.rank is not None:
            nearest = ranks[ranked_up[0]] if ranked_up else None
            inherited = (
                nearest is not None and nearest.rank == info.rank and nearest.source == info.source
            )
            roles[pid] = "helper" if inherited else "rank"
        elif pid in has_ranked_descendant or (pid == root_pid and pid in has_children):
            roles[pid] = "launcher"
        elif ranked_up:
            roles[pid] = "helper"
        elif pid != root_pid:
            roles[pid] = "worker"
        else:
            roles[pid] = "process"
    return roles


def infer_dead_rank(
    parents: Mapping[int, Optional[int]], ranks: Mapping[int, RankInfo], zombies: Set[int]
) -> Dict[int, RankInfo]:
    """A zombie's environ is gone, so a rank that died before diag looked has no rank. When
    its ranked siblings share one WORLD_SIZE and exactly one rank of it is missing, and exactly
    one unranked zombie sibling exists, that zombie is the missing rank (``inferred:...``)."""
    children: Dict[int, List[int]] = {}
    for pid, ppid in parents.items():
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out: Dict[int, RankInfo] = {}
    for kids in children.values():
        ranked = [ranks[k] for k in kids if k in ranks and ranks[k].rank is not None]
        worlds = {r.world_size for r in ranked}
        dead = [k for k in kids if k in zombies and ranks.get(k, RankInfo()).rank is None]
        if not ranked or len(worlds) != 1 or len(dead) != 1:
            continue
        world = worlds.pop()
        if world is None:
            continue
        missing = set(range(world)) - {r.rank for r in ranked}
        if len(missing) == 1:
            out[dead[0]] = RankInfo(missing.pop(), None, world, "inferred:missing-rank")
    return out


_FAMILY_CHILD = "env:NODE_RANK+LOCAL_RANK"
_FAMILY_PARENT = "inferred:launcher-is-local-rank-0"


def _same_command(a: Sequence[str], b: Sequence[str]) -> bool:
    """The same script and arguments: a launcher re-runs ``python train.py`` as
    ``/venv/bin/python3 /abs/train.py``, so the interpreter is not compared and paths are
    compared by their last part."""

    def norm(argv: Sequence[str]) -> List[str]:
        return [arg.rsplit("/", 1)[-1] for arg in argv[1:]]

    return len(a) == len(b) and len(a) > 1 and norm(a) == norm(b)


def local_rank_families(
    parents: Mapping[int, Optional[int]],
    ranks: Mapping[int, RankInfo],
    cmdlines: Mapping[int, Tuple[str, ...]],
) -> Dict[int, RankInfo]:
    """Global ranks for children that carry only a local rank (and a node rank).

    Lightning's subprocess launcher re-runs the user's command for local ranks 1..N-1 with
    ``LOCAL_RANK``, ``NODE_RANK`` and ``WORLD_SIZE`` only, and its own process is local rank 0
    (it sets its own ``LOCAL_RANK`` with ``os.environ``, where /proc cannot see it). Left to
    start order, local rank 1 became "rank 0" and the real rank 0 a launcher. Here: a child's
    rank is ``node_rank * per_node + local_rank``; when no child holds local rank 0 and the
    parent runs the children's own argv, the parent is local rank 0. ``per_node`` is what the
    family shows (highest local rank + 1, the parent counted). Ranked ancestors (a forked
    DataLoader worker inherits its rank's env) are left to the role rules.
    """
    by_parent: Dict[int, List[int]] = {}
    for pid, ppid in parents.items():
        info = ranks.get(pid)
        if ppid is None or info is None or info.local_rank is None:
            continue
        if info.rank is None or info.source == _FAMILY_CHILD:  # again as later kids appear
            by_parent.setdefault(ppid, []).append(pid)
    out: Dict[int, RankInfo] = {}
    for ppid, kids in by_parent.items():
        parent = ranks.get(ppid, RankInfo())
        if parent.rank is not None and parent.source != _FAMILY_PARENT:
            continue
        locals_ = {k: ranks[k].local_rank or 0 for k in kids}
        if parent.local_rank is not None or len(set(locals_.values())) != len(kids):
            continue  # an inherited LOCAL_RANK (pool workers of one process): not a family
        nodes = {ranks[k].node_rank for k in kids}
        node = nodes.pop() if len(nodes) == 1 else None
        if node is None and len(nodes) > 0:
            continue  # children that disagree on their node: not one family
        parent_is_zero = (
            0 not in locals_.values()
            and bool(cmdlines.get(ppid))
            and all(_same_command(cmdlines.get(k, ()), cmdlines.get(ppid, ())) for k in kids)
        )
        per_node = max(max(locals_.values()) + 1, len(kids) + int(parent_is_zero))
        base = (node or 0) * per_node
        for kid, local in locals_.items():
            info = ranks[kid]
            out[kid] = info._replace(rank=base + local, source=_FAMILY_CHILD)
        if parent_is_zero:
            world = next((ranks[k].world_size for k in kids if ranks[k].world_size), None)
            out[ppid] = RankInfo(base, 0, world, _FAMILY_PARENT, node)
    return out


# Frames of worker pools whose members are not ranks (DataLoader, multiprocessing.Pool, a
# ProcessPoolExecutor): a group of forked siblings running one of these is left unranked.
POOL_WORKER_FILES: Tuple[str, ...] = union.POOL_WORKER_FILES  # the packs' pool_worker_files
_SPAWN_MAIN = "multiprocessing.spawn import spawn_main"


def start_order_groups(
    parents: Mapping[int, Optional[int]],
    ranks: Mapping[int, RankInfo],
    cmdlines: Mapping[int, Tuple[str, ...]],
    start_ticks: Mapping[int, int],
    zombies: Set[int],
) -> List[List[int]]:
    """Groups of unranked siblings started as one job, oldest first: rank candidates.

    ``torch.multiprocessing.spawn`` and the tutorial loop ``Process(target=run, args=(rank,
    ...)).start()`` start ranks in rank order and set RANK (if at all) with ``os.environ``
    after exec, where /proc cannot see it. Siblings that were spawned (``spawn_main``) or
    forked (argv identical to the parent's) by a parent outside any ranked subtree, none of
    them ranked, at least two, form a group; zombie siblings (argv gone) belong to it too, so a
    dead rank keeps its place. The caller still rejects pools (``POOL_WORKER_FILES``)."""
    ranked = {pid for pid, info in ranks.items() if info.rank is not None}

    def under_rank(pid: int) -> bool:
        seen: Set[int] = set()
        while pid in parents and pid not in seen:
            if pid in ranked:
                return True
            seen.add(pid)
            parent = parents[pid]
            if parent is None:
                return False
            pid = parent
        return False

    by_parent: Dict[int, List[int]] = {}
    for pid, ppid in parents.items():
        if ppid is not None:
            by_parent.setdefault(ppid, []).append(pid)
    groups: List[List[int]] = []
    for ppid, kids in by_parent.items():
        if under_rank(ppid) or any(k in ranked for k in kids):
            continue
        parent_argv = cmdlines.get(ppid, ())
        members = [
            k
            for k in kids
            if k in zombies
            or _SPAWN_MAIN in " ".join(cmdlines.get(k, ()))
            or (parent_argv and cmdlines.get(k) == parent_argv)
        ]
        if len(members) - len([k for k in members if k in zombies]) >= 2:
            groups.append(sorted(members, key=lambda k: (start_ticks.get(k, 0), k)))
    return groups


def parse_cmdline(raw: bytes) -> Tuple[str, ...]:
    """NUL-separated argv; setproctitle's single padded title comes back as one element."""
    parts = raw.decode("utf-8", "replace").split("\0")
    while parts and not parts[-1].strip():
        parts.pop()
    if len(parts) == 1:
        return (parts[0].strip(),)
    return tuple(parts)


class Tree(NamedTuple):
    """The processes of a job now: who they are is (pid, start ticks), not the PID alone."""

    starts: Dict[int, int]  # pid -> start ticks (stat field 22): the root first, then by pid
    # pid -> start ticks of a process that took the PID of one in ``known`` (which exited): a
    # descendant of the root, left out with its own descendants, so nothing it does is filed
    # under the process whose PID it reused.
    reused: Dict[int, int]

    @property
    def pids(self) -> List[int]:
        return list(self.starts)


def descendants(root_pid: int, procfs: ProcFS) -> List[int]:
    """Root and every descendant (zombies included); [] when the root is gone."""
    return walk_tree(root_pid, procfs).pids


def walk_tree(root_pid: int, procfs: ProcFS, known: Optional[Mapping[int, int]] = None) -> Tree:
    """Root and every descendant (zombies included), with their start ticks; empty when the
    root is gone.

    Walks the ppid map read through ``procfs`` (one stat per process, as ``ps`` does), so an
    injected /proc root is honoured. A child that started before the root cannot be its
    child: its PID was reused, and it is left out. ``known`` (pid -> start ticks of the
    processes seen so far): a PID whose start differs names a new process - a root's means the
    root is gone; any other's goes to ``reused`` and is not walked.
    """
    known = known or {}
    try:
        root_start_ticks = parse_task_stat(procfs.read_text(root_pid, "stat")).start_ticks
    except (OSError, ValueError, IndexError):
        return Tree({}, {})
    if known.get(root_pid, root_start_ticks) != root_start_ticks:
        return Tree({}, {})
    children: Dict[int, List[Tuple[int, int]]] = {}
    for pid in procfs.pids():
        try:
            ppid, start_ticks = parse_parent(procfs.read_text(pid, "stat"))
        except (OSError, ValueError, IndexError):
            continue  # exited between the listing and the read
        children.setdefault(ppid, []).append((pid, start_ticks))
    found: Dict[int, int] = {}
    reused: Dict[int, int] = {}
    stack = [root_pid]
    while stack:
        for child, start_ticks in children.get(stack.pop(), ()):
            if child == root_pid or child in found or start_ticks < root_start_ticks:
                continue
            if known.get(child, start_ticks) != start_ticks:
                reused[child] = start_ticks
                continue
            found[child] = start_ticks
            stack.append(child)
    starts = {root_pid: root_start_ticks}
    starts.update(sorted(found.items()))
    return Tree(starts, reused)


def read_identity(procfs: ProcFS, pid: int) -> Identity:
    """Raises OSError when the process is gone; unreadable parts become None."""
    stat = parse_task_stat(procfs.read_text(pid, "stat"))
    try:
        cmdline = parse_cmdline(procfs.read_bytes(pid, "cmdline"))
    except OSError:
        cmdline = ()
    try:
        environ: Optional[bytes] = procfs.read_bytes_capped(pid, "environ", MAX_ENVIRON_BYTES)
    except OSError:
        environ = None
    try:
        uid: Optional[int] = procfs.path(pid).stat().st_uid
    except OSError:
        uid = None
    return Identity(pid, stat, procfs.readlink(pid, "exe"), cmdline, environ, uid)
