"""View records of a report at scale (more than ``SCALE_RANKS`` ranks): see diag.render.scale.

A report of a small job is a plain ``ReportView`` (its golden files do not change); one of a
big job is a ``ScaledReportView``, the same fields plus ``scale``: the call-path prefix tree of
the ranks (STAT's view: rank sets on the edges), the per-host summary and what was left out.
"""

from __future__ import annotations

from typing import Tuple

from diag.render.view import ReportView
from diag.render.view_base import View


class TreeNode(View, frozen=True):
    """One edge of the call-path prefix tree: the frames it covers (outermost first; a chain
    every one of its ranks shares is one edge) and the ranks that went down it."""

    frames: Tuple[str, ...]
    ranks_text: str
    count: int
    where: str  # "on 512 nodes" or "on node-0320"
    odd: bool  # fewer ranks than a sibling: read this branch first
    classes: Tuple[str, ...] = ()  # the equivalence classes that end here
    stack_anchor: str = ""
    children: Tuple[TreeNode, ...] = ()


class HostSummary(View, frozen=True):
    name: str
    status: str
    ranks_text: str
    ranks: int
    classes: str  # "A ×7, B ×1"
    clock_offset: str
    failures: int
    odd: bool
    note: str = ""  # why it is odd, for people: "not captured: ...", "clock +5.020 s"
    anchor: str = ""  # its first shown rank


class ScaleView(View, frozen=True):
    note: str  # which ranks the timelines, matrix and details show
    tree: Tuple[TreeNode, ...]
    hosts: Tuple[HostSummary, ...]
    hosts_note: str = ""
    lead: str = ""  # the one line a person reads first: the suspect node and rank


class ScaledReportView(ReportView, frozen=True, kw_only=True):
    scale: ScaleView
