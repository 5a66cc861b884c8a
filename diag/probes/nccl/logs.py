"""NCCL, torch-watchdog, CUDA and Xid lines in the ranks' logs, summarised per rank.

``nccl_lines.parse_line`` recognises one line; ``summarize`` groups the hits by rank (the rank
printed in the line, else the PID in NCCL's prefix, else the single process the log belongs
to) keeping counts, the last line and when it was seen.

The watchdog's sequence numbers name the waiters, not the culprit: the rank whose "last
enqueued" lags the others never reached the collective (see diag.verdict.collectives).

The thin reader at the bottom scans the log files the collector tracks (their whole recent
history, not just the tails in the samples) and falls back to the tails when a file is gone.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from diag.bundle.files import read_regular
from diag.model import LogSample, LogSignal, ProcessInfo, RankNcclLog, Sample
from diag.probes.nccl.lines import KINDS, LogHit, line_time, parse_line

# The line parser is re-exported: callers and tests know it as part of this probe.
__all__ = [
    "KINDS",
    "LogEntry",
    "LogHit",
    "collect",
    "entries_from_samples",
    "line_time",
    "parse_line",
    "read_file_lines",
    "summarize",
]

MAX_SCAN_BYTES = 64 * 1024 * 1024


class LogEntry(NamedTuple):
    """A line as read: from which file, when diag first saw it, which PIDs write that file."""

    path: str
    line: str
    seen_t_s: Optional[float] = None
    pids: Tuple[int, ...] = ()
    host: str = ""


_Key = Tuple[str, str, int]  # (host, "rank" | "pid" | "?", number)


def _attribute(
    hit: LogHit, entry: LogEntry, processes: Sequence[ProcessInfo]
) -> Tuple[_Key, Optional[ProcessInfo]]:
    host = entry.host
    mine = [p for p in processes if p.host == host] or list(processes)
    if hit.rank is not None:
        owner = next((p for p in mine if p.rank == hit.rank), None)
        return (host, "rank", hit.rank), owner
    if hit.local_rank is not None:
        owners = [p for p in mine if p.local_rank == hit.local_rank and p.rank is not None]
        if len(owners) == 1:
            return (host, "rank", owners[0].rank or 0), owners[0]
    pid = hit.pid
    if pid is None:
        # A log only one rank writes (a launcher may hold it open too): its lines are that
        # rank's. A file shared by several ranks needs the rank or PID in the line itself.
        writers = [p for p in mine if p.pid in entry.pids and p.rank is not None]
        if len(writers) == 1:
            pid = writers[0].pid
        elif len(entry.pids) == 1:
            pid = entry.pids[0]
    if pid is None:
        return (host, "?", 0), None
    owner = next((p for p in mine if p.pid == pid), None)
    if owner is not None and owner.rank is not None:
        return (host, "rank", owner.rank), owner
    return (host, "pid", pid), owner


def summarize(
    entries: Iterable[LogEntry], processes: Sequence[ProcessInfo] = ()
) -> Tuple[RankNcclLog, ...]:
    """Group interesting lines by rank: per kind a count, the last line and its time."""
    signals: Dict[_Key, Dict[str, LogSignal]] = {}
    owners: Dict[_Key, Optional[ProcessInfo]] = {}
    watchdog: Dict[_Key, Dict[str, Optional[object]]] = {}
    for entry in entries:
        hit = parse_line(entry.line)
        if hit is None:
            continue
        key, owner = _attribute(hit, entry, processes)
        if owners.get(key) is None:
            owners[key] = owner
        kinds = signals.setdefault(key, {})
        prev = kinds.get(hit.kind)
        t_s = hit.t_s if hit.t_s is not None else entry.seen_t_s
        kinds[hit.kind] = LogSignal(
            kind=hit.kind,
            count=(prev.count if prev else 0) + 1,
            last_line=hit.line,
            last_t_s=t_s if t_s is not None else (prev.last_t_s if prev else None),
            path=entry.path,
        )
        wd = watchdog.setdefault(key, {})
        if hit.seq is not None and hit.kind == "watchdog_timeout":
            wd["seq"], wd["op"] = hit.seq, hit.op or wd.get("op")
        if hit.last_enqueued is not None:
            wd["enq"], wd["compl"] = hit.last_enqueued, hit.last_completed
    out: List[RankNcclLog] = []
    for key in sorted(signals, key=lambda k: (k[0], k[1] != "rank", k[1], k[2])):
        host, what, number = key
        owner = owners.get(key)
        wd = watchdog.get(key, {})
        out.append(
            RankNcclLog(
                rank=number if what == "rank" else None,
                pid=owner.pid if owner is not None else (number if what == "pid" else None),
                host=host,
                signals=tuple(signals[key][k] for k in KINDS if k in signals[key]),
                timeout_seq=wd.get("seq"),  # type: ignore[arg-type]
                timeout_op=wd.get("op"),  # type: ignore[arg-type]
                last_enqueued_seq=wd.get("enq"),  # type: ignore[arg-type]
                last_completed_seq=wd.get("compl"),  # type: ignore[arg-type]
            )
        )
    return tuple(out)


def entries_from_samples(samples: Sequence[Sample]) -> List[LogEntry]:
    """New lines per sample from the recorded tails, counted once (by the file's line count)."""
    out: List[LogEntry] = []
    last: Dict[Tuple[str, str], LogSample] = {}
    for sample in samples:
        for log in sample.logs:
            key = (log.host, log.path)
            prev = last.get(key)
            last[key] = log
            tail = list(log.tail)
            if prev is None or log.inode != prev.inode or log.lines < prev.lines:
                new = tail
            else:
                grown = log.lines - prev.lines
                if grown <= 0:
                    new = []
                elif grown < len(tail):
                    new = tail[-grown:]
                else:
                    new = tail
            out.extend(LogEntry(log.path, line, sample.t_s, log.pids, log.host) for line in new)
    return out


_KEYWORDS = ("NCCL", "CUDA", "Cuda", "cuda", "Xid", "atchdog", "eartbeat", "ECC", "STATUS_")


def read_file_lines(path: str, max_bytes: int = MAX_SCAN_BYTES) -> List[str]:
    """The interesting lines of (the last ``max_bytes`` of) one log file; OSError if unreadable
    (``NotRegularFile`` for a FIFO, device, directory or symlink: never read, never blocks)."""
    data, truncated = read_regular(path, max_bytes, tail=True)
    if truncated:
        data = data.partition(b"\n")[2]  # drop the partial first line
    lines = data.decode("utf-8", "replace").splitlines()
    return [line for line in lines if any(k in line for k in _KEYWORDS)]


def collect(
    samples: Sequence[Sample],
    processes: Sequence[ProcessInfo],
    scrub: Callable[[str], str],
    host: str = "",
) -> Tuple[RankNcclLog, ...]:
    """Summarise the NCCL evidence of every log the capture tracked (this host's files)."""
    tail_entries = entries_from_samples(samples)
    first_seen: Dict[Tuple[str, str], float] = {}
    for e in tail_entries:
        if e.seen_t_s is not None:
            first_seen.setdefault((e.path, e.line), e.seen_t_s)
    entries: List[LogEntry] = []
    # Every PID ever seen writing a file: a rank that died no longer holds its log open.
    writers: Dict[str, Tuple[int, ...]] = {}
    for sample in samples:
        for log in sample.logs:
            if log.host == host:
                writers[log.path] = tuple(sorted({*writers.get(log.path, ()), *log.pids}))
    for path, pids in writers.items():
        try:
            lines = read_file_lines(path)
        except OSError:
            entries.extend(e._replace(pids=pids) for e in tail_entries if e.path == path)
            continue
        for raw in lines:
            line = scrub(raw)
            entries.append(LogEntry(path, line, first_seen.get((path, line)), pids, host))
    return summarize(entries, processes)
