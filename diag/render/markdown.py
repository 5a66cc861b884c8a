"""ReportView → Markdown for a GitHub issue: verdict, evidence, suspects, classes, one stack.

A GitHub comment holds about 65,000 characters, so the text is hard-capped at ``MAX_CHARS``:
sections are added most-important first and the first one that does not fit is cut with a
pointer to the HTML report. Python names are full of Markdown syntax (``<module>`` is an HTML
tag to GitHub, ``__init__`` turns bold), so free text is escaped outside its `code spans`,
frames are always code, and table cells escape ``|``. Every value is also made one line with
its controls visible (``diag.text.markdown_escape``): a log file named ``"x\n## verdict:
PROGRESSING"`` must not become a heading of a public ticket, and ``@team`` in a thread name
must not page a team when the ticket is filed (``MarkdownText``). Every value is scrubbed by
the capture's redactor before it is escaped (``render_markdown(view, scrub)``): an escape
inside a secret is a spelling the last pass over the file would not know.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional

from diag.render import markdown_scale
from diag.render.view import RANK_COLUMNS, MachineView, ReportView, StackView
from diag.text.markdown_escape import MarkdownText

MAX_CHARS = 60_000
_CUT = "\n\n_… cut to fit a GitHub comment; see the HTML report for the rest._\n"
_PLAIN = MarkdownText()  # no scrubber: for text that holds no target value


def text(value: str) -> str:
    """Escape Markdown/HTML syntax in ``value`` except inside its `code spans` (unscrubbed)."""
    return _PLAIN.text(value)


def inline(value: str) -> str:
    """A value in the middle of a line or a table cell (unscrubbed)."""
    return _PLAIN.inline(value)


def code(value: str) -> str:
    """``value`` as an inline code span it cannot close early (unscrubbed)."""
    return _PLAIN.code(value)


# A pipe not already escaped: after an even number of backslashes (``\\|`` splits a GFM row).
_BARE_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")


def _cell(value: str) -> str:
    return _BARE_PIPE.sub(r"\1\\|", value).replace("\n", " ") or " "


def _table(header: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _stack_block(stack: StackView, md: MarkdownText) -> str:
    frames = "\n".join(f"  {md.verbatim(f.name)}  ({md.verbatim(f.where)})" for f in stack.frames)
    fence = "```"
    return fence + "\n" + frames.replace(fence, "'''") + "\n" + fence


def _suspect_stack(view: ReportView, md: MarkdownText) -> Optional[str]:
    by_anchor = {s.anchor: s for s in view.stacks}
    chosen = next((r for r in view.ranks if r.suspect and r.main_stack_anchor), None)
    if chosen is None:
        return None
    stack = by_anchor.get(chosen.main_stack_anchor)
    if stack is None:
        return None
    title = f"### Stack of the suspect: {md.text(chosen.title)} (main thread, innermost first)"
    return f"{title}\n\n{_stack_block(stack, md)}"


def _header(view: ReportView, md: MarkdownText) -> List[str]:
    b, m = view.banner, view.meta
    head = f"## diag: {md.inline(b.state.upper())}"
    if b.confidence_pct is not None:
        head += f" (confidence {b.confidence_pct}%)"
    parts: List[str] = [head]
    if b.summary:
        parts.append(f"> {md.text(b.summary)}")
    if b.decided_by:
        why = f"**Decided by** {md.code(b.decided_by)}"
        if b.also_matched:
            why += "; also matched: " + "; ".join(md.text(m) for m in b.also_matched)
        parts.append(why)
    if b.problems:
        parts.append("\n".join(f"> **Judged without:** {md.text(p)}" for p in b.problems))
    capture = f"**Capture:** {md.inline(m.span)}, {md.inline(m.counts)}"
    if m.command:
        capture += "; " + md.code(m.command)
    if not m.complete:
        capture += " — **cut short** (rebuilt from the journal)"
    if b.source == "computed":
        capture += " — verdict computed when this report was rendered"
    parts.append(capture)
    return parts


def _bar(pct: Optional[int], width: int = 10) -> str:
    if pct is None:
        return ""
    full = round(pct * width / 100)
    return code("█" * full + "░" * (width - full)) + " "


def _startup(view: ReportView, md: MarkdownText) -> List[str]:
    b = view.banner
    parts: List[str] = []
    if b.warnings:
        parts.append("\n".join(f"> **Warning:** {md.text(w)}" for w in b.warnings))
    if b.phases:
        rows = [
            [md.text(ph.label), md.text(ph.phase), _bar(ph.bar_pct) + md.text(ph.text),
             md.text(ph.basis), md.text(ph.evidence)]
            for ph in b.phases
        ]  # fmt: skip
        header = ["process", "phase", "progress", "basis", "evidence"]
        parts.append("### Startup phases\n\n" + _table(header, rows))
    if b.history:  # a watch: each state of the verdict, since when, for how long
        rows = [[md.inline(h.state), md.text(h.since), md.text(h.held), md.code(h.rule)]
                for h in b.history]  # fmt: skip
        parts.append("### Verdict history\n\n" + _table(["verdict", "since", "held", "rule"], rows))
    return parts


def _stragglers(view: ReportView, md: MarkdownText) -> List[str]:
    """Who the ranks wait for: the sentence, and a bar per rank kept (stragglers first)."""
    st = view.stragglers
    if st is None:
        return []
    rows = [
        [md.text(r.label) + (" **(straggler)**" if r.suspect else ""), md.text(r.host),
         _bar(r.wait_pct) + md.text(r.wait_text), md.text(r.compute_text), r.main_cpu,
         md.text(r.vs_busiest), md.text(r.flight_recorder)]
        for r in st.rows
    ]  # fmt: skip
    header = ["rank", "node", "waits for others", "computes", "main CPU", "vs the busiest",
              "Flight Recorder"]  # fmt: skip
    more = f"\n\n_{md.text(st.more)}_" if st.more else ""
    return [f"### Stragglers\n\n{md.text(st.summary)}\n\n" + _table(header, rows) + more]


def _machine(view: ReportView, md: MarkdownText) -> List[str]:
    """What bounds each process's CPU: the host's load, and a row per process (held first)."""
    m = view.machine
    if m is None:
        return []
    mem = any(r.memory for r in m.rows)  # a column only where a memory group was read
    rows = [
        [md.text(r.label) + (f" **({md.text(r.held)})**" if r.held else ""), md.text(r.limit),
         md.text(r.throttled), md.text(r.run_delay), md.text(r.runnable), md.text(r.priority),
         md.text(r.cpuset)] + ([md.text(r.memory)] if mem else [])
        for r in m.rows
    ]  # fmt: skip
    header = ["process", "CPU limit", "throttled", "run-queue delay", "runnable", "priority",
              "cpuset"] + (["memory"] if mem else [])  # fmt: skip
    host = f"Host: {md.text(m.host_line)}\n\n" if m.host_line else ""
    more = f"\n\n_{md.text(m.more)}_" if m.more else ""
    cpu = _table(header, rows) + more if m.rows else ""
    return [f"### Machine\n\n{host}" + cpu + _machine_gpus(m, md)]


def _machine_gpus(m: MachineView, md: MarkdownText) -> str:
    """Per GPU: its clock against its ceiling, throttle reasons, XIDs, ECC, PCIe replays."""
    if not m.gpus:
        return ""
    rows = [
        [md.text(g.label) + (f" **({md.text(g.held)})**" if g.held else ""), md.text(g.owner),
         md.text(g.clock), md.text(g.reasons), md.text(g.xids), md.text(g.ecc),
         md.text(g.pcie_replays), md.text(g.pages), md.text(g.faults), md.text(g.unread)]
        for g in m.gpus
    ]  # fmt: skip
    header = ["GPU", "held by", "SM clock", "throttle reasons", "XIDs", "ECC", "PCIe replays",
              "rows / pages", "faults", "not read"]  # fmt: skip
    lead = "\n\n" if m.rows else ""
    return f"{lead}GPUs (NVML):\n\n" + _table(header, rows)


def render_markdown(view: ReportView, scrub: Optional[Callable[[str], str]] = None) -> str:
    """The ticket text of ``view``; ``scrub`` (the capture's ``Redactor.scrub``) is applied to
    every value before it is escaped - ``write_reports`` passes it, and scrubs the file after."""
    md = MarkdownText(scrub)
    parts = _header(view, md)
    parts[1:1] = markdown_scale.lead(view, md)  # at scale: the suspect node and rank, first
    parts += _startup(view, md)
    b = view.banner
    if b.suspects:
        lines = [
            f"- **{md.text(s.label)}**"
            + (f": {md.text(s.reason)}" if s.reason else "")
            + (f"\n  - why: {md.text(s.chain)}" if s.chain else "")
            for s in b.suspects
        ]
        parts.append("### Suspects\n\n" + "\n".join(lines))
    if view.graph is not None and view.graph.chains:
        # The chains of waits, each to where it ends (the verdict's wait-for graph).
        lines = [f"- {md.text(c)}" for c in view.graph.chains]
        parts.append("### Who waits on whom\n\n" + "\n".join(lines))
    parts += _stragglers(view, md)
    parts += _machine(view, md)
    if view.evidence:
        items = []
        for n, e in enumerate(view.evidence, 1):
            extra = ", ".join(md.inline(x) for x in (e.ranks_text, e.samples_text) if x)
            items.append(
                f"{n}. {md.code(e.signal)} {md.text(e.detail)}" + (f" ({extra})" if extra else "")
            )
        parts.append("### Evidence\n\n" + "\n".join(items))
    if view.matrix.classes:
        rows = [
            [md.text(c.label), md.inline(c.ranks_text), md.code(c.signature)]
            for c in view.matrix.classes
        ]
        parts.append(
            "### Equivalence classes\n\n" + _table(["class", "processes", "signature"], rows)
        )
    if view.matrix.legend:
        rows = [
            [md.code(e.letter), md.code(e.top) if e.stack_anchor else md.text(e.top),
             md.code(e.where), md.inline(e.ranks_text)]
            for e in view.matrix.legend
        ]  # fmt: skip
        header = ["sig", "innermost frame", "call chain", "seen on"]
        parts.append("### Main-thread stack signatures\n\n" + _table(header, rows))
    stack = _suspect_stack(view, md)
    if stack:
        parts.append(stack)
    parts += markdown_scale.sections(view, md)
    if view.rank_table:
        header = list(RANK_COLUMNS)
        rows = [
            [md.text(r.label) + (" **(suspect)**" if r.suspect else ""), md.text(r.role),
             str(r.pid), f"**{md.inline(r.badge)}**" if r.badge else md.inline(r.status),
             md.inline(r.state), md.inline(r.cpu_pct), md.inline(r.rss), str(r.threads),
             md.code(r.signature), md.code(r.top)]
            for r in view.rank_table
        ]  # fmt: skip
        parts.append("### Processes (last sample)\n\n" + _table(header, rows))
    if view.failures:
        parts.append(
            f"_{len(view.failures) + view.failures_more} probe failure(s); see the HTML report._"
        )
    # The version and time come from the bundle, which a remote node (or anyone) may craft.
    meta = view.meta
    parts.append(
        f"<sub>diag {md.inline(meta.diag_version)} · captured {md.inline(meta.created)}</sub>"
    )
    return _cap(parts)


def _cap(parts: List[str]) -> str:
    out = ""
    for part in parts:
        piece = part + "\n\n"
        if len(out) + len(piece) + len(_CUT) > MAX_CHARS:
            cut = piece[: max(0, MAX_CHARS - len(out) - len(_CUT))]
            if cut.count("```") % 2:  # never leave a code block open
                cut = cut[: cut.rfind("```")]
            return (out + cut).rstrip() + _CUT
        out += piece
    return out.rstrip() + "\n"
