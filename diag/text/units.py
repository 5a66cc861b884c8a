"""Rank ranges and byte sizes: one way to write each, in the verdict, the report and the ticket.

Conventions (the README states them): ranges use an en dash and ", " between runs -
``0–2, 5`` - because people write ranges that way and a comma-only list reads as one number;
sizes are binary (IEC: KiB, MiB, GiB - 1024-based), the unit ``/proc`` and allocators count
in, so "RSS +1.0 GiB" in the summary is the same number as the table's "1.0 GiB".
"""

from __future__ import annotations

from typing import Iterable, List, Optional

EN_DASH = "\u2013"
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def ranges(values: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``"0–2, 5, 7–8"``."""
    ordered = sorted(set(values))
    parts: List[str] = []
    start: Optional[int] = None
    prev: Optional[int] = None
    for v in ordered:
        if start is None or prev is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            parts.append(_span(start, prev))
            start = prev = v
    if start is not None and prev is not None:
        parts.append(_span(start, prev))
    return ", ".join(parts)


def _span(start: int, end: int) -> str:
    return str(start) if end == start else f"{start}{EN_DASH}{end}"


def rank_set(ranks: Iterable[int]) -> str:
    """``"rank 2"``, ``"ranks 0–3"``, ``"ranks 0–2, 5"``: a set of ranks in a sentence."""
    unique = sorted(set(ranks))
    return ("rank " if len(unique) == 1 else "ranks ") + ranges(unique)


def size(num_bytes: Optional[float]) -> str:
    """``1536`` → ``"1.5 KiB"``; ``None`` → ``"–"`` (unknown, in a table cell)."""
    if num_bytes is None:
        return EN_DASH
    value = float(num_bytes)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value:.1f} {_UNITS[-1]}"  # pragma: no cover (the loop always returns)
