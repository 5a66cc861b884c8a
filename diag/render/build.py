"""Bundle (+ verdict) → ReportView: the single place where report content is decided.

Pure: no I/O, no clock, no environment, so the same bundle always gives the same view (golden
tests) and the three renderers (HTML, Markdown, terminal) only format what is here. Bounded:
every list a long capture could grow (failures, log lines, stack runs, matrix columns,
timeline points) is capped here, which keeps a day-long bundle's report to a few MB.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Sequence, Tuple

import msgspec

from diag.model import Bundle, Evidence, RankPhase, Verdict, history_spans, main_thread
from diag.render import facts, fmt, scale
from diag.render.extras import build_collectives, build_hosts, build_nccl_logs, build_ras
from diag.render.index import BundleIndex
from diag.render.machine import build_machine
from diag.render.matrix import build_matrix
from diag.render.ranks import build_futex_groups, build_ranks
from diag.render.series import build_gpu
from diag.render.series import build_timelines as _timelines
from diag.render.stacks import StackRegistry, top
from diag.render.stragglers import build_stragglers
from diag.render.view import (
    Banner,
    EvidenceView,
    HistoryView,
    Matrix,
    Meta,
    PhaseView,
    RankSummary,
    ReportView,
    SuspectView,
)
from diag.render.waitgraph import build_graph
from diag.text.units import rank_set

# Report anchors an Evidence.section may name (the verdict links its evidence to them).
SECTIONS: Dict[str, str] = {
    "verdict": "Verdict",
    "evidence": "Evidence",
    "timelines": "Timelines",
    "matrix": "Stack matrix",
    "ranks": "Ranks",
    "stacks": "Distinct stacks",
    "futex": "Futex wait groups",
    "stragglers": "Stragglers: who the ranks wait for",
    "machine": "Machine: what bounds each process's CPU",
    "gpu": "GPU",
    "collectives": "Collectives (Flight Recorder, NCCL RAS)",
    "nccl-logs": "NCCL log lines",
    "hosts": "Hosts",
    "env": "Environment",
    "host": "Host",
    "logs": "Logs",
    "failures": "Probe failures",
}
# Other words a classifier may use for the same sections.
_ALIASES = {
    "stack": "matrix",
    "classes": "matrix",
    "cpu": "timelines",
    "io": "timelines",
    "rss": "timelines",
    "memory": "timelines",
    "timeline": "timelines",
    "log": "logs",
    "flight-recorder": "collectives",
    "fr": "collectives",
    "ras": "collectives",
    "nccl": "nccl-logs",
    "nccl_logs": "nccl-logs",
    "host": "host",
    "nodes": "hosts",
    "threads": "ranks",
    "ports": "ranks",
    "exit": "ranks",
    "process": "ranks",
    "nvml": "gpu",
    "environment": "env",
    "probes": "failures",
}
_RANK_SECTION = re.compile(r"^(?:rank)[-_ ]?(\d+)$")
_PID_SECTION = re.compile(r"^(?:pid)[-_ ]?(\d+)$")
_STATE_CSS = {
    "progressing": "ok",
    "slow": "warn",
    "idle": "info",
    "deadlocked": "bad",
    "exited": "bad",
}


def build_view(
    bundle: Bundle, verdict: Optional[Verdict] = None, source: str = "bundle"
) -> ReportView:
    if verdict is None and source == "bundle":
        verdict = bundle.verdict
    if verdict is None:
        source = "none"
    index = BundleIndex(bundle, verdict)
    reg = StackRegistry(index.stacks)
    # Past SCALE_RANKS ranks the per-process sections draw a few of each class (render.scale).
    big = scale.at_scale(index)
    part = scale.restrict(index, scale.shown(index, verdict)) if big else index
    futex_groups, futex_labels, futex_note = build_futex_groups(part)
    ranks = build_ranks(part, reg, futex_labels)
    banner = _banner(index, verdict, source)
    if bundle.verdict_history:
        banner = msgspec.structs.replace(banner, history=_history(bundle))
    if banner.phases:
        by_anchor = {ph.anchor: ph for ph in banner.phases}
        ranks = tuple(
            msgspec.structs.replace(r, phase=by_anchor[r.anchor]) if r.anchor in by_anchor else r
            for r in ranks
        )
    matrix = build_matrix(part, reg)
    failures, failures_more = facts.failures(index)
    view = ReportView(
        meta=_meta(index, verdict),
        banner=banner,
        evidence=_evidence(index, verdict, big),
        timelines=_timelines(part),
        matrix=matrix,
        ranks=ranks,
        rank_table=_rank_table(part, reg, matrix),
        stacks=reg.views(),
        futex_groups=futex_groups,
        futex_note=futex_note,
        gpu=build_gpu(index, set(part.hosts) if big else None),
        env_common=facts.env_common(index),
        env_diffs=facts.env_diffs(part),
        host_facts=facts.host_facts(bundle),
        commands=facts.commands(part),
        logs=facts.logs(index),
        failures=failures,
        failures_more=failures_more,
        timings=facts.timings(bundle),
        collectives=build_collectives(index),
        ras=build_ras(index),
        nccl_logs=build_nccl_logs(index),
        hosts=build_hosts(bundle),
        graph=build_graph(index, verdict),
        stragglers=build_stragglers(index, verdict),
        machine=build_machine(index, verdict),
    )
    return scale.finish(view, index, part, verdict, reg) if big else view


def _meta(index: BundleIndex, verdict: Optional[Verdict]) -> Meta:
    b = index.bundle
    state = verdict.state if verdict is not None else "no verdict"
    root = next((p.info for p in index.procs if p.key[1] == b.target.root_pid), None)
    if b.target.command:
        cmd = fmt.command(b.target.command)
    elif root is not None and root.cmdline:  # attached by pid: show what that pid runs
        cmd = f"pid {b.target.root_pid}: " + fmt.clip(fmt.command(root.cmdline), 200)
    else:
        cmd = f"pid {b.target.root_pid}" if b.target.root_pid else ""
    return Meta(
        title=fmt.clip(f"diag: {state} · {cmd or 'capture'}", 120),
        created=fmt.utc(b.created_s),
        span=f"{fmt.utc(index.t_first_s)} → {fmt.utc(index.t_last_s)} "
        f"({fmt.duration(index.t_last_s - index.t_first_s)})",
        samples=len(b.samples),
        processes=len(index.procs),
        counts=f"{fmt.count(len(b.samples), 'sample')}, "
        f"{fmt.count(len(index.procs), 'process', 'processes')}",
        hosts=tuple(h for h in index.hosts if h),
        complete=b.complete,
        command=cmd,
        diag_version=b.host.diag_version,
        schema_version=b.schema_version,
    )


def _history(bundle: Bundle) -> Tuple[HistoryView, ...]:
    """The watch's verdict changes, each with how long it held (to the next, or the end)."""
    return tuple(
        HistoryView(
            state=change.state,
            css=_STATE_CSS.get(change.state, "none"),
            since=fmt.utc(change.t_s),
            held=fmt.duration(held_s),
            rule=change.rule,
        )
        for change, held_s in history_spans(bundle)
    )


def _banner(index: BundleIndex, verdict: Optional[Verdict], source: str) -> Banner:
    if verdict is None:
        return Banner(
            state="no verdict",
            css="none",
            has_verdict=False,
            source="none",
            summary="This bundle carries no verdict and none could be computed.",
        )
    suspects = []
    for s in verdict.suspects:
        proc = index.proc_for_pid(s.pid, s.host)
        label = (
            proc.label if proc is not None else (f"rank {s.rank}" if s.rank is not None else "pid")
        )
        pid = f"pid {s.pid}" if s.pid else "pid unknown: gone before diag looked"
        label += f" ({pid}{', ' + s.host if s.host else ''})"
        suspects.append(
            SuspectView(
                label=label, reason=s.reason, anchor=proc.anchor if proc else "", chain=s.chain
            )
        )
    return Banner(
        state=verdict.state,
        css=_STATE_CSS.get(verdict.state, "none"),
        has_verdict=True,
        source=source,
        confidence_pct=round(verdict.confidence * 100),
        summary=verdict.summary,
        suspects=tuple(suspects),
        phases=tuple(_phase_view(index, ph) for ph in verdict.phases),
        warnings=verdict.warnings,
        decided_by=verdict.rule or "not recorded (a bundle written before diag recorded rules)",
        also_matched=tuple(
            f"{m.rule} → {m.state}" + (f" (overruled: {m.overruled})" if m.overruled else "")
            for m in verdict.also_matched
        ),
        problems=verdict.problems,
    )


def _phase_view(index: BundleIndex, ph: RankPhase) -> PhaseView:
    proc = index.proc_for_pid(ph.pid, ph.host)
    label = proc.label if proc is not None else (f"rank {ph.rank}" if ph.rank is not None else "")
    parts = []
    if ph.progress_pct is not None:
        parts.append(f"{ph.progress_pct:.0f}%")
    if ph.eta_s is not None:
        parts.append(f"ETA {fmt.duration(ph.eta_s)}")
    elif ph.progress_pct is not None:
        parts.append("no ETA")
    bar = None if ph.progress_pct is None else max(0, min(100, round(ph.progress_pct)))
    return PhaseView(
        label=label or f"pid {ph.pid}",
        anchor=proc.anchor if proc is not None else "",
        phase=ph.phase,
        text=" · ".join(parts),
        bar_pct=bar,
        basis=ph.basis,
        evidence=ph.evidence,
    )


def section_anchor(
    index: BundleIndex, section: str, ranks: Sequence[int], pids: Sequence[int]
) -> str:
    key = section.strip().lower().lstrip("#")
    if key in SECTIONS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    m = _RANK_SECTION.match(key)
    if m and int(m.group(1)) in index.by_rank:
        return index.by_rank[int(m.group(1))].anchor
    m = _PID_SECTION.match(key)
    proc = index.proc_for_pid(int(m.group(1))) if m else None
    if proc is not None:
        return proc.anchor
    if ranks and ranks[0] in index.by_rank:
        return index.by_rank[ranks[0]].anchor
    proc = index.proc_for_pid(pids[0]) if pids else None
    return proc.anchor if proc is not None else "ranks"


def _evidence(
    index: BundleIndex, verdict: Optional[Verdict], big: bool = False
) -> Tuple[EvidenceView, ...]:
    """The verdict's evidence, each item linked to its section; at scale folded per signal."""
    if verdict is None:
        return ()
    titles = {p.anchor: p.label for p in index.procs}

    def view(ev: Evidence) -> EvidenceView:
        anchor = section_anchor(index, ev.section, ev.ranks, ev.pids)
        return EvidenceView(
            signal=ev.signal,
            detail=ev.detail,
            anchor=anchor,
            section_title=SECTIONS.get(anchor) or titles.get(anchor, anchor),
            ranks_text=rank_set(ev.ranks) if ev.ranks else "",
            samples_text=("samples " + fmt.runs(ev.samples)) if ev.samples else "",
        )

    if big:
        return scale.fold_evidence(verdict.evidence, view)
    return tuple(view(ev) for ev in verdict.evidence)


def _rank_table(index: BundleIndex, reg: StackRegistry, matrix: Matrix) -> Tuple[RankSummary, ...]:
    last_letter = {row.anchor: row.cells[-1].letter for row in matrix.rows if row.cells}
    clk = index.bundle.host.clk_tck or 100
    out = []
    for proc in index.procs:
        last = proc.last
        if last is None:
            continue
        first = proc.samples[0][1]
        span = last.t_s - first.t_s
        ticks = (last.utime_ticks + last.stime_ticks) - (first.utime_ticks + first.stime_ticks)
        thread = main_thread(last)
        out.append(
            RankSummary(
                label=proc.label,
                role=proc.role,
                anchor=proc.anchor,
                pid=proc.key[1],
                host=proc.key[0],
                status=last.status,
                state=last.state,
                cpu_pct=f"{max(0, ticks) / clk / span * 100:.0f}%" if span > 0 else "–",
                rss=fmt.size(last.rss_bytes),
                threads=last.num_threads or len(last.threads),
                signature=last_letter.get(proc.anchor, ""),
                top=top(reg.get(thread.stack_id)) if thread is not None else "",
                suspect=proc.is_suspect,
                badge=proc.badge,
            )
        )
    return tuple(out)
