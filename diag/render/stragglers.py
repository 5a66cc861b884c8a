"""The verdict's straggler analysis → the report's "who waits for whom" bars.

One row per rank the verdict kept (the stragglers first, then the ranks that wait least),
each with a "waits for others" bar: the share of samples its main thread spent in a peer wait.
The rank the others wait for shows a short bar beside their long ones. Pure, bounded by the
verdict's own cap on rows.
"""

from __future__ import annotations

from typing import Optional

from diag.model import RankLoad, Verdict
from diag.render.index import BundleIndex
from diag.render.view_stragglers import StragglerRow, StragglersView

_BASIS = {
    "samples": "main-thread samples and CPU",
    "own-wait": "main-thread samples: where it waits, not on its peers",
    "flight-recorder": "Flight Recorder enqueue times",
    "gpu-throttle": "its GPU's SM clock and throttle reasons (NVML) against the other ranks' GPUs",
    "none": "main-thread samples and CPU",
}


def _fr_text(r: RankLoad) -> str:
    parts = []
    if r.fr_last_seq is not None:
        parts.append(f"#{r.fr_last_seq}")
    if r.fr_enqueue_lag_ms is not None:
        parts.append(f"enqueues +{r.fr_enqueue_lag_ms:.0f} ms")
    if r.fr_duration_ms is not None:
        parts.append(f"{r.fr_duration_ms:.0f} ms each")
    return ", ".join(parts)


def _row(index: BundleIndex, r: RankLoad, suspect: bool, busiest: RankLoad) -> StragglerRow:
    proc = index.by_key.get((r.host, r.pid))
    op = f" in {r.wait_op}" if r.wait_op else ""
    return StragglerRow(
        label=f"rank {r.rank}",
        anchor=proc.anchor if proc is not None else "",
        host=r.host,
        wait_pct=max(0, min(100, round(r.peer_wait_share * 100))),
        wait_text=f"{r.peer_wait_share * 100:.0f} % ({r.peer_wait_samples} of {r.samples}){op}",
        compute_text=f"{r.compute_share * 100:.0f} % ({r.compute_samples} of {r.samples})",
        main_cpu=f"{r.main_cpu_pct:.0f} %",
        cpu=f"{r.cpu_pct:.0f} %",
        vs_busiest=(
            f"{r.main_cpu_pct / busiest.main_cpu_pct * 100:.0f} % of rank {busiest.rank}'s"
            if busiest.main_cpu_pct > 0 and r is not busiest
            else ("the busiest" if r is busiest else "")
        ),
        flight_recorder=_fr_text(r),
        suspect=suspect,
    )


def build_stragglers(index: BundleIndex, verdict: Optional[Verdict]) -> Optional[StragglersView]:
    """None when the verdict carries no analysis (one rank, another state, an old bundle)."""
    analysis = verdict.stragglers if verdict is not None else None
    if analysis is None:
        return None
    named = set(analysis.suspects)
    if not analysis.ranks:
        return None
    busiest = max(analysis.ranks, key=lambda r: r.main_cpu_pct)
    rows = tuple(_row(index, r, r.rank in named, busiest) for r in analysis.ranks)
    more = f"{analysis.ranks_more:,} more ranks not shown" if analysis.ranks_more else ""
    return StragglersView(
        summary=analysis.summary,
        named=bool(named),
        basis=_BASIS.get(analysis.basis, analysis.basis),
        nodes=", ".join(analysis.suspect_hosts),
        rows=rows,
        more=more,
    )
