"""The report's machine section: per host its CPU demand against its cores, and per process
what bounded its CPU over the capture - its cgroup's limit and the share of periods throttled,
its run-queue delay, nice and policy, cpuset, CPU pressure. The figures over the capture are
the verdict's own (``Verdict.cpu_holds``, from ``diag.verdict.machine``), so the table says
what the verdict read; the limit, priority and cpuset are the last sample's.

Per GPU (issue #37): its median SM clock against its ceiling, the clock-event reasons set in
most samples, XIDs, ECC, PCIe replays, remapped rows / retired pages, what NVML refused -
the verdict's ``Verdict.gpu_health``, so the table says what the verdict read.

Shown for verdicts that carry them (bundles written since issue #37); bounded by the
verdict's own caps, the processes the machine holds back first.
"""

from __future__ import annotations

from typing import Optional

from diag.model import CLOCK_EVENT_WORDS, Bundle, CpuHoldRecord, CpuLimits, GpuHealthRecord, Verdict
from diag.render.index import BundleIndex
from diag.render.view_machine import MachineGpuRow, MachineRow, MachineView
from diag.text.units import size

_HELD = {"limit": "CPU limit", "priority": "low priority", "queue": "run queue"}


def _host_line(bundle: Bundle) -> str:
    for sample in reversed(bundle.samples):
        h = sample.host_load
        if h is None:
            continue
        line = f"load {h.load1:.1f} on {h.cpus} core{'s' if h.cpus != 1 else ''}"
        line += f", {h.runnable} runnable"
        if h.psi_some_avg10 is not None:
            line += f"; CPU pressure (some, 10 s) {h.psi_some_avg10:.0f} %"
        return line
    return ""


def _limit(c: Optional[CpuLimits]) -> str:
    if c is None or c.version is None:
        return "?"
    if c.quota_cores is None:
        return f"none ({c.version})"
    return f"{c.quota_cores:.2f} of a core ({c.limit_group or c.group}, {c.version})"


def _throttled(hold: CpuHoldRecord) -> str:
    if hold.throttled_share is None:
        return ""
    secs = f", {hold.throttled_s:.1f} s" if hold.throttled_s is not None else ""
    return f"{hold.throttled_share * 100:.0f} % of periods{secs}"


def _priority(c: Optional[CpuLimits]) -> str:
    if c is None:
        return ""
    return f"nice {c.nice}, {c.policy}" if c.nice else c.policy


def _cpuset(c: Optional[CpuLimits]) -> str:
    if c is None:
        return ""
    return f"{c.cpuset} ({c.cpuset_cpus} CPUs)" if c.cpuset_cpus else c.cpuset


def _memory(hold: CpuHoldRecord) -> str:
    """Its group's usage against its limit, limit events, major faults and reclaim."""
    parts = []
    if hold.mem_usage_bytes is not None:
        used = size(hold.mem_usage_bytes)
        if hold.mem_limit_bytes:
            share = hold.mem_usage_bytes / hold.mem_limit_bytes * 100
            used += f" of {size(hold.mem_limit_bytes)} ({share:.0f} %)"
        parts.append(used)
    if hold.mem_limit_events:
        parts.append(f"{hold.mem_limit_events} limit events")
    if hold.major_faults_per_s >= 1:
        parts.append(f"{hold.major_faults_per_s:.0f} major faults/s")
    if hold.reclaim_samples:
        parts.append(f"in reclaim in {hold.reclaim_samples} samples")
    return ", ".join(parts)


def _row(index: BundleIndex, hold: CpuHoldRecord) -> MachineRow:
    proc = index.by_key.get((hold.host, hold.pid))
    last = proc.last if proc is not None else None
    c = last.cpu_limits if last is not None else None
    share = hold.run_delay_s / hold.window_s if hold.window_s > 0 else 0.0
    return MachineRow(
        label=proc.label if proc is not None else f"pid {hold.pid}",
        anchor=proc.anchor if proc is not None else "",
        host=hold.host,
        limit=_limit(c),
        throttled=_throttled(hold),
        run_delay=f"{hold.run_delay_s:.1f} s of {hold.window_s:.1f} s ({share * 100:.0f} %)",
        runnable=f"{hold.runnable_samples} of {hold.samples} samples" if hold.samples else "",
        priority=_priority(c),
        cpuset=_cpuset(c),
        pressure=(
            f"{c.pressure_some_avg10:.0f} %"
            if c is not None and c.pressure_some_avg10 is not None
            else ""
        ),
        held=_HELD.get(hold.cause, "") or ("memory" if hold.mem_pressure else ""),
        memory=_memory(hold),
    )


def _ecc(g: GpuHealthRecord) -> str:
    if g.ecc_uncorrected is None and g.ecc_corrected is None:
        return ""
    new = f" ({g.ecc_uncorrected_new} during the capture)" if g.ecc_uncorrected_new else ""
    return f"{g.ecc_uncorrected or 0} uncorrected{new}, {g.ecc_corrected or 0} corrected"


def _pages(g: GpuHealthRecord) -> str:
    parts = []
    if g.remapped_rows is not None:
        parts.append(f"{g.remapped_rows} rows remapped")
    if g.retired_pages is not None:
        parts.append(f"{g.retired_pages} pages retired")
    return ", ".join(parts)


def _gpu_row(index: BundleIndex, g: GpuHealthRecord) -> MachineGpuRow:
    proc = index.by_key.get((g.host, g.pid)) if g.pid is not None else None
    owner = f"rank {g.rank}" if g.rank is not None else (f"pid {g.pid}" if g.pid else "")
    clock = ""
    if g.sm_clock_mhz is not None:
        top = f" of {g.sm_clock_max_mhz:,}" if g.sm_clock_max_mhz else ""
        clock = f"{g.sm_clock_mhz:,}{top} MHz"
    xids = ", ".join(str(x) for x in sorted(set(g.xids)))
    replays = ""
    if g.pcie_replays is not None:
        grown = f" (+{g.pcie_replays_new} during the capture)" if g.pcie_replays_new else ""
        replays = f"{g.pcie_replays}{grown}"
    return MachineGpuRow(
        label=f"GPU {g.index}",
        host=g.host,
        owner=proc.label if proc is not None else owner,
        anchor=proc.anchor if proc is not None else "",
        clock=clock,
        reasons=", ".join(CLOCK_EVENT_WORDS.get(r, r) for r in g.reasons),
        xids=xids,
        ecc=_ecc(g),
        pcie_replays=replays,
        pages=_pages(g),
        faults="; ".join(g.faults),
        fatal=g.fatal,
        unread="; ".join(g.unread),
        held="failed" if g.fatal else ("throttled" if g.throttled else ""),
    )


def build_machine(index: BundleIndex, verdict: Optional[Verdict]) -> Optional[MachineView]:
    """None when the verdict carries no CPU holds and no GPU health (an older bundle)."""
    if verdict is None or not (verdict.cpu_holds or verdict.gpu_health):
        return None
    return MachineView(
        host_line=_host_line(index.bundle) if verdict.cpu_holds else "",
        rows=tuple(_row(index, h) for h in verdict.cpu_holds),
        gpus=tuple(_gpu_row(index, g) for g in verdict.gpu_health),
    )
