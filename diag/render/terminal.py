"""ReportView → the plain-text summary ``diag summary`` prints (tabulate, no colours needed)."""

from __future__ import annotations

from typing import List

from diag.render import fmt
from diag.render.view import RANK_COLUMNS, ReportView


def render_summary(view: ReportView) -> str:
    b, m = view.banner, view.meta
    lines: List[str] = []
    head = f"verdict: {b.state.upper()}"
    if b.confidence_pct is not None:
        head += f" (confidence {b.confidence_pct}%)"
    if b.source == "computed":
        head += " [computed now]"
    lines.append(head)
    if b.summary:
        lines.append(b.summary)
    lines.append(f"capture: {m.span}, {m.counts}" + ("" if m.complete else ", cut short"))
    for s in b.suspects:
        lines.append(f"suspect: {s.label}" + (f": {s.reason}" if s.reason else ""))
        if s.chain:
            lines.append(f"  why: {s.chain}")
    if view.evidence:
        lines.append("evidence:")
        lines.extend(f"  - [{e.signal}] {e.detail}" for e in view.evidence)
    if view.rank_table:
        multi_host = any(r.host for r in view.rank_table)
        header = (["host"] if multi_host else []) + list(RANK_COLUMNS)
        rows = [
            ([r.host] if multi_host else [])
            + [
                r.label + (" *" if r.suspect else ""),
                r.role,
                r.pid,
                r.badge or r.status,
                r.state,
                r.cpu_pct,
                r.rss,
                r.threads,
                r.signature,
                fmt.clip(r.top, 60),
            ]
            for r in view.rank_table
        ]
        lines.append("")
        from tabulate import tabulate  # 70 ms of imports: only `diag summary` needs it

        lines.append(tabulate(rows, headers=header, tablefmt="simple"))
        if any(r.suspect for r in view.rank_table):
            lines.append("* suspect")
    return "\n".join(lines) + "\n"
