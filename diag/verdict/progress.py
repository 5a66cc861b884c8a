"""Log growth across samples: the job's own output, the strongest sign of progress.

Silence proves little (logs come in bursts, a model load is silent for minutes), but growth
does - unless the new lines are a heartbeat: one repeated template that talks about waiting
("still waiting for rank 3", NCCL watchdog timeouts). Those are written *because* the job is
stuck and must not read as progress. Nor is a log that moves without progressing: a monitor
thread reprinting a frozen step with a new ``elapsed=``, a supervisor logging its worker's
pings, a tqdm bar redrawn at the same n - a log that moves is not a log that progresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Set, Tuple

from diag.model import Bundle, LogSample
from diag.text.death_lines import is_death_line
from diag.verdict.bundle_index import derived
from diag.verdict.series_index import process_at
from diag.verdict.stall_clock import stall_clocks
from diag.verdict.startup_signs import parse_tqdm

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(\.\d+)?")
_WAITING_WORDS = re.compile(
    r"wait|timeout|timed out|heartbeat|still|retry|retrying|watchdog|stuck|hang|no response",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LogGrowth:
    path: str
    pids: Tuple[int, ...]  # its writers, on ``host``
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
    # It grew by no new line, only its last one redrawn as a progress bar: the bar's count
    # before and after ("45/100", "45/100"), for sentences that say so rather than "grew 0
    # lines"; empty otherwise.
    redrawn: Tuple[str, ...] = ()
    # The host it was read on: in a merged bundle two nodes' /tmp/train.log are two logs, and
    # a pid names a process of that host only.
    host: str = ""

    @property
    def writers(self) -> FrozenSet[Tuple[str, int]]:
        """Its writers as process keys (host, pid)."""
        return frozenset((self.host, pid) for pid in self.pids)

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


def _last_redraw(line: str) -> str:
    """What a terminal shows of a line redrawn with ``\\r`` (a progress bar): its last
    segment - the earlier ones are states it already left."""
    if "\r" not in line:
        return line
    segments = [s for s in line.split("\r") if s.strip()]
    return segments[-1] if segments else ""


def is_heartbeat(new_lines: Tuple[str, ...], before: Tuple[str, ...] = ()) -> bool:
    """New lines that say nothing happened: stuck or idle, not progress - by their shape,
    whatever their wording or framework.

    A line that reports quantities ("throughput: 0.0 tokens/s, running: 4 reqs", "step=12")
    repeats one template on a timer; when its values are all zero, or the same as the last
    time that template was printed (``before``: the lines seen earlier), it reports that
    nothing changed - a heartbeat. New values (a step, a count, a request more) are progress.
    A clock or a duration (``elapsed=9.0s``, ``uptime: 31``) is no such value: it moves
    whether or not anything else does. A line with a position counter (``step 45/10000``,
    ``docs=0/100``, a tqdm bar's n/total) is judged by that counter alone: a monitor thread
    reprints a frozen step with a new loss or a decaying average. One or two templates about
    waiting or liveness ("still waiting for rank 3 after 60 s", "worker 7 alive (ping 12)")
    are heartbeats even as their numbers grow. A crash's last words (ERROR lines, a
    traceback) are the cause of a hang, never progress. Other lines that report no quantity
    are events (an access log's "GET / 200", "step 10 loss 1.2"), progress even when
    identical."""
    lines = [_last_redraw(line) for line in new_lines]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return False
    shapes = [_shape(line) for line in lines]
    if _keepalive(lines, shapes) or stall_clocks(lines, before):
        return True
    earlier: Dict[str, _Shape] = {}  # template -> its shape the last time before
    for line in before:
        line = _last_redraw(line)
        if line.strip() and not is_error_line(line):
            shape = _shape(line)
            if shape.values is not None or shape.counters:
                earlier[shape.template] = shape
    printed: Dict[str, List[_Shape]] = {}  # template -> its new shapes, in order
    for line, shape in zip(lines, shapes):
        if not is_error_line(line):
            printed.setdefault(shape.template, []).append(shape)
    return all(
        _unchanged(earlier.get(t), seq, counts_itself=_liveness(t)) for t, seq in printed.items()
    )


def _liveness(template: str) -> bool:
    """A template that says a process lives ("alive beat=#", "tick #", "heartbeat seq=#"), not
    a stats report: a number it carries that goes up by one a line counts its own lines."""
    alive = _LIVENESS_WORDS.search(template) or _HEARTBEAT_WORD.search(template)
    return bool(alive) and not _STATS_WORDS.search(template)


def _same_or_counted(a: Tuple[str, ...], b: Tuple[str, ...]) -> bool:
    """Two reports of one liveness template whose values are equal but for counters one
    apart: a beat number (``beat=41``, ``beat=42``) moves because a line was printed."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if not (x.lstrip("-").isdigit() and y.lstrip("-").isdigit()):
            return False
        if abs(int(x) - int(y)) != 1:
            return False
    return True


def _keepalive(lines: List[str], shapes: List[_Shape]) -> bool:
    """One or two templates, each about waiting or liveness, reporting no quantity and no
    position counter: "still waiting for rank 3 after 60 s", a supervisor's "worker 7 alive
    (ping 12)". Their numbers (seconds, a ping count) grow because time passes, not work."""
    templates = {_template(line) for line in lines}
    return (
        len(templates) <= 2
        and all(_WAITING_WORDS.search(t) or _LIVENESS_WORDS.search(t) for t in templates)
        # a report's "Waiting: 3 reqs" is judged by its values, a step by its counter
        and all(s.values is None and not s.counters for s in shapes)
    )


def _unchanged(earlier: Optional[_Shape], new: List[_Shape], counts_itself: bool = False) -> bool:
    """Every new line of one template says nothing moved: its position counter the same as
    the line before it; without a counter, all its values zero (nothing running), or the
    same as the report before it (the first one, with none before it: the same as the next) -
    for a liveness line (``counts_itself``), but for a beat number one apart. A report
    printed once, with something in it, is work reported; an event is progress."""
    seq = ([earlier] if earlier is not None else []) + new
    for i in range(len(seq) - len(new), len(seq)):
        cur = seq[i]
        other = seq[i - 1] if i > 0 else (seq[1] if len(seq) > 1 else None)
        if cur.counters:
            if other is None or other.counters != cur.counters:
                return False
            continue
        if cur.values is None:
            return False  # an event, not a report of quantities: progress
        if all(float(v) == 0 for v in cur.values):
            continue
        if other is None or other.values is None:
            return False
        if other.values != cur.values and not (
            counts_itself and _same_or_counted(other.values, cur.values)
        ):
            return False
    return True


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


# A quantity a line reports: a word (quoted, as JSON writes it, or not), ":" or "=", a number
# that is not part of an address or a clock ("Running: 4 reqs", "loss=0.31", '"step": 7'; not
# "INFO: 127.0.0.1:5000").
_REPORTED = re.compile(r"[A-Za-z_%)\]][\"']?[ \t]*[:=][ \t]*(-?\d+(?:\.\d+)?)(?![\d.:])")
_KEY_BEFORE = re.compile(r"([A-Za-z_][\w.-]*)[^\w]*$")
# Keys of a time, not of work: a clock or a duration moves whether or not the job does.
_TIME_KEYS = frozenset(
    {"elapsed", "uptime", "time", "age", "wall", "walltime", "duration", "runtime", "since",
     "eta", "timestamp", "ts", "clock", "took"}
)  # fmt: skip
# A Unix time, in seconds (2017-2033, with or without a fraction) or milliseconds: a status
# file's ``"t": 1796231951.7`` is a clock whatever its key is called.
_EPOCH = re.compile(r"1[5-9]\d{8}(?:\.\d+)?|1[5-9]\d{11}")
# A number with a unit of time stuck to it: "9.0s", "120ms", "3min" (not "3.9it/s").
_TIME_UNIT = re.compile(r"(?:s|ms|us|ns|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?)\b")
# Where the work is: a position that advances with it. Always a position: a step, an
# iteration, documents or items done. Only as "n/total" (else a size: "batch=32",
# "tokens: 4096"): batches, samples, tokens, shards, chunks, files.
_POSITION = re.compile(
    r"\b(?:(?P<key>global_step|steps?|iters?|iterations?|updates?|docs|documents|done|processed"
    r"|completed|finished|items)|(?P<part>batch(?:es)?|samples|tokens|examples|sequences"
    r"|shards?|chunks?|files|records))\b[ \t]*[:=#]?[ \t]*(?P<n>\d+)"
    r"(?:[ \t]*/[ \t]*(?P<total>\d+))?(?![\d.])",
    re.IGNORECASE,
)
# Words of a line that says a process lives, not that its work moves.
_LIVENESS_WORDS = re.compile(
    r"\b(?:alive|ping|pong|keep-?alive|healthy|health ?check|tick|still running)\b",
    re.IGNORECASE,
)


_HEARTBEAT_WORD = re.compile(r"\bheart-?beat", re.IGNORECASE)


class _Shape(NamedTuple):
    """What a line reports, to compare with the same template's line before it."""

    template: str
    values: Optional[Tuple[str, ...]]  # quantities reported, times left out; None: an event
    counters: Tuple[str, ...]  # position counters (a step, docs done, a bar's n and total)


def _shape(line: str) -> _Shape:
    """The template, reported values and position counters of one line. A tqdm bar is its
    description and n/total only: its elapsed time, ETA and rate move on every redraw."""
    bar = parse_tqdm(line)
    if bar is not None:
        return _Shape("tqdm " + _template(bar.desc), (), (f"{bar.n:g}", f"{bar.total:g}"))
    text = _strip_time(line)
    found = list(_REPORTED.finditer(text))
    values = tuple(m.group(1) for m in found if not _time_like(text, m))
    counters = tuple(
        f"{m.group('n')}/{m.group('total') or ''}"
        for m in _POSITION.finditer(text)
        if m.group("key") or m.group("total")
    )
    return _Shape(_template(text), values if found else None, counters)


def _time_like(text: str, m: re.Match[str]) -> bool:
    """A reported value that is a time: its key names one (``elapsed``, ``step_time``,
    ``uptime_s``), a unit of time follows it (``9.0s``), or it is a Unix time."""
    if _TIME_UNIT.match(text, m.end(1)) or _EPOCH.fullmatch(m.group(1)):
        return True
    key = _KEY_BEFORE.search(text, max(0, m.start(1) - 64), m.start(1))
    parts = re.split(r"[_.-]", key.group(1).lower()) if key else []
    return any(part in _TIME_KEYS for part in parts)


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


def _new_lines(first: LogSample, last: LogSample, grew_lines: int) -> Tuple[str, ...]:
    """The lines appended during the capture, as far as the last tail reaches: its last
    ``grew_lines`` lines, so a heartbeat printed identically each time is new each time. When
    that is the whole tail, the part that overlaps the end of the first tail is not new (a
    log cut short, a count off); no newline counted (a ``\\r`` progress bar): the lines of
    the last tail not in the first - or, none differing (a bar redrawn as it was), its last
    line, to be judged against the same line before it rather than read as an event."""
    if 0 < grew_lines < len(last.tail):
        return last.tail[-grew_lines:]
    if grew_lines > 0:
        tail = last.tail
        for k in range(min(len(first.tail), len(tail)), 0, -1):
            if first.tail[-k:] == tail[:k]:
                return tail[k:]
        return tail
    seen = set(first.tail)
    return tuple(line for line in last.tail if line not in seen) or last.tail[-1:]


def _history(first: LogSample, last: LogSample, new: Tuple[str, ...]) -> Tuple[str, ...]:
    """The lines seen before the new ones, oldest first: the first tail, then what the last
    tail's older part adds to it. Its leading lines the first tail holds are those very lines,
    not later ones: appended after the first tail they would stand as the latest state - a
    bar's last full line before the one redrawn in place (``44/100``, then ``ready``) would
    hide its redraw the first sample saw (``45/100``), and a bar redrawn at 45 read as moved."""
    older = last.tail[: len(last.tail) - len(new)] if new else last.tail
    seen = set(first.tail)
    k = 0
    while k < len(older) and older[k] in seen:
        k += 1
    return (*first.tail, *older[k:])


def _redrawn(grew_lines: int, new: Tuple[str, ...], history: Tuple[str, ...]) -> Tuple[str, ...]:
    """A log that grew by its last line redrawn in place as a tqdm bar, no new line: the bar's
    n/total before (its last state in ``history`` with the same description) and after."""
    after = parse_tqdm(_last_redraw(new[-1])) if grew_lines == 0 and len(new) == 1 else None
    if after is None:
        return ()
    count = f"{after.n:g}/{after.total:g}"
    for line in reversed(history):
        bar = parse_tqdm(_last_redraw(line))
        if bar is not None and bar.desc == after.desc:
            return (f"{bar.n:g}/{bar.total:g}", count)
    return (count, count)


def _writers_dead(bundle: Bundle, host: str, pids: Tuple[int, ...]) -> bool:
    if not bundle.samples:
        return False
    end = len(bundle.samples) - 1
    ranked = _ranked_pids(bundle).get(host, set())
    writers = [p for p in pids if p in ranked] or list(pids)
    ends = [process_at(bundle, host, p, end) for p in writers]
    return bool(writers) and all(got and got[0].status in ("zombie", "exited") for got in ends)


def _ranked_pids(bundle: Bundle) -> Dict[str, Set[int]]:
    """The pids of ranks, by host (once per bundle: asked once per log, i.e. per host)."""
    return derived("progress.ranked_pids", bundle.processes, _ranks_by_host, bundle)


def _ranks_by_host(bundle: Bundle) -> Dict[str, Set[int]]:
    out: Dict[str, Set[int]] = {}
    for p in bundle.processes:
        if p.rank is not None:
            out.setdefault(p.host, set()).add(p.pid)
    return out


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
    series: Dict[Tuple[str, str], List[Tuple[int, LogSample]]] = {}
    for sample in bundle.samples:
        for log in sample.logs:
            series.setdefault((log.host, log.path), []).append((sample.index, log))
    out: List[LogGrowth] = []
    for (host, path), seq in series.items():
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
        new: Tuple[str, ...] = ()
        history: Tuple[str, ...] = ()
        if len(present) > 1 and grew_at:
            first, last = present[0][1], present[-1][1]
            new = _new_lines(first, last, grew_lines)
            history = _history(first, last, new)
        pids = tuple(sorted({p for _, log in seq for p in log.pids}))
        out.append(
            LogGrowth(
                path=path,
                pids=pids,
                grew_bytes=grew_bytes,
                grew_lines=grew_lines,
                samples=tuple(grew_at),
                intervals=max(0, len(present) - 1),
                heartbeat=is_heartbeat(new, history),
                new_lines=new,
                writers_dead=_writers_dead(bundle, host, pids),
                tail=present[-1][1].tail if present else (),
                deaths=_death_lines(log for _, log in present),
                redrawn=_redrawn(grew_lines, new, history),
                host=host,
            )
        )
    return out
