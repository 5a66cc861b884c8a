"""The seam for extra evidence sources, and the GPU one that ships with the classifier.

``classify`` derives its core verdict from CPU, stacks, I/O, memory and logs. Other sources
(NVML today; Flight Recorder, NCCL logs and RAS from the GPU/NCCL work) plug in as functions
``Context -> Iterable[Finding]`` registered in ``EVIDENCE_SOURCES``. A finding adds evidence and
suspects, and may *lean* the verdict: ``"stuck"`` (busy-looking but not progressing, e.g. a GPU
at 100% util and idle power), ``"work"`` (real work the CPU view cannot see, e.g. a GPU at full
power) or ``"progress"`` (a counter advanced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from diag.model import Bundle, Evidence, Suspect
from diag.probes.gpu import map_devices
from diag.progress import LogGrowth
from diag.signals import ProcSignals

STUCK = "stuck"
WORK = "work"
PROGRESS = "progress"

GPU_BUSY_UTIL_PCT = 90.0
GPU_IDLE_POWER_FRACTION = 0.35  # of the power limit: a spinning kernel draws little
GPU_IDLE_POWER_W = 120.0  # used when the limit is unknown
GPU_WORK_POWER_FRACTION = 0.5


@dataclass(frozen=True)
class Context:
    """What evidence sources may read: the bundle and the features already extracted."""

    bundle: Bundle
    procs: List[ProcSignals]
    participants: List[ProcSignals]
    logs: List[LogGrowth]


@dataclass(frozen=True)
class Finding:
    evidence: Evidence
    suspects: Tuple[Suspect, ...] = ()
    lean: Optional[str] = None  # STUCK | WORK | PROGRESS | None


EvidenceSource = Callable[[Context], Iterable[Finding]]


def _mean(values: List[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def gpu_findings(ctx: Context) -> Iterable[Finding]:
    """Fuse utilization with power: 100% util at idle power is a kernel spinning on a peer."""
    # Keyed by (host, NVML index): a merged bundle has a GPU 0 on every node.
    util: Dict[Tuple[str, int], List[float]] = {}
    power: Dict[Tuple[str, int], List[float]] = {}
    limit: Dict[Tuple[str, int], float] = {}
    pids: Dict[Tuple[str, int], set] = {}  # type: ignore[type-arg]
    samples: Dict[Tuple[str, int], List[int]] = {}
    for sample in ctx.bundle.samples:
        if sample.gpu is None or not sample.gpu.available:
            continue
        for dev in sample.gpu.devices:
            key = (dev.host, dev.index)
            if dev.util_gpu_pct is not None:
                util.setdefault(key, []).append(dev.util_gpu_pct)
                samples.setdefault(key, []).append(sample.index)
            if dev.power_w is not None:
                power.setdefault(key, []).append(dev.power_w)
            if dev.power_limit_w:
                limit[key] = dev.power_limit_w
            pids.setdefault(key, set()).update(p.pid for p in dev.processes)
    rank_of = {(p.key[0], p.pid): p.rank for p in ctx.procs}
    # In a container NVML's PIDs are the host's: map by CUDA_VISIBLE_DEVICES/LOCAL_RANK instead.
    last_gpu = next(
        (s.gpu for s in reversed(ctx.bundle.samples) if s.gpu and s.gpu.available), None
    )
    owners = map_devices(last_gpu, ctx.bundle.processes) if last_gpu else {}
    for key, values in sorted(util.items()):
        host, index = key
        name = f"GPU {index} on {host}" if host else f"GPU {index}"
        mean_util = _mean(values) or 0.0
        mean_power = _mean(power.get(key, []))
        if mean_power is None or mean_util < GPU_BUSY_UTIL_PCT:
            continue
        cap = limit.get(key)
        idle_w = cap * GPU_IDLE_POWER_FRACTION if cap else GPU_IDLE_POWER_W
        dev_pids = tuple(sorted(pids.get(key, set())))
        ranks = tuple(
            sorted(r for r in (rank_of.get((host, p)) for p in dev_pids) if r is not None)
        )
        owner_rank = owners[key][0].rank if key in owners else None
        if not ranks and owner_rank is not None:
            ranks = (owner_rank,)
        of_cap = f" of {cap:.0f} W" if cap else ""
        if mean_power <= idle_w:
            detail = (
                f"{name} reads {mean_util:.0f}% utilization at {mean_power:.0f} W{of_cap}: "
                "a kernel is resident but not computing (a collective spinning on a peer)"
            )
            lean = STUCK
        elif cap is None or mean_power >= cap * GPU_WORK_POWER_FRACTION:
            detail = f"{name} computes: {mean_util:.0f}% utilization at {mean_power:.0f} W{of_cap}"
            lean = WORK
        else:
            continue
        yield Finding(
            Evidence(
                signal="gpu",
                detail=detail,
                ranks=ranks,
                pids=dev_pids,
                samples=tuple(samples.get(key, ())),
                section="gpu",
            ),
            lean=lean,
        )


# Evidence sources run by classify, in order. Other modules append to this list.
EVIDENCE_SOURCES: List[EvidenceSource] = [gpu_findings]


def run_sources(ctx: Context) -> List[Finding]:
    """Run every registered source; a failing source is recorded, never fatal."""
    out: List[Finding] = []
    for source in EVIDENCE_SOURCES:
        try:
            out.extend(source(ctx))
        except Exception as exc:  # a bug in one source must not cost the verdict
            name = getattr(source, "__name__", "source")
            out.append(
                Finding(
                    Evidence(
                        signal="evidence-error",
                        detail=f"{name} failed: {type(exc).__name__}: {exc}",
                    )
                )
            )
    return out
