"""The evidence every verdict shows, whatever its state: one item per observation.

Each item names its signal, the ranks/pids and samples it came from, and the report section
(anchor id) that shows it, so a reader can check every claim in the summary.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from diag.model import Bundle, Evidence, RankClass
from diag.text.units import rank_set
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.progress import LogGrowth
from diag.verdict.sources import Context
from diag.verdict.wording import log_moved, short_label, size, who
from diag.vocab import EvidenceSignal

_LIST_RANKS = 16  # more ranks than this in a class are named as ranges
SPIN_PCT = 30.0  # % of a core spent in an unchanged known wait worth reporting
# Worth showing as evidence, below what counts as work (``situation``): a reader checks the
# verdict's claim against smaller moves too (a read of 1 MiB, memory +16 MiB either way).
READ_EVIDENCE_BYTES = 1 << 20
RSS_EVIDENCE_BYTES = 16 << 20


def section_of(p: ProcSignals) -> str:
    return f"rank-{p.rank}" if p.rank is not None else f"pid-{p.pid}"


def evidence_for(ctx: Context, classes: Sequence[RankClass]) -> List[Evidence]:
    """The observations every verdict shows, whatever the state."""
    ev: List[Evidence] = []
    for p in ctx.participants:
        ev.extend(_process_evidence(p))
    ev.extend(_log_evidence(lg) for lg in ctx.logs)
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


def _process_evidence(p: ProcSignals) -> List[Evidence]:
    """What one participant shows: its exit, CPU, a spin in a wait, reads, memory, locks."""
    samples = tuple(p.samples)

    def item(signal: EvidenceSignal, detail: str, section: str) -> Evidence:
        return Evidence(
            signal=signal, detail=detail, ranks=_r(p), pids=(p.pid,), samples=samples,
            section=section,
        )  # fmt: skip

    if p.dead:
        code = f" with exit code {p.exit_code}" if p.exit_code is not None else ""
        pid = f" (pid {p.pid})" if p.rank is not None else ""
        text = f"{p.name}{pid} is {p.statuses[-1]}{code} since sample {p.dead_since}"
        return [item("exited", text, "timeline")]
    out: List[Evidence] = []
    if p.compute_pct >= COMPUTE_PCT:
        text = (
            f"{p.name} burns {p.compute_pct:.0f}% of a core in `{short_label(p.hot_label)}` "
            f"({p.compute_intervals} of {p.intervals} intervals)"
        )
        out.append(item("cpu", text, section_of(p)))
    spin = p.native_spin
    if p.spin_pct >= SPIN_PCT and spin is not None and spin.hint is not None:
        place = f"{spin.library}:`{short_label(spin.symbol)}`" if spin.symbol else spin.library
        text = (
            f"{p.name} spins {p.spin_pct:.0f}% of a core in a {spin.hint.upper()} loop at "
            f"{place} for {p.window_s:.0f} s with an unchanged stack: a busy-wait, not progress"
        )
        out.append(item("spin", text, section_of(p)))
    elif p.spin_pct >= SPIN_PCT:
        text = (
            f"{p.name} spins {p.spin_pct:.0f}% of a core in `{short_label(p.spin_label)}` "
            "with an unchanged stack: a wait, not progress"
        )
        out.append(item("spin", text, section_of(p)))
    if p.read_delta_bytes >= READ_EVIDENCE_BYTES:
        text = f"{p.name} read {size(p.read_delta_bytes)} in {p.window_s:.1f} s"
        out.append(item("io", text, "timeline"))
    if abs(p.rss_delta_bytes) >= RSS_EVIDENCE_BYTES:
        sign = "+" if p.rss_delta_bytes > 0 else ""
        text = f"{p.name} RSS {sign}{size(p.rss_delta_bytes)} (now {size(p.rss_last_bytes)})"
        out.append(item("memory", text, "timeline"))
    for tid, addr, frame in p.lock_waiters:
        text = (
            f"{p.name} thread {tid} blocked on lock {addr or '?'} in `{short_label(frame)}` in "
            "every sample"
        )
        out.append(item("futex", text, "futex"))
    return out


def _log_evidence(lg: LogGrowth) -> Evidence:
    name = lg.path.rsplit("/", 1)[-1]
    if lg.heartbeat and lg.redrawn:
        detail = log_moved(name, lg.grew_lines, lg.grew_bytes, lg.redrawn) + ": not progress"
    elif lg.heartbeat:
        detail = f"log {name} only repeats a waiting line: not progress"
    elif lg.grew:
        detail = (
            f"{log_moved(name, lg.grew_lines, lg.grew_bytes, lg.redrawn)} in "
            f"{len(lg.samples)} of {lg.intervals} intervals"
        )
    else:
        detail = f"log {name} silent during the capture (bursty logs: silence alone proves little)"
    return Evidence(signal="log", detail=detail, pids=lg.pids, samples=lg.samples, section="logs")


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
