"""Log lines that count how long nothing has come: a stall clock, not progress.

A loop that waits for something - a batch from its loader, a reply, a file - and reports it
prints one line again and again whose only moving number is a duration: "no batch for 20 s",
"no batch for 25 s", ... That duration is the time since the thing last came, and it grows
with the wall clock, so every new line is news only of time passing. Told apart from a line
that reports how long a piece of work took ("saved checkpoint in 5.2 s"), whose duration does
not follow the clock: the duration must grow from one line of the template to the next by
the time between them - by the lines' own timestamps where both have one, else in each of at
least three lines in a row.

Pure functions of the lines.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Dict, List, Optional, Sequence, Tuple

# A number with a unit of time after it, stuck or spaced: "35 s", "35s", "2.5 min", "1 hour".
_DURATION = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s?(ms|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b",
    re.IGNORECASE,
)
_UNIT_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
           "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
           "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0}  # fmt: skip
# A line's leading timestamp: "2026-12-06 07:53:59,141", "2026-12-06T07:53:59.141", "07:53:59".
_STAMP = re.compile(r"^\W*(?:(\d{4}-\d{2}-\d{2})[ T])?(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?")
MIN_UNSTAMPED_LINES = 3


def _parse(line: str) -> Optional[Tuple[str, float, Optional[float]]]:
    """The line's template (its timestamp and duration cut out, other numbers kept), its one
    duration in seconds, and its timestamp; None for a line with no duration or several."""
    stamp = _STAMP.match(line)
    at: Optional[float] = None
    body = line
    if stamp is not None:
        day, hh, mm, ss, frac = stamp.groups()
        at = int(hh) * 3600 + int(mm) * 60 + int(ss) + (float(f"0.{frac}") if frac else 0.0)
        if day:
            at += datetime.strptime(day, "%Y-%m-%d").toordinal() * 86400.0
        body = line[stamp.end() :]
    found = list(_DURATION.finditer(body))
    if len(found) != 1:
        return None
    m = found[0]
    seconds = float(m.group(1)) * _UNIT_S[m.group(2).lower()]
    template = (body[: m.start()] + "<duration>" + body[m.end() :]).strip()
    return template, seconds, at


def stall_clocks(new_lines: Sequence[str], before: Sequence[str] = ()) -> bool:
    """Every new line is a stall clock: its template's duration grew from the line of the same
    template before it by the time between the two (their timestamps agreeing within a
    quarter, at least 1 s), or - without timestamps - grew in each of at least
    ``MIN_UNSTAMPED_LINES`` lines in a row. Other numbers of the template must not move."""
    if not new_lines:
        return False
    history: Dict[str, List[Tuple[float, Optional[float]]]] = {}
    for line in before:
        parsed = _parse(line)
        if parsed is not None:
            history.setdefault(parsed[0], []).append((parsed[1], parsed[2]))
    for line in new_lines:
        parsed = _parse(line)
        if parsed is None:
            return False
        template, seconds, at = parsed
        seen = history.setdefault(template, [])
        if not _follows_clock(seen, seconds, at):
            return False
        seen.append((seconds, at))
    return True


def _follows_clock(
    seen: List[Tuple[float, Optional[float]]], seconds: float, at: Optional[float]
) -> bool:
    if not seen:
        return False
    last_s, last_at = seen[-1]
    if seconds <= last_s:
        return False
    if at is not None and last_at is not None:
        gap = at - last_at
        return gap > 0 and abs((seconds - last_s) - gap) <= max(1.0, 0.25 * gap)
    run = [seconds] + [s for s, _ in reversed(seen)]
    rising = 1
    while rising < len(run) and run[rising] < run[rising - 1]:
        rising += 1
    return rising >= MIN_UNSTAMPED_LINES
