"""ReportView → Markdown for a GitHub issue: verdict, evidence, suspects, classes, one stack.

A GitHub comment holds about 65,000 characters, so the text is hard-capped at ``MAX_CHARS``:
sections are added most-important first and the first one that does not fit is cut with a
pointer to the HTML report. Table cells are escaped so a ``|`` in a frame name cannot break
the table.
"""

from __future__ import annotations

from typing import List, Optional

from diag.render.view import ReportView, StackView

MAX_CHARS = 60_000
_CUT = "\n\n_… cut to fit a GitHub comment; see the HTML report for the rest._\n"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or " "


def _table(header: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _stack_block(stack: StackView) -> str:
    frames = "\n".join(f"  {f.name}  ({f.where})" for f in stack.frames)
    fence = "```"
    return fence + "\n" + frames.replace(fence, "'''") + "\n" + fence


def _suspect_stack(view: ReportView) -> Optional[str]:
    by_anchor = {s.anchor: s for s in view.stacks}
    chosen = next((r for r in view.ranks if r.suspect and r.main_stack_anchor), None)
    if chosen is None:
        return None
    stack = by_anchor.get(chosen.main_stack_anchor)
    if stack is None:
        return None
    title = f"### Stack of the suspect: {chosen.title} (main thread, innermost first)"
    return f"{title}\n\n{_stack_block(stack)}"


def render_markdown(view: ReportView) -> str:
    b, m = view.banner, view.meta
    head = f"## diag: {b.state.upper()}"
    if b.confidence_pct is not None:
        head += f" (confidence {b.confidence_pct}%)"
    parts: List[str] = [head]
    if b.summary:
        parts.append(f"> {b.summary}")
    capture = f"**Capture:** {m.span}, {m.samples} samples, {m.processes} processes"
    if m.command:
        capture += "; `" + m.command.replace("`", "'") + "`"
    if not m.complete:
        capture += " — **cut short** (rebuilt from the journal)"
    if b.source == "computed":
        capture += " — verdict computed when this report was rendered"
    parts.append(capture)
    if b.suspects:
        parts.append(
            "### Suspects\n\n"
            + "\n".join(
                f"- **{s.label}**" + (f": {s.reason}" if s.reason else "") for s in b.suspects
            )
        )
    if view.evidence:
        items = []
        for n, e in enumerate(view.evidence, 1):
            extra = ", ".join(x for x in (e.ranks_text, e.samples_text) if x)
            items.append(f"{n}. `{e.signal}` {e.detail}" + (f" ({extra})" if extra else ""))
        parts.append("### Evidence\n\n" + "\n".join(items))
    if view.matrix.classes:
        parts.append(
            "### Equivalence classes\n\n"
            + _table(
                ["class", "processes", "signature"],
                [[c.label, c.ranks_text, c.signature] for c in view.matrix.classes],
            )
        )
    if view.matrix.legend:
        parts.append(
            "### Main-thread stack signatures\n\n"
            + _table(
                ["sig", "innermost frame", "call chain", "seen on"],
                [
                    [f"`{entry.letter}`", entry.top, entry.where, entry.ranks_text]
                    for entry in view.matrix.legend
                ],
            )
        )
    stack = _suspect_stack(view)
    if stack:
        parts.append(stack)
    if view.rank_table:
        parts.append(
            "### Processes (last sample)\n\n"
            + _table(
                [
                    "process",
                    "pid",
                    "status",
                    "state",
                    "CPU",
                    "RSS",
                    "threads",
                    "sig",
                    "main thread",
                ],
                [
                    [
                        r.label + (" **(suspect)**" if r.suspect else ""),
                        str(r.pid),
                        r.status,
                        r.state,
                        r.cpu_pct,
                        r.rss,
                        str(r.threads),
                        r.signature,
                        r.top,
                    ]
                    for r in view.rank_table
                ],
            )
        )
    if view.failures:
        parts.append(
            f"_{len(view.failures) + view.failures_more} probe failure(s); see the HTML report._"
        )
    parts.append(f"<sub>diag {m.diag_version} · captured {m.created}</sub>")
    return _cap(parts)


def _cap(parts: List[str]) -> str:
    out = ""
    for part in parts:
        piece = (part + "\n\n") if out or part else part
        if len(out) + len(piece) + len(_CUT) > MAX_CHARS:
            room = MAX_CHARS - len(out) - len(_CUT)
            cut = piece[: max(0, room)]
            if cut.count("```") % 2:  # never leave a code block open
                cut = cut[: cut.rfind("```")]
            return (out + cut).rstrip() + _CUT
        out += piece
    return out.rstrip() + "\n"
