"""What moving output says: a completion, a failure, or neither - by what each line reports.

A log that grows is progress only when what it adds reports progress. A server whose
handlers are wedged still writes: its client's "request 12 FAILED after 10.0 s: timed out",
its framework's "cancelling request", a retry loop's "attempt 7 failed: HTTP 503". Those lines
are evidence *of* a stall, and a job whose only moving output is failure is the loudest kind
of stuck. Completions - a step, an access line with a 2xx, items or tokens done, a bar whose
count advances - are progress; failures beside completions are progress with a failure rate.

The generic classes live here; a framework's own spellings are its pack's ``failure_lines``
and ``progress_lines`` (``diag.frameworks.union``). Pure functions of the lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Literal, Optional, Tuple

from diag.frameworks import union
from diag.model import Bundle
from diag.verdict.backoff import RETRY_WORDS
from diag.verdict.progress import LogGrowth, is_error_line
from diag.verdict.startup_signs import parse_tqdm

# "probe": a health check or metrics scrape answered - it says the server's loop runs, not
# that work completes; counted neither way (a wedged server answers /health).
LineKind = Literal["completion", "failure", "probe", "other"]
# What a failure line says went wrong, for the sentence ("6 timeouts, 6 cancellations").
FailureKind = Literal[
    "refused write", "timeout", "cancellation", "refused connection", "failed health check",
    "HTTP error", "retry", "framework stall", "exception", "failure",
]  # fmt: skip
# The kernel's words for a write it refused, as strerror spells them: a full filesystem
# (ENOSPC), a quota (EDQUOT), a read-only mount (EROFS), a file over its size limit (EFBIG).
# Bytes a process wrote before the refusal are not kept output: the retry writes them again.
REFUSED_WRITE = re.compile(
    r"No space left on device|\bENOSPC\b|Disk quota exceeded|\bEDQUOT\b"
    r"|Read-only file system|\bEROFS\b|File too large|\bEFBIG\b",
    re.I,
)

# An access line's status: uvicorn's and werkzeug's '"GET / HTTP/1.1" 200', gunicorn's and
# nginx's combined format, Ray Serve's and aiohttp's 'GET /app 200'.
_ACCESS = re.compile(
    r"\"(?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) [^\"]*\"\s+(?P<a>[1-5]\d\d)\b"
    r"|\b(?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS)\s+/\S*\s+(?:HTTP/[\d.]+\s+)?(?P<b>[1-5]\d\d)\b"
)
# The paths of health checks, readiness probes and metrics scrapes.
_PROBE_PATH = re.compile(
    r"\s/(?:health|healthz|healthcheck|livez|readyz|ready|ping|metrics|-/healthy|-/ready)"
    r"(?:[/?\s\"]|$)",
    re.I,
)
# Generic failure words, most specific first: the first that matches names the line's kind.
_FAILURES: Tuple[Tuple[FailureKind, re.Pattern[str]], ...] = (
    ("refused write", REFUSED_WRITE),
    ("timeout", re.compile(r"\btimed?[ -]?out\b|\btimeout\b|deadline exceeded", re.I)),
    (
        "cancellation",
        re.compile(r"\bcancell?(?:ed|ing|ation)\b|\baborted\b|client disconnected", re.I),
    ),
    (
        "refused connection",
        re.compile(
            r"connection (?:refused|reset|aborted)|\bECONNREFUSED\b|\bECONNRESET\b"
            r"|failed to connect|\bunreachable\b",
            re.I,
        ),
    ),
    (
        "failed health check",
        re.compile(r"health ?check\w* (?:failed|failing|timed out)|\bunhealthy\b", re.I),
    ),
    (
        "HTTP error",
        re.compile(
            r"\b(?:HTTP(?: Error)?|status(?: code)?|code)\s*[:=]?\s*[45]\d\d\b"
            r"|\b[45]\d\d (?:Service Unavailable|Internal Server Error|Bad Gateway"
            r"|Gateway Timeout|Too Many Requests)",
            re.I,
        ),
    ),
    ("retry", RETRY_WORDS),  # one definition: the back-off cause's (diag.verdict.backoff)
)
_FAILED = re.compile(r"\bfail(?:ed|s|ure|ing)?\b|\bunable to\b|\bcould not\b", re.I)
# Generic completion words and positions: a request served, a step, items or tokens done.
_COMPLETED = re.compile(
    r"\b(?:ok|completed?|succeeded|success(?:ful(?:ly)?)?|served|processed|finished|done|saved)\b"
    r"|\b(?:step|iter(?:ation)?|epoch|batch)\s*[:=#]?\s*\d+"
    r"|\b\d+\s*(?:tokens|items|samples|requests|docs|documents|records)\b",
    re.I,
)


def line_kind(line: str) -> Tuple[LineKind, Optional[FailureKind]]:
    """A line's kind, and for a failure what kind of failure. An access line is judged by
    its status alone (a path may say "retry"); a framework's own words come before the
    generic ones; a failure word outranks a completion word ("request 3 FAILED", "done with
    errors")."""
    access = _ACCESS.search(line)
    if access is not None:
        status = int(access.group("a") or access.group("b"))
        if status >= 400:
            return "failure", "HTTP error"
        return ("probe", None) if _PROBE_PATH.search(access.group(0)) else ("completion", None)
    if union.FAILURE_LINE.search(line):
        return "failure", "framework stall"
    if union.PROGRESS_LINE.search(line):
        return "completion", None
    for kind, pattern in _FAILURES:
        if pattern.search(line):
            return "failure", kind
    if is_error_line(line):
        return "failure", "exception"
    if _FAILED.search(line):
        return "failure", "failure"
    if _COMPLETED.search(line) or parse_tqdm(line) is not None:
        return "completion", None
    return "other", None


@dataclass(frozen=True)
class OutputTally:
    """What a run of new lines reported: completions, failures (by kind, most first), lines
    that report neither, and the newest failure line (quoted in a sentence)."""

    completions: int = 0
    failures: int = 0
    others: int = 0
    kinds: Tuple[Tuple[FailureKind, int], ...] = ()
    last_failure: str = ""

    @property
    def failing_only(self) -> bool:
        """Failure and nothing else: no completion, no line that reports neither."""
        return self.failures > 0 and self.completions == 0 and self.others == 0


MAX_QUOTE_CHARS = 160  # a failure line quoted in a sentence, at most


def tally(lines: Iterable[str]) -> OutputTally:
    """Count what ``lines`` report. A traceback or a wrapped message is one event: a line
    that starts with whitespace (a frame, a source line, a continuation) after a failure is
    part of that failure, not a line of its own."""
    completions = failures = others = 0
    kinds: Dict[FailureKind, int] = {}
    last = ""
    previous: LineKind = "other"
    previous_failure: Optional[FailureKind] = None
    for raw in lines:
        line = raw.rsplit("\r", 1)[-1] if "\r" in raw else raw
        if not line.strip():
            continue
        if union.BACKTRACE_LINE.search(line):
            continue  # a native backtrace's frame: part of a failure (its head maybe cut off)
        if previous == "failure" and line[:1].isspace():
            continue
        kind, failure = line_kind(line)
        if kind == "probe":
            continue  # neither progress nor failure
        if failure == "exception" and previous_failure == "exception":
            continue  # a traceback's lines: one exception
        previous_failure = failure
        if kind == "failure" and failure is not None:
            failures += 1
            kinds[failure] = kinds.get(failure, 0) + 1
            last = line.strip()[:MAX_QUOTE_CHARS]
        elif kind == "completion":
            completions += 1
        else:
            others += 1
        previous = kind
    ordered = tuple(sorted(kinds.items(), key=lambda kv: -kv[1]))
    return OutputTally(completions, failures, others, ordered, last)


def log_tally(lg: LogGrowth) -> OutputTally:
    """What a log's new lines of the capture reported."""
    return tally(lg.new_lines)


def failed_tries(lg: LogGrowth) -> bool:
    """A log whose new lines report only failures, and say that what failed is tried again
    ("save failed: ...; retrying in 3s") or that the kernel refused a write (a full disk, a
    quota): what its writers wrote meanwhile are the failed tries - the next try writes it
    again - not output. (torch.save on a full disk says "unexpected pos 704 vs 598", not
    ENOSPC: the retry is what the line has to say.)"""
    t = log_tally(lg)
    if not t.failing_only:
        return False
    return any(kind == "refused write" for kind, _ in t.kinds) or any(
        RETRY_WORDS.search(line) for line in lg.new_lines
    )


def probes_only(lg: LogGrowth) -> bool:
    """A log that grew by health checks, readiness probes or metrics scrapes answered, and by
    nothing else: the server's accept loop runs, which says nothing of its work - a server
    whose every worker is busy or wedged answers its /health all the same."""
    lines = [raw.rsplit("\r", 1)[-1] for raw in lg.new_lines]
    lines = [line for line in lines if line.strip()]
    return bool(lines) and all(line_kind(line)[0] == "probe" for line in lines)


def failing_logs(logs: Iterable[LogGrowth]) -> List[LogGrowth]:
    """The logs whose only new lines are failures: they move, and report a stall."""
    return [lg for lg in logs if lg.grew and log_tally(lg).failing_only]


def merged(tallies: Iterable[OutputTally]) -> OutputTally:
    """Several logs' tallies as one (the newest failure quoted is the last log's)."""
    out = OutputTally()
    kinds: Dict[FailureKind, int] = {}
    for t in tallies:
        for kind, n in t.kinds:
            kinds[kind] = kinds.get(kind, 0) + n
        out = OutputTally(
            out.completions + t.completions,
            out.failures + t.failures,
            out.others + t.others,
            (),
            t.last_failure or out.last_failure,
        )
    ordered = tuple(sorted(kinds.items(), key=lambda kv: -kv[1]))
    return OutputTally(out.completions, out.failures, out.others, ordered, out.last_failure)


def capture_span_s(bundle: Bundle) -> float:
    """The capture's length, first sample to last: the window a failure rate is counted in."""
    if len(bundle.samples) < 2:
        return 0.0
    return max(0.0, bundle.samples[-1].t_s - bundle.samples[0].t_s)
