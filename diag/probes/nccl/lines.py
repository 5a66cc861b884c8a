"""One NCCL / torch-watchdog / CUDA / Xid log line -> a ``LogHit`` (pure, recorded text in).

The lines that explain a hung collective are few and buried in megabytes of output: NCCL's
``host:pid:tid [dev] NCCL WARN ...``, torch's ``Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=N, OpType=ALLREDUCE, ...)`` and ``last enqueued NCCL work: A, last completed
NCCL work: B``, a ``CUDA error: an illegal memory access`` on the rank that then died, a kernel
``NVRM: Xid`` line. This module only recognises a line and pulls out what it names (rank,
PID, sequence numbers, time); grouping lines by rank and reading the files is
``diag.probes.nccl.logs``. Kept apart so the format knowledge is testable on recorded lines.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple, Optional, Sequence, Tuple

from diag.vocab import COLLECTIVE_LOG_KINDS, CollectiveLogKind

MAX_LINE_CHARS = 400
# Seq numbers above this are uninitialised memory printed by old torch builds, not real work.
_MAX_SANE_SEQ = 1 << 40

# Most specific first: a "NCCL WARN Cuda failure" line is a CUDA error, not just a warning.
# The closed set is ``diag.vocab.CollectiveLogKind``; the packs' ``log_kinds`` say what each means.
KINDS: Tuple[CollectiveLogKind, ...] = COLLECTIVE_LOG_KINDS

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
