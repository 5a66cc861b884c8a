"""The Markdown of a report at scale: the suspect line first, the call-path tree, odd nodes.

Only a ``ScaledReportView`` (more than ``render.scale.SCALE_RANKS`` ranks) has these parts; a
small job's Markdown is what ``render_markdown`` always wrote.
"""

from __future__ import annotations

from typing import List, Sequence

from diag.render.view import ReportView
from diag.render.view_scale import ScaledReportView, TreeNode
from diag.text.markdown_escape import MarkdownText

MAX_NODE_ROWS = 20
MAX_TREE_LINES = 60


def lead(view: ReportView, md: MarkdownText) -> List[str]:
    if not isinstance(view, ScaledReportView) or not view.scale.lead:
        return []
    return [f"**{md.escape(view.scale.lead)}**"]


def _tree_lines(nodes: Sequence[TreeNode], depth: int, out: List[str], md: MarkdownText) -> None:
    for n in nodes:
        if len(out) >= MAX_TREE_LINES:
            return
        frames = " › ".join(n.frames)
        where = f" {md.inline(n.where)}" if n.where else ""
        odd = " **(odd)**" if n.odd else ""
        ranks = md.inline(n.ranks_text)
        out.append(f"{'  ' * depth}- {md.code(frames)} — {ranks} ({n.count:,}{where}){odd}")
        _tree_lines(n.children, depth + 1, out, md)


def sections(view: ReportView, md: MarkdownText) -> List[str]:
    if not isinstance(view, ScaledReportView):
        return []
    s = view.scale
    parts: List[str] = []
    lines: List[str] = []
    _tree_lines(s.tree, 0, lines, md)
    if lines:
        parts.append("### Call-path tree (every rank; odd branches first)\n\n" + "\n".join(lines))
    odd = [h for h in s.hosts if h.odd]
    if odd:
        rows = [
            "| node | status | ranks | classes | clock offset | failures | why |",
            "|---|---|---|---|---|---|---|",
        ]
        for h in odd[:MAX_NODE_ROWS]:
            cells = [h.name, h.status, h.ranks_text, h.classes, h.clock_offset,
                     str(h.failures), h.note]  # fmt: skip
            escaped = (md.escape(c).replace("|", "\\|") for c in cells)
            rows.append("| " + " | ".join(escaped) + " |")
        more = len(odd) - MAX_NODE_ROWS
        tail = f"\n\n_{more} more odd nodes in the HTML report._" if more > 0 else ""
        parts.append(f"### Odd nodes ({len(odd)} of {len(s.hosts)})\n\n" + "\n".join(rows) + tail)
    parts.append(f"_{md.escape(s.note)}_")
    return parts
