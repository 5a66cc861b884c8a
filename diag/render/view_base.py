"""Base of the report's view records (see diag.render.view)."""

from __future__ import annotations

import msgspec


class View(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every view record."""


class Spark(View, frozen=True):
    """One inline-SVG sparkline: ``points`` is the polyline, already scaled to the box."""

    points: str = ""
    last: str = "–"
    peak: str = ""
    empty: bool = True
