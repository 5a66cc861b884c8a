"""View records of the "Who waits on whom" section: the wait-for graph, already laid out.

The builder (``diag.render.waitgraph``) decides every coordinate, label and CSS class; the
template only writes them into an inline SVG (no script, no external loads).
"""

from __future__ import annotations

from typing import Tuple

from diag.render.view_base import View


class GraphBox(View, frozen=True):
    """One process (or door to the outside) drawn as a box."""

    key: str
    label: str  # "rank 3"
    sub: str  # "stopped", "blocked · all_reduce"
    title: str  # the node's detail, shown on hover
    x: int
    y: int
    w: int
    h: int
    css: str  # "gnode st-stopped end-bad"
    anchor: str = ""  # the process's section in the report


class GraphArrow(View, frozen=True):
    """One edge: ``path`` is the SVG path from the waiter to who can end its wait."""

    path: str
    label: str  # the edge kind
    lx: int
    ly: int
    css: str
    title: str  # the evidence


class GraphView(View, frozen=True):
    chains: Tuple[str, ...] = ()
    width: int = 0
    height: int = 0
    boxes: Tuple[GraphBox, ...] = ()
    arrows: Tuple[GraphArrow, ...] = ()
    note: str = ""  # "drawn: the suspects' chains only (40 of 512 processes)"


__all__ = ["GraphArrow", "GraphBox", "GraphView"]
