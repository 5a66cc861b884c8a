"""Process discovery every sample without reading every /proc/PID/stat of the host.

``proctree.walk_tree`` reads the stat of every process on the host to build the ppid map: on a
busy node (5,000 PIDs) that is ~70-100 ms per sample, nearly all of it on processes that have
nothing to do with the job. ``TreeDiscovery`` gives the same answer and does that full scan on
its first call and every ``full_every``-th call; in between it reads

- the stat of each process already in the tree (it is still there, still the same process by
  its start time, still under the same parent: anything else and it rescans at once - a
  process gone means its children were reparented);
- the stat of the PIDs handed out since the last call: on this machine's /proc,
  ``/proc/loadavg``'s last field is the last PID handed out (threads count too; a thread is
  told apart by its Tgid), so a quiet host costs nothing here; elsewhere, or when the PIDs
  wrapped or more than ``_MAX_RANGE`` were handed out, /proc is listed (one getdents) and
  compared with the last listing;
- ``/proc/PID/task/PID/children`` of each process of the tree (proc(5): the children of that
  one thread, and it may miss those of a thread that is running), which catches a child whose
  PID was recycled past a listing.

A process that reparents *into* the tree without being new (a subreaper adopting an orphan)
waits for the next full scan.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Set, Tuple

from diag.probes.procfs import ProcFS
from diag.probes.proctree import Tree, walk_tree
from diag.probes.threads import parse_parent

FULL_EVERY = 10
_MAX_RANGE = 2048  # more PIDs handed out since the last call than this: list /proc instead


class TreeDiscovery:
    """``walk_tree(root_pid, procfs, known)`` for every sample of a capture, cheaply."""

    def __init__(self, root_pid: int, procfs: ProcFS, full_every: int = FULL_EVERY) -> None:
        self.root_pid = root_pid
        self.procfs = procfs
        self.full_every = max(1, full_every)
        self.calls = 0
        self.full_scans = 0
        self._since_full = 0
        self._listed: Set[int] = set()
        self._starts: Dict[int, int] = {}  # the last answer: root first, then by pid
        self._reused: Dict[int, int] = {}
        self._last: Optional[int] = None

    def __call__(self, known: Optional[Mapping[int, int]] = None) -> Tree:
        known = known or {}
        self.calls += 1
        if not self._starts or self._since_full + 1 >= self.full_every:
            return self._full(known)
        tree = self._incremental(known)
        if tree is None:
            return self._full(known)
        self._since_full += 1
        return tree

    def _listing(self) -> Set[int]:
        try:
            return {int(n) for n in os.listdir(self.procfs.root) if n.isdigit()}
        except OSError:
            return set()

    def _parent(self, pid: int) -> Optional[Tuple[int, int]]:
        try:
            return parse_parent(self.procfs.read_text(pid, "stat"))
        except (OSError, ValueError, IndexError):
            return None  # exited between the listing and the read

    def _full(self, known: Mapping[int, int]) -> Tree:
        self.full_scans += 1
        self._since_full = 0
        self._last = self._last_pid()  # before the listing: nothing started between is lost
        listed = self._listing()
        tree = walk_tree(self.root_pid, self.procfs, known)
        self._starts = dict(tree.starts)
        self._reused = dict(tree.reused)
        self._listed = listed | set(tree.starts) | set(tree.reused)
        return tree

    def _incremental(self, known: Mapping[int, int]) -> Optional[Tree]:
        """The tree from what changed, or None when only a full scan can tell."""
        root_start = self._starts.get(self.root_pid)
        if root_start is None or known.get(self.root_pid, root_start) != root_start:
            return None
        members: Dict[int, int] = {}
        for pid, start in self._starts.items():
            parent = self._parent(pid)
            if parent is None or parent[1] != start:
                return None  # gone (its children reparented) or its PID reused: rescan
            if pid != self.root_pid and parent[0] not in self._starts:
                return None  # reparented: the tree's shape changed
            members[pid] = start
        candidates: Dict[int, Tuple[int, int]] = {}
        fresh, threads_too = self._new_pids()
        for pid in fresh:
            parent = self._parent(pid)
            if parent is not None:
                candidates[pid] = parent
        for pid in list(members):
            for child in self._children(pid):
                if child not in members and child not in candidates:
                    parent = self._parent(child)
                    if parent is not None:
                        candidates[child] = parent
        for pid in list(self._reused):  # still a newcomer, or now known as itself?
            parent = self._parent(pid)
            if parent is not None and parent[1] == self._reused[pid]:
                candidates[pid] = parent
        reused: Dict[int, int] = {}
        added = True
        while added and candidates:  # a new child of a new child joins in a later round
            added = False
            for pid, (ppid, start) in list(candidates.items()):
                if ppid not in members or pid == self.root_pid or start < root_start:
                    continue
                del candidates[pid]
                if threads_too and pid in fresh and not self._is_process(pid):
                    continue  # a new thread: its stat names its process's parent
                if known.get(pid, start) != start:
                    reused[pid] = start
                    continue
                members[pid] = start
                added = True
        starts = {self.root_pid: root_start}
        starts.update(sorted((p, s) for p, s in members.items() if p != self.root_pid))
        self._starts = starts
        self._reused = reused
        return Tree(starts, reused)

    def _last_pid(self) -> Optional[int]:
        """The PID the kernel handed out last (/proc/loadavg's last field): threads count too."""
        if not self.procfs.live:
            return None  # a recorded tree: its loadavg does not follow its processes
        text = self.procfs.read_global("loadavg")
        try:
            return int(text.split()[-1]) if text else None
        except ValueError:
            return None

    def _new_pids(self) -> Tuple[Set[int], bool]:
        """PIDs that may be processes started since the last call, and whether threads may be
        among them. On this machine's /proc the kernel's last handed-out PID bounds them: only
        the PIDs handed out since are looked at (each a process or a thread), and none when no
        PID was handed out. Otherwise, or when the PIDs wrapped or too many were handed out,
        /proc is listed (processes only) and compared with the last listing."""
        last = self._last_pid()
        prev, self._last = self._last, last
        if last is not None and prev is not None and prev <= last <= prev + _MAX_RANGE:
            return set(range(prev + 1, last + 1)), True
        listed = self._listing()
        out = listed - self._listed
        self._listed = listed
        return out, False

    def _is_process(self, pid: int) -> bool:
        text = self.procfs.try_read_text(pid, "status") or ""
        at = text.find("\nTgid:")
        return at >= 0 and text[at + 6 :].split(None, 1)[0] == str(pid)

    def _children(self, pid: int) -> List[int]:
        try:
            text = self.procfs.read_text(pid, "task", str(pid), "children")
        except OSError:
            return []
        return [int(n) for n in text.split() if n.isdigit()]
