"""The evidence every verdict shows, whatever its state: one item per observation.

Each item names its signal, the ranks/pids and samples it came from, and the report section
(anchor id) that shows it, so a reader can check every claim in the summary.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from diag.model import Bundle, Evidence, RankClass
from diag.text.units import rank_set
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.sources import Context
from diag.verdict.wording import short_label, size, who

_LIST_RANKS = 16  # more ranks than this in a class are named as ranges
SPIN_PCT = 30.0  # % of a core spent in an unchanged known wait worth reporting


def section_of(p: ProcSignals) -> str:
    return f"rank-{p.rank}" if p.rank is not None else f"pid-{p.pid}"


def evidence_for(ctx: Context, classes: Sequence[RankClass]) -> List[Evidence]:
    """The observations every verdict shows, whatever the state."""
    ev: List[Evidence] = []
    for p in ctx.participants:
        samples = tuple(p.samples)
        if p.dead:
            code = f" with exit code {p.exit_code}" if p.exit_code is not None else ""
            ev.append(
                Evidence(
                    signal="exited",
                    detail=f"{p.name}{f' (pid {p.pid})' if p.rank is not None else ''} is "
                    f"{p.statuses[-1]}{code} since sample {p.dead_since}",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section="timeline",
                )
            )
            continue
        if p.compute_pct >= COMPUTE_PCT:
            ev.append(
                Evidence(
                    signal="cpu",
                    detail=f"{p.name} burns {p.compute_pct:.0f}% of a "
                    f"core in `{short_label(p.hot_label)}` ({p.compute_intervals} of "
                    f"{p.intervals} intervals)",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section=section_of(p),
                )
            )
        if p.spin_pct >= SPIN_PCT:
            ev.append(
                Evidence(
                    signal="spin",
                    detail=f"{p.name} spins {p.spin_pct:.0f}% of a "
                    f"core in `{short_label(p.spin_label)}` with an unchanged stack: a wait, "
                    "not progress",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section=section_of(p),
                )
            )
        if p.read_delta_bytes >= 1 << 20:
            ev.append(
                Evidence(
                    signal="io",
                    detail=f"{p.name} read {size(p.read_delta_bytes)} in {p.window_s:.1f} s",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section="timeline",
                )
            )
        if abs(p.rss_delta_bytes) >= 16 << 20:
            ev.append(
                Evidence(
                    signal="memory",
                    detail=f"{p.name} RSS "
                    f"{'+' if p.rss_delta_bytes > 0 else ''}"
                    f"{size(p.rss_delta_bytes)} (now {size(p.rss_last_bytes)})",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section="timeline",
                )
            )
        for tid, addr, frame in p.lock_waiters:
            ev.append(
                Evidence(
                    signal="futex",
                    detail=f"{p.name} thread {tid} blocked on lock "
                    f"{addr or '?'} in `{short_label(frame)}` in every sample",
                    ranks=_r(p),
                    pids=(p.pid,),
                    samples=samples,
                    section="futex",
                )
            )
    for lg in ctx.logs:
        name = lg.path.rsplit("/", 1)[-1]
        if lg.heartbeat:
            detail = f"log {name} only repeats a waiting line: not progress"
        elif lg.grew:
            detail = (
                f"log {name} grew {lg.grew_lines} lines ({size(lg.grew_bytes)}) in "
                f"{len(lg.samples)} of {lg.intervals} intervals"
            )
        else:
            detail = (
                f"log {name} silent during the capture (bursty logs: silence alone proves little)"
            )
        ev.append(
            Evidence(signal="log", detail=detail, pids=lg.pids, samples=lg.samples, section="logs")
        )
    ports = sorted({port for p in ctx.procs if not p.dead for port in p.listen_ports})
    if ports:
        owners = [p for p in ctx.procs if p.listen_ports and not p.dead]
        ev.append(
            Evidence(
                signal="ports",
                detail=f"{who(owners)} listen on " + ", ".join(f":{port}" for port in ports[:8]),
                pids=tuple(p.pid for p in owners),
                section="matrix",
            )
        )
    if len(classes) > 1:
        text = "; ".join(f"{_members(c)}: {c.label}" for c in classes[:5])
        ev.append(
            Evidence(
                signal="stacks",
                detail=f"main-thread stacks differ: {text}",
                ranks=tuple(r for c in classes for r in c.ranks),
                section="matrix",
            )
        )
    return ev


def _r(p: ProcSignals) -> Tuple[int, ...]:
    return (p.rank,) if p.rank is not None else ()


def _members(c: RankClass) -> str:
    if len(c.ranks) > _LIST_RANKS:  # thousands of ranks: as ranges ("ranks 0-84, 86-4095")
        return rank_set(c.ranks)
    if c.ranks:
        return ("rank " if len(c.ranks) == 1 else "ranks ") + ",".join(map(str, c.ranks))
    return ("pid " if len(c.pids) == 1 else "pids ") + ",".join(map(str, c.pids))


def exit_evidence(
    bundle: Bundle, procs: Sequence[ProcSignals]
) -> Tuple[Optional[int], List[Evidence]]:
    """The exit code (the target's, else the root process's) and what shows the job is gone:
    when it went, and its last words - the lines the logs ended with (already redacted)."""
    code = bundle.target.exit_code
    root = next((p for p in procs if p.pid == bundle.target.root_pid), None)
    if code is None and root is not None:
        code = root.exit_code
    gone_at = max((p.dead_since for p in procs if p.dead_since is not None), default=None)
    detail = f"no process of the target is alive in sample {bundle.samples[-1].index}"
    evidence = [
        Evidence(
            signal="exited",
            detail=detail,
            pids=tuple(p.pid for p in procs),
            samples=(gone_at,) if gone_at is not None else (),
            section="timeline",
        )
    ]
    for log in bundle.samples[-1].logs:
        if log.tail:
            last_lines = "\n".join(log.tail[-5:])
            evidence.append(Evidence(signal="last log lines", detail=last_lines, section="logs"))
    return code, evidence
