"""One pass over a bundle that every view section shares: who the processes are, in what order.

A bundle stores samples in time order with processes nested inside; every report section wants
the transpose (per process, its samples) plus a stable order (ranks by number, then helpers)
and one anchor and label per process. Building that once keeps each section simple and the
whole render linear in the bundle size.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from diag.model import Bundle, ProcessInfo, ProcessSample, Stack, Verdict
from diag.render.fmt import proc_badge
from diag.text.roles import framework_role, named

Key = Tuple[str, int]  # (host, pid)

# The report's "role" column for a process no framework title names: diag's role in the tree.
# ("worker", a launcher's child that is no rank, says too little to show.)
_TREE_ROLES = {"launcher": "launcher", "rank": "rank", "helper": "helper"}


class Proc:
    """A process of the job with its samples in time order (sample index, sample)."""

    __slots__ = ("anchor", "info", "key", "label", "role", "samples", "suspect_reason")

    def __init__(self, key: Key, info: ProcessInfo) -> None:
        self.key = key
        self.info = info
        self.samples: List[Tuple[int, ProcessSample]] = []
        self.suspect_reason: Optional[str] = None
        host, pid = key
        # Named as the verdict names it: by its framework title ("scheduler TP0", "detokenizer
        # (pid 2206)") where one is known, else by rank or by diag's role in the tree.
        framework = framework_role(info.cmdline, info.name)
        self.role = framework.role if framework else _TREE_ROLES.get(info.role, "")
        if info.rank is not None:
            self.anchor = f"rank-{info.rank}" + (f"-{_slug(host)}" if _dup_rank_host(host) else "")
            self.label = f"rank {info.rank}"
        else:
            self.anchor = f"pid-{_slug(host)}-{pid}" if host else f"pid-{pid}"
            self.label = f"{info.role} {pid}" if info.role != "process" else f"pid {pid}"
        if framework is not None:
            self.label = named(framework, info.rank, pid)

    @property
    def is_suspect(self) -> bool:
        return self.suspect_reason is not None

    @property
    def last(self) -> Optional[ProcessSample]:
        return self.samples[-1][1] if self.samples else None

    @property
    def badge(self) -> str:
        """ "stopped (T)", "zombie", "D: uninterruptible" in its last sample; "" otherwise."""
        last = self.last
        return proc_badge(last.status, last.state) if last is not None else ""


def _dup_rank_host(_host: str) -> bool:
    return False  # ranks are global in torchrun/SGLang; kept as a hook for per-node ranks


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


class BundleIndex:
    """Processes of a bundle in report order, their samples, and the verdict's suspects."""

    def __init__(self, bundle: Bundle, verdict: Optional[Verdict]) -> None:
        self.bundle = bundle
        self.verdict = verdict
        self.stacks: Dict[str, Stack] = dict(bundle.stacks)
        by_key: Dict[Key, Proc] = {}
        for info in bundle.processes:
            by_key[(info.host, info.pid)] = Proc((info.host, info.pid), info)
        for sample in bundle.samples:
            for ps in sample.processes:
                key = (ps.host, ps.pid)
                proc = by_key.get(key)
                if proc is None:  # sampled but never described (old or cut-short bundle)
                    proc = by_key[key] = Proc(key, ProcessInfo(pid=ps.pid, host=ps.host))
                proc.samples.append((sample.index, ps))
        if verdict is not None:
            for suspect in verdict.suspects:
                hit = by_key.get((suspect.host, suspect.pid))
                if hit is None:  # a verdict may name the pid without the host
                    hit = next((p for p in by_key.values() if p.key[1] == suspect.pid), None)
                if hit is not None:
                    hit.suspect_reason = suspect.reason or "named by the verdict"
        self.procs: List[Proc] = sorted(by_key.values(), key=_order)
        self.hosts: List[str] = sorted({p.key[0] for p in self.procs})
        self.by_key = by_key
        self.by_rank: Dict[int, Proc] = {
            p.info.rank: p for p in self.procs if p.info.rank is not None
        }
        times = [s.t_s for s in bundle.samples]
        self.t_first_s = min(times) if times else bundle.created_s
        self.t_last_s = max(times) if times else bundle.created_s

    def proc_for_pid(self, pid: int, host: str = "") -> Optional[Proc]:
        hit = self.by_key.get((host, pid))
        if hit is None:
            hit = next((p for p in self.procs if p.key[1] == pid), None)
        return hit


_ROLE_ORDER = {"launcher": 0, "server": 1, "rank": 2, "worker": 2}


def _order(proc: Proc) -> Tuple[int, int, int, int, str]:
    info = proc.info
    host, pid = proc.key
    if info.rank is not None:
        return (0, 0, info.rank, pid, host)
    return (1, _ROLE_ORDER.get(info.role, 3), 0, pid, host)
