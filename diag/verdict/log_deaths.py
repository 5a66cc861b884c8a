"""Who a log line says died: the rank and, where the log shows it, the PID.

A worker killed and reaped before diag looked leaves no process to see - only its peers'
log lines ("Worker proc VllmWorker-1 died unexpectedly", torchrun's "failed (exitcode: -9)
local_rank: 1 (pid: 4242)", Ray's "RayWorkerProc rank=1 died unexpectedly"). Those name the
dead rank, so the verdict can too. The line's own prefix names the *reporter*, not the dead
("(EngineCore pid=23819) ERROR ...": the engine saw the worker die), so it is cut off first.
A PID comes from the line itself, from an earlier line the dead process wrote under its own
prefix ("(Worker_TP1 pid=24119) INFO ..."), or from a dead process of the bundle that is the
one rank-less sibling of the live ranks (a zombie has no cmdline to read its rank from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.verdict.features import ProcSignals
from diag.verdict.progress import LogGrowth

# "(EngineCore pid=23819) ", "[rank0]: ", "2026-12-01 10:00:00 ERROR " - who speaks.
_REPORTER = re.compile(r"^\s*(?:\([^)]{0,60}\bpid=\d+\)\s*|\[rank\d+\]:\s*)")
_SPEAKER = re.compile(r"\((\w{0,40}?)_?TP(\d+)\w* pid=(\d+)\)|\[rank(\d+)\]:.*?\bpid[=: ]+(\d+)")
# Each pack's spellings of a dead process's rank ("VllmWorker-1", "scheduler_1", "rank 3"),
# a framework's own before the generic ones.
_RANK_OF_DEAD = union.DEATH_RANK_PATTERNS
_PID_OF_DEAD = re.compile(r"\bpid\s*[:=]?\s*(\d+)", re.IGNORECASE)
MAX_LINES = 4096  # log lines looked through for a speaker prefix (tails and heads are short)


@dataclass(frozen=True)
class LogDeath:
    """One line saying a process died, and whom it names."""

    path: str
    line: str
    rank: Optional[int] = None
    pid: Optional[int] = None


def _subject(line: str) -> Tuple[Optional[int], Optional[int]]:
    body = _REPORTER.sub("", line, count=1)
    rank = next((int(m.group(1)) for rx in _RANK_OF_DEAD if (m := rx.search(body))), None)
    pid_m = _PID_OF_DEAD.search(body)
    return rank, int(pid_m.group(1)) if pid_m else None


def _speakers(lines: Iterable[str]) -> Dict[int, int]:
    """{rank: pid} from lines a rank wrote under its own prefix."""
    out: Dict[int, int] = {}
    for n, line in enumerate(lines):
        if n >= MAX_LINES:
            break
        m = _SPEAKER.search(line)
        if m and m.group(2):
            out.setdefault(int(m.group(2)), int(m.group(3)))
        elif m and m.group(4):
            out.setdefault(int(m.group(4)), int(m.group(5)))
    return out


def _orphan_dead(procs: Sequence[ProcSignals], rank: int) -> Optional[int]:
    """The one dead process without a rank whose parent also parents a live rank (a TP
    worker's zombie beside its live peer) - when the log's rank is no live rank's."""
    if any(p.rank == rank and not p.dead for p in procs):
        return None
    parents = {p.info.ppid for p in procs if p.rank is not None and p.info.ppid is not None}
    named = [p for p in procs if p.dead and p.rank == rank]
    if len(named) == 1:
        return named[0].pid
    found = [p for p in procs if p.dead and p.rank is None and p.info.ppid in parents]
    return found[0].pid if len(found) == 1 else None


def log_deaths(
    logs: Sequence[LogGrowth], procs: Sequence[ProcSignals], seen_lines: Sequence[str] = ()
) -> List[LogDeath]:
    """Every death line of the logs' last tails, oldest first, with the rank and PID each
    names. ``seen_lines``: other lines of the capture (heads, earlier tails) to look for the
    dead rank's own prefix in."""
    speakers = _speakers([*seen_lines, *(line for lg in logs for line in lg.tail)])
    out: List[LogDeath] = []
    for lg in logs:
        for line in lg.deaths:
            rank, pid = _subject(line)
            if pid is None and rank is not None:
                pid = speakers.get(rank) or _orphan_dead(procs, rank)
            out.append(
                LogDeath(path=lg.path, line=" ".join(line.split())[:200], rank=rank, pid=pid)
            )
    return out
