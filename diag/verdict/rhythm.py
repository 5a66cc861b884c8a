"""Silence judged against the job's own rhythm (issue #37).

A job whose log has a line every 12 s is silent for 11 s of every 12 by design; a capture of 6
s that sees no line says nothing about a hang. The rhythm is read from the log's own history:
the timestamps of the lines in its tail, grouped into bursts (a step's several lines printed
at once are one beat), the median gap between bursts being the period. The log is *overdue*
once it has been quiet for ``OVERDUE`` periods; until then a capture cannot call a hang, and
the length that would decide is the capture so far plus the time until it is overdue.

``diag capture`` without ``--count``/``--interval`` extends itself (at most ``MAX_EXTEND_S``)
to that length; otherwise - or where the extension is not enough - the verdict says so
instead of "deadlocked" (``rules.motion.silence_within_rhythm``). Pure functions of samples.
"""

from __future__ import annotations

import calendar
import math
import re
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.model import LogSample, Sample

MIN_BURSTS = 4  # timestamped bursts in a log's tail: three gaps at least
RECENT_GAPS = 8  # the beat is read from the last gaps only
STEADY = 2.0  # every one of them within this factor of their median: a beat, not a start-up
MIN_PERIOD_S = 3.0  # a shorter rhythm is covered by any capture
MAX_PERIOD_S = 3600.0
BURST_S = 1.0  # lines this close are one beat
OVERDUE = 1.5  # periods of quiet after which the next line is late
MAX_EXTEND_S = 60.0  # the most a capture extends itself to cover a rhythm

_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")


@dataclass(frozen=True)
class Rhythm:
    """One log's beat and where the capture stands against it."""

    path: str
    period_s: float  # the median gap between its bursts of lines before the capture ended
    gaps: int  # how many gaps the median is of
    quiet_s: float  # since its last write, at the last sample
    span_s: float  # the capture's length, first sample to last

    @property
    def overdue(self) -> bool:
        return self.quiet_s >= OVERDUE * self.period_s

    @property
    def decide_s(self) -> float:
        """How long a capture must be (from its first sample) to see the next line or know
        it is late."""
        return self.span_s + max(0.0, OVERDUE * self.period_s - self.quiet_s)


def line_stamp(line: str) -> Optional[float]:
    """A line's ISO-like timestamp as seconds (naive: only differences are used), or None."""
    m = _STAMP.search(line[:160])
    if m is None:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        whole = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    except (OverflowError, ValueError):
        return None
    return whole + (float(f"0.{frac}") if frac else 0.0)


def period_of(lines: Sequence[str]) -> Optional[Tuple[float, int]]:
    """The median gap between the bursts of timestamped ``lines``, and how many gaps; None
    with fewer than ``MIN_BURSTS`` bursts or a period outside the bounds."""
    stamps = sorted(t for t in (line_stamp(x) for x in lines) if t is not None)
    bursts: List[float] = []
    for t in stamps:
        if not bursts or t - bursts[-1] > BURST_S:
            bursts.append(t)
    if len(bursts) < MIN_BURSTS:
        return None
    gaps = [b - a for a, b in zip(bursts, bursts[1:])][-RECENT_GAPS:]
    period = statistics.median(gaps)
    if not MIN_PERIOD_S <= period <= MAX_PERIOD_S:
        return None
    if any(not period / STEADY <= g <= period * STEADY for g in gaps):
        return None
    return period, len(gaps)


def _logs(sample: Sample) -> Dict[Tuple[str, str], LogSample]:
    return {(lg.host, lg.path): lg for lg in sample.logs if lg.exists and lg.error is None}


def undecided(samples: Sequence[Sample]) -> Optional[Rhythm]:
    """The log whose rhythm this capture is too short for: it has a beat, wrote nothing
    during the capture, and is not yet overdue - the one that needs the longest capture.
    None when the capture can judge silence (no rhythm, a line arrived, or overdue)."""
    if len(samples) < 2:
        return None
    first, last = _logs(samples[0]), _logs(samples[-1])
    span = max(0.0, samples[-1].t_s - samples[0].t_s)
    best: Optional[Rhythm] = None
    for key, lg in last.items():
        before = first.get(key)
        if before is None or lg.size_bytes != before.size_bytes or lg.inode != before.inode:
            continue  # it grew during the capture (or is new): its lines are judged elsewhere
        beat = period_of(lg.tail)
        if beat is None:
            continue
        quiet = max(0.0, samples[-1].t_s - lg.mtime_s)
        r = Rhythm(path=lg.path, period_s=beat[0], gaps=beat[1], quiet_s=quiet, span_s=span)
        if not r.overdue and (best is None or r.decide_s > best.decide_s):
            best = r
    return best


def extension_end(samples: Sequence[Sample]) -> Optional[Tuple[str, float]]:
    """The log a capture too short for its beat waits on, and the sample time
    (``Sample.t_s``) it must last to - the time that decides, bounded by ``MAX_EXTEND_S``
    past the last sample; None when it need not. A time, not a number of samples: a late
    sample on a loaded host moves the end no nearer."""
    r = undecided(samples)
    if r is None:
        return None
    return r.path, samples[-1].t_s + min(MAX_EXTEND_S, r.decide_s - r.span_s)


def grew_since(a: Sample, b: Sample, path: str) -> bool:
    """The log at ``path`` grew or was replaced from ``a`` to ``b``: its rhythm answered."""
    before = {lg.path: lg for lg in _logs(a).values()}
    after = {lg.path: lg for lg in _logs(b).values()}
    x, y = before.get(path), after.get(path)
    return x is not None and y is not None and (x.size_bytes, x.inode) != (y.size_bytes, y.inode)


def hedge_text(r: Rhythm, would: str) -> str:
    """The sentence after "unknown: ": "too short to call a hang - train.log has a line every
    ~12 s ..."."""
    name = r.path.rsplit("/", 1)[-1]
    step = 2  # diag capture's default interval; a busy host's late samples say nothing here
    count = math.ceil(r.decide_s / step) + 1
    return (
        f"too short to call a hang - {name} has had a line every ~{r.period_s:.0f} s "
        f"(median of {r.gaps} gaps) and was quiet for {r.quiet_s:.0f} s when this "
        f"{r.span_s:.0f} s capture ended: a capture of at least {r.decide_s:.0f} s decides "
        f"(diag capture --count {count} --interval {step}, or leave both out and diag "
        f"extends the capture itself); without its rhythm it reads: {would}"
    )


__all__ = [
    "MAX_EXTEND_S",
    "Rhythm",
    "extension_end",
    "grew_since",
    "hedge_text",
    "line_stamp",
    "period_of",
    "undecided",
]
