"""Log growth across samples: the job's own output, the strongest sign of progress.

Silence proves little (logs come in bursts, a model load is silent for minutes), but growth
does - unless the new lines are a heartbeat: one repeated template that talks about waiting
("still waiting for rank 3", NCCL watchdog timeouts). Those are written *because* the job is
stuck and must not read as progress.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

from diag.model import Bundle, LogSample
from diag.text.death_lines import is_death_line

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
    tail: Tuple[str, ...] = ()  # the last tail seen, for the lines of a crash
    # Lines of any sample's tail that report a process of the job died (a worker, the
    # engine), oldest first: a worker killed before diag looked left only these. Every tail,
    # not the last: a server shutting down on the death writes more than a tail of
    # traceback after the line that says why.
    deaths: Tuple[str, ...] = ()

    @property
    def errors(self) -> Tuple[str, ...]:
        """The new lines of a crash (ERROR records, traceback lines, exceptions)."""
        return tuple(line for line in self.new_lines if is_error_line(line))

    @property
    def grew(self) -> bool:
        return bool(self.samples)

    @property
    def progress(self) -> bool:
        return self.grew and not self.heartbeat and not self.writers_dead


def _template(line: str) -> str:
    return _NUMBERS.sub("#", line).strip()


def is_heartbeat(new_lines: Tuple[str, ...]) -> bool:
    """New lines that say nothing happened: stuck or idle, not progress.

    Two shapes are written on a timer whatever the job does: one or two repeated templates
    about waiting ("still waiting for rank 3"), and a periodic stats line whose counters are
    all zero (vLLM's "Avg prompt throughput: 0.0 tokens/s ... Running: 0 reqs"). A crash's
    last words (ERROR lines, a traceback) are the cause of a hang, never progress. Identical
    lines alone are not a heartbeat: an access log repeats "GET / 200" for real requests.
    """
    lines = [line for line in new_lines if line.strip()]
    if not lines:
        return False
    if any(_is_stats(line) and not is_idle_stats(line) for line in lines):
        return False  # a stats line with a counter above zero: work is being reported
    templates = {_template(line) for line in lines}
    if len(templates) <= 2 and all(_WAITING_WORDS.search(t) for t in templates):
        return True
    return all(is_idle_stats(line) or is_error_line(line) for line in lines)


_STATS_WORDS = re.compile(
    r"throughput|running|waiting|pending|queue|reqs?\b|tokens/s|batch|usage|hit rate|swapped",
    re.IGNORECASE,
)
_KEYED_NUMBER = re.compile(r"[:=]\s*(-?\d+(?:\.\d+)?)")


def _is_stats(line: str) -> bool:
    return bool(_STATS_WORDS.search(line)) and len(_KEYED_NUMBER.findall(_strip_time(line))) >= 2


def is_idle_stats(line: str) -> bool:
    """A periodic stats line whose every keyed counter is zero: the job reports it is idle."""
    if not _is_stats(line):
        return False
    return all(float(v) == 0 for v in _KEYED_NUMBER.findall(_strip_time(line)))


_ERROR_LINE = re.compile(
    r"\b(?:ERROR|CRITICAL|FATAL)\b|Traceback \(most recent call last\)|\w*(?:Error|Exception)\b:?"
    r"|died unexpectedly|Segmentation fault|core dumped|^\s+File \".*\", line \d+|^\s*\^+\s*$"
)


def is_error_line(line: str) -> bool:
    """A line of a crash: an ERROR/CRITICAL record, a traceback frame, an exception."""
    return bool(_ERROR_LINE.search(line))


_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}|\d{2}-\d{2}(?=\s)|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?|"
    r"\[[\w./-]+:\d+\]|pid=\d+"
)


def _strip_time(line: str) -> str:
    return _TIME.sub("", line)


def _new_lines(first: LogSample, last: LogSample) -> Tuple[str, ...]:
    """Lines of the last tail that were not in the first one (best effort, tails are short)."""
    seen = set(first.tail)
    return tuple(line for line in last.tail if line not in seen)


def _writers_dead(bundle: Bundle, pids: Tuple[int, ...]) -> bool:
    last = {ps.pid: ps.status for ps in bundle.samples[-1].processes} if bundle.samples else {}
    ranked = {p.pid for p in bundle.processes if p.rank is not None}
    writers = [p for p in pids if p in ranked] or list(pids)
    return bool(writers) and all(last.get(p) in ("zombie", "exited") for p in writers)


MAX_DEATH_LINES = 32  # distinct death lines kept per log (a crash loop repeats them)


def _death_lines(logs: Iterable[LogSample]) -> Tuple[str, ...]:
    """The distinct lines that say a process died, oldest first: those the probe caught in
    the bytes written between samples, and those of each tail (tails of consecutive samples
    overlap, so one line is seen many times)."""
    seen: Dict[str, None] = {}
    for log in logs:
        for line in (*log.deaths, *log.tail):
            if line not in seen and is_death_line(line):
                seen[line] = None
                if len(seen) >= MAX_DEATH_LINES:
                    return tuple(seen)
    return tuple(seen)


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
                tail=present[-1][1].tail if present else (),
                deaths=_death_lines(log for _, log in present),
            )
        )
    return out
