"""Since when the whole job has been quiet: "nothing in this job has done useful work since
03:12:09 (14 min ago)" (issue #33).

Why: the waiting ranks' age (``wait_age``) says how long *they* have not run; the person at
the terminal asks about the job - did anything in it move since? Four clocks the kernel and
the file system keep answer it at the first sample, each a "last sign of life":

- the waiting ranks last ran (``WaitAge.since_s``, from ``se.exec_start``);
- its logs were last written (``LogSample.mtime_s``): a job that logs nothing new is silent;
- the last byte each way on every connection between its own processes (sock_diag's
  ``tcpi_last_data_recv``/``_sent``: ``ServedConn.recv_age_ms``/``send_age_ms`` of the
  connections whose client is a process of the job) - ranks exchanging nothing are not
  working together;
- the job's own start (``ProcessInfo.start_time_s``): a quiet spell cannot be older.

The job has been quiet since the latest of them. The line is left out when any of them is
recent (under ``MIN_AGE_S``) or the kernel gave no wait age: a job that moved a moment ago
gets no "since".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from diag.model import Bundle
from diag.verdict.features import ProcSignals
from diag.verdict.wait_age import MIN_AGE_S, WaitAge, age_words, clock_words
from diag.vocab import VerdictState

_STATES: Tuple[VerdictState, ...] = ("deadlocked", "idle")


@dataclass(frozen=True)
class JobQuiet:
    """The job's last sign of life, and the sentence that says it."""

    tail: str  # "; nothing in this job has done useful work since 03:12:09 (14 min ago: ...)"
    since_s: Optional[float]  # epoch seconds


NONE = JobQuiet("", None)


def _last_log_s(bundle: Bundle) -> Optional[float]:
    logs = [log.mtime_s for log in bundle.samples[-1].logs if log.exists and log.mtime_s > 0]
    return max(logs) if logs else None


def _last_byte_s(bundle: Bundle) -> Optional[float]:
    """The last byte either way on a connection between two of the job's processes."""
    last = bundle.samples[-1]
    found: List[float] = []
    for ps in last.processes:
        for conn in ps.served:
            if conn.internal and conn.bytes_in + conn.bytes_out > 0:
                found.append(last.t_s - min(conn.recv_age_ms, conn.send_age_ms) / 1000.0)
    return max(found) if found else None


def _started_s(procs: Sequence[ProcSignals]) -> Optional[float]:
    starts = [p.info.start_time_s for p in procs if p.info.start_time_s is not None]
    return min(starts) if starts else None


def job_quiet(
    state: VerdictState, bundle: Bundle, procs: Sequence[ProcSignals], age: WaitAge
) -> JobQuiet:
    """The job-level line for a deadlocked or idle job whose waiting ranks have an age."""
    if state not in _STATES or age.since_s is None or not bundle.samples:
        return NONE
    now_s = bundle.samples[-1].t_s
    log_s, byte_s, start_s = _last_log_s(bundle), _last_byte_s(bundle), _started_s(procs)
    signs = [s for s in (age.since_s, log_s, byte_s) if s is not None]
    since = max(signs)
    if start_s is not None:
        since = max(since, start_s)
    if now_s - since < MIN_AGE_S:
        return NONE
    parts = [f"its ranks last ran at {clock_words(age.since_s)}"]
    if log_s is not None:
        parts.append(f"its log silent since {clock_words(log_s)}")
    if byte_s is not None:
        parts.append(f"the last byte between its processes at {clock_words(byte_s)}")
    if start_s is not None:
        parts.append(f"it started {age_words(now_s - start_s)} ago")
    tail = (
        f"; nothing in this job has done useful work since {clock_words(since)} "
        f"({age_words(now_s - since)} ago: {', '.join(parts)})"
    )
    return JobQuiet(tail, round(since, 3))
