"""NCCL, torch-watchdog, CUDA and Xid lines in the ranks' logs, summarised per rank.

The lines that explain a hung collective are few and buried in megabytes of output: NCCL's
``host:pid:tid [dev] NCCL WARN ...``, torch's ``Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=N, OpType=ALLREDUCE, ...)`` and ``last enqueued NCCL work: A, last completed
NCCL work: B``, a ``CUDA error: an illegal memory access`` on the rank that then died, a kernel
``NVRM: Xid`` line. ``parse_line`` is pure (recorded text in, ``LogHit`` out);
``summarize`` groups hits by rank (the rank printed in the line, else the PID in NCCL's prefix,
else the single process the log belongs to) keeping counts, the last line and when it was seen.

The watchdog's sequence numbers name the waiters, not the culprit: the rank whose "last
enqueued" lags the others never reached the collective (see diag.collectives).

The thin reader at the bottom scans the log files the collector tracks (their whole recent
history, not just the tails in the samples) and falls back to the tails when a file is gone.
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from diag.model import LogSample, LogSignal, ProcessInfo, RankNcclLog, Sample

MAX_LINE_CHARS = 400
MAX_SCAN_BYTES = 64 * 1024 * 1024
# Seq numbers above this are uninitialised memory printed by old torch builds, not real work.
_MAX_SANE_SEQ = 1 << 40

# Most specific first: a "NCCL WARN Cuda failure" line is a CUDA error, not just a warning.
KINDS: Tuple[str, ...] = (
    "watchdog_timeout",
    "watchdog_hang",
    "xid",
    "cuda_error",
    "nccl_error",
    "nccl_warn",
    "nccl_info",
)

_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout|Timeout at NCCL work|"
    r"collective timeout|detected by watchdog at work|timed out in (?:the )?watchdog",
    re.IGNORECASE,
)
_WATCHDOG_HANG = re.compile(
    r"Heartbeat monitor timed out|watchdog got stuck|watchdog thread .*(?:hang|stuck)",
    re.IGNORECASE,
)
_WORK = re.compile(r"Work\w*\(SeqNum=(?P<seq>\d+),\s*OpType=(?P<op>[A-Za-z_]+)")
_ENQ_COMPL = re.compile(
    r"last enqueued (?:NCCL )?work:\s*(?P<enq>-?\d+),\s*last completed (?:NCCL )?work:\s*"
    r"(?P<compl>-?\d+)",
    re.IGNORECASE,
)
_TIMEOUT_AT = re.compile(r"(?:Timeout|detected by watchdog) at (?:NCCL )?work:\s*(\d+)")
_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\):\s*(?P<xid>\d+)(?:,\s*pid=(?P<pid>\d+))?")
_CUDA = re.compile(
    r"CUDA error|Cuda failure|cudaError\w+|illegal memory access|device-side assert|"
    r"unhandled cuda error|CUDA out of memory|uncorrectable ECC|CUBLAS_STATUS_\w+|"
    r"CUDNN_STATUS_\w+|CUDA driver error",
    re.IGNORECASE,
)
_NCCL_ERROR = re.compile(
    r"NCCL error|DistBackendError|nccl(?:Remote|System|Internal|InvalidUsage)Error|"
    r"NCCL communicator was aborted|remote process exited or there was a network error|"
    r"unhandled system error",
)
_NCCL_PREFIX = re.compile(
    r"(?P<host>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\](?: [^\n]*?)? NCCL "
    r"(?P<level>INFO|WARN|TRACE|CALL)\b"
)
_RANK_PATTERNS = (
    re.compile(r"^\s*(?:\[default\d+\]:)?\[rank(\d+)\]:"),
    re.compile(r"\[PG (?:ID )?\d+ (?:PG GUID \S+ )?Rank (\d+)\]"),
    re.compile(r"\[Rank (\d+)\]"),
)
_LOCAL_RANK = re.compile(r"^\s*\[default(\d+)\]:")
_TS_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_TS_GLOG = re.compile(r"\[[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?")


class LogHit(NamedTuple):
    """One interesting line: its kind, whom it names and what sequence numbers it carries."""

    kind: str
    line: str
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    pid: Optional[int] = None
    t_s: Optional[float] = None
    seq: Optional[int] = None
    op: Optional[str] = None
    last_enqueued: Optional[int] = None
    last_completed: Optional[int] = None


def _sane(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    number = int(value)
    return number if -1 <= number < _MAX_SANE_SEQ else None


def _epoch(parts: Sequence[Optional[str]], year: int) -> Optional[float]:
    """Local wall-clock fields → epoch seconds (logs print local time without a zone)."""
    y, mo, d, h, mi, s, frac = parts
    try:
        whole = time.mktime((int(y or year), int(mo or 1), int(d or 1), int(h or 0),
                             int(mi or 0), int(s or 0), 0, 0, -1))  # fmt: skip
    except (OverflowError, ValueError):
        return None
    return whole + (float(f"0.{frac}") if frac else 0.0)


def line_time(line: str, year: int) -> Optional[float]:
    """The timestamp a line carries (ISO/NCCL ``[%F %T]``, or glog ``E1130 07:37:41.08``)."""
    head = line[:160]
    iso = _TS_ISO.search(head)
    if iso:
        return _epoch(iso.groups(), year)
    glog = _TS_GLOG.search(head)
    if glog:
        mo, d, h, mi, s, frac = glog.groups()
        return _epoch((None, mo, d, h, mi, s, frac), year)
    return None


def _kind(line: str) -> Optional[str]:
    if _WATCHDOG.search(line):
        return "watchdog_timeout"
    if _WATCHDOG_HANG.search(line):
        return "watchdog_hang"
    if "NVRM: Xid" in line:
        return "xid"
    if _CUDA.search(line):
        return "cuda_error"
    if _NCCL_ERROR.search(line):
        return "nccl_error"
    if "NCCL WARN" in line:
        return "nccl_warn"
    if "NCCL INFO" in line:
        return "nccl_info"
    return None


def parse_line(line: str, year: Optional[int] = None) -> Optional[LogHit]:
    """Classify one log line; None for lines that say nothing about NCCL/CUDA/GPUs."""
    kind = _kind(line)
    if kind is None:
        return None
    text = line.rstrip("\r\n")
    rank: Optional[int] = None
    for pattern in _RANK_PATTERNS:
        match = pattern.search(text)
        if match:
            rank = int(match.group(1))
            break
    local = _LOCAL_RANK.search(text)
    pid: Optional[int] = None
    prefix = _NCCL_PREFIX.search(text)
    if prefix:
        pid = int(prefix.group("pid"))
    seq: Optional[int] = None
    op: Optional[str] = None
    work = _WORK.search(text)
    if work:
        seq, op = int(work.group("seq")), work.group("op")
    else:
        at = _TIMEOUT_AT.search(text)
        if at:
            seq = _sane(at.group(1))
    enq = compl = None
    counters = _ENQ_COMPL.search(text)
    if counters:
        enq, compl = _sane(counters.group("enq")), _sane(counters.group("compl"))
    if kind == "xid":
        xid = _XID.search(text)
        if xid and xid.group("pid"):
            pid = int(xid.group("pid"))
    return LogHit(
        kind=kind,
        line=text[:MAX_LINE_CHARS],
        rank=rank,
        local_rank=int(local.group(1)) if local else None,
        pid=pid,
        t_s=line_time(text, year if year is not None else time.localtime().tm_year),
        seq=seq,
        op=op,
        last_enqueued=enq,
        last_completed=compl,
    )


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
    """The interesting lines of (the last ``max_bytes`` of) one log file; OSError if unreadable."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            fh.seek(size - max_bytes)
            fh.readline()  # drop the partial first line
        data = fh.read()
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
