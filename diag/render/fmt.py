"""How numbers, times and sample ranges read in every report format (HTML, Markdown, terminal).

Kept in one place so the three outputs print the same value the same way, and deterministic
(UTC, fixed precision) so golden files do not depend on the machine that renders them.
"""

from __future__ import annotations

import datetime
from typing import Iterable, Optional, Sequence

from diag.text.units import ranges, size

__all__ = [
    "clip",
    "command",
    "count",
    "duration",
    "number",
    "proc_badge",
    "runs",
    "size",
    "utc",
]


def utc(t_s: float) -> str:
    if t_s <= 0:
        return "unknown time"
    stamp = datetime.datetime.fromtimestamp(t_s, tz=datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def number(value: Optional[float], unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return f"{text} {unit}".strip() if unit not in ("%",) else f"{text}%"


def runs(values: Iterable[int]) -> str:
    """``[0,1,2,5,7,8]`` → ``"0–2, 5, 7–8"``: how sample and rank lists read everywhere."""
    return ranges(values)


def count(n: int, word: str, plural: str = "") -> str:
    """``1 process``, ``5 processes``: counts in sentences read right."""
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def command(argv: Sequence[str]) -> str:
    return " ".join(_quote(a) for a in argv)


def _quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "-_./=:,@+%" for c in arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


# Kernel states a reader must see before opening a process: it cannot run (stopped, traced),
# it is dead (zombie), or it sleeps where no signal reaches it (D).
_BADGES = {
    "T": "stopped (T)",
    "t": "traced (t)",
    "Z": "zombie",
    "D": "D: uninterruptible",
}


def proc_badge(status: str, state: str) -> str:
    """The word every row and collapsed header shows for a process that is not simply alive.

    "" for a running or sleeping process, and for one that exited or could not be read (its
    status already says so).
    """
    if status == "zombie":
        return "zombie"
    if status != "alive":
        return ""
    return _BADGES.get(state, "")
