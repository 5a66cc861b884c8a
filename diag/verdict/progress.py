"""Log growth across samples: the job's own output, the strongest sign of progress.

Silence proves little (logs come in bursts, a model load is silent for minutes), but growth
does - unless the new lines are a heartbeat: one repeated template that talks about waiting
("still waiting for rank 3", NCCL watchdog timeouts). Those are written *because* the job is
stuck and must not read as progress.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Tuple

from diag.model import Bundle, LogSample

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(\.\d+)?")
_WAITING_WORDS = re.compile(
    r"wait|timeout|timed out|heartbeat|still|retry|retrying|watchdog|stuck|hang|no response",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LogGrowth:
    path: str
    pids: Tuple[int, ...]
    grew_bytes: int
    grew_lines: int
    samples: Tuple[int, ...]  # sample indices at which it had grown since the previous one
    intervals: int  # pairs of consecutive samples where the file was seen
    heartbeat: bool
    new_lines: Tuple[str, ...]
    # Every rank writing it (or every writer, when none is a rank) is dead by the last sample:
    # what it grew by is a dying process's last words (a CUDA error traceback), not progress.
    writers_dead: bool = False

    @property
    def grew(self) -> bool:
        return bool(self.samples)

    @property
    def progress(self) -> bool:
        return self.grew and not self.heartbeat and not self.writers_dead


def _template(line: str) -> str:
    return _NUMBERS.sub("#", line).strip()


def is_heartbeat(new_lines: Tuple[str, ...]) -> bool:
    """New lines that are one or two repeated templates about waiting: stuck, not progress."""
    lines = [line for line in new_lines if line.strip()]
    if not lines:
        return False
    templates = {_template(line) for line in lines}
    return len(templates) <= 2 and all(_WAITING_WORDS.search(t) for t in templates)


def _new_lines(first: LogSample, last: LogSample) -> Tuple[str, ...]:
    """Lines of the last tail that were not in the first one (best effort, tails are short)."""
    seen = set(first.tail)
    return tuple(line for line in last.tail if line not in seen)


def _writers_dead(bundle: Bundle, pids: Tuple[int, ...]) -> bool:
    last = {ps.pid: ps.status for ps in bundle.samples[-1].processes} if bundle.samples else {}
    ranked = {p.pid for p in bundle.processes if p.rank is not None}
    writers = [p for p in pids if p in ranked] or list(pids)
    return bool(writers) and all(last.get(p) in ("zombie", "exited") for p in writers)


def log_growth(bundle: Bundle) -> List[LogGrowth]:
    series: Dict[str, List[Tuple[int, LogSample]]] = {}
    for sample in bundle.samples:
        for log in sample.logs:
            series.setdefault(log.path, []).append((sample.index, log))
    out: List[LogGrowth] = []
    for path, seq in series.items():
        present = [(i, log) for i, log in seq if log.exists]
        grew_at: List[int] = []
        grew_bytes = grew_lines = 0
        for (_, a), (i_b, b) in zip(present, present[1:]):
            rotated = (b.inode != a.inode and a.inode != 0) or b.size_bytes < a.size_bytes
            if rotated:
                grew_at.append(i_b)
                grew_bytes += b.size_bytes
                grew_lines += b.lines
            elif b.size_bytes > a.size_bytes:
                grew_at.append(i_b)
                grew_bytes += b.size_bytes - a.size_bytes
                grew_lines += max(0, b.lines - a.lines)
        new = _new_lines(present[0][1], present[-1][1]) if len(present) > 1 and grew_at else ()
        pids = tuple(sorted({p for _, log in seq for p in log.pids}))
        out.append(
            LogGrowth(
                path=path,
                pids=pids,
                grew_bytes=grew_bytes,
                grew_lines=grew_lines,
                samples=tuple(grew_at),
                intervals=max(0, len(present) - 1),
                heartbeat=is_heartbeat(new),
                new_lines=new,
                writers_dead=_writers_dead(bundle, pids),
            )
        )
    return out
