"""ReportView → the plain-text summary ``diag summary`` prints (tabulate, no colours needed).

Every value comes from a bundle, which anyone may craft: each is put on one line
(``safe_line``: a newline shows as ``\\x0a``), so a verdict summary or a log path cannot print a
forged ``verdict: PROGRESSING`` line of its own (issue #25).
"""

from __future__ import annotations

from typing import List

from diag.render import fmt
from diag.render.view import RANK_COLUMNS, ReportView
from diag.text.terminal import safe_line


def render_summary(view: ReportView) -> str:
    b, m = view.banner, view.meta
    lines: List[str] = []
    head = f"verdict: {safe_line(b.state.upper())}"
    if b.confidence_pct is not None:
        head += f" (confidence {b.confidence_pct}%)"
    if b.source == "computed":
        head += " [computed now]"
    lines.append(head)
    if b.summary:
        lines.append(safe_line(b.summary))
    lines.append(
        safe_line(f"capture: {m.span}, {m.counts}") + ("" if m.complete else ", cut short")
    )
    for s in b.suspects:
        lines.append(safe_line(f"suspect: {s.label}" + (f": {s.reason}" if s.reason else "")))
        if s.chain:
            lines.append(safe_line(f"  why: {s.chain}"))
    if view.evidence:
        lines.append("evidence:")
        lines.extend(safe_line(f"  - [{e.signal}] {e.detail}") for e in view.evidence)
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
        rows = [[_one_line(cell) for cell in row] for row in rows]
        lines.append("")
        from tabulate import tabulate  # 70 ms of imports: only `diag summary` needs it

        lines.append(tabulate(rows, headers=header, tablefmt="simple"))
        if any(r.suspect for r in view.rank_table):
            lines.append("* suspect")
    return "\n".join(lines) + "\n"


def _one_line(value: object) -> object:
    return safe_line(value) if isinstance(value, str) else value
