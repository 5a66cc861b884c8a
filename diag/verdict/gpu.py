"""GPUs → findings: which rank owns which GPU, and what utilization and power say together.

NVML "utilization" is the share of time any kernel is resident: a NCCL kernel spinning on a
peer that never arrives reads 100%. Power tells the two apart: a spinning kernel draws little,
a computing one most of its limit. Pure functions of model records (``map_devices`` is also
what the report and ``bench/gpu_check.sh`` use to name a GPU's rank).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from diag.model import Bundle, Evidence, GpuDevice, GpuSample, ProcessInfo
from diag.verdict.sources import PROGRESS, STUCK, WORK, Context, Finding
from diag.vocab import Lean

__all__ = ["PROGRESS", "gpu_findings", "map_devices", "map_devices_to_ranks"]

GPU_BUSY_UTIL_PCT = 90.0
GPU_IDLE_POWER_FRACTION = 0.35  # of the power limit: a spinning kernel draws little
GPU_IDLE_POWER_W = 120.0  # used when the limit is unknown
GPU_WORK_POWER_FRACTION = 0.5


def _mean(values: List[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


class _Series(NamedTuple):
    """Per GPU (host, NVML index) over the capture: utilization, power, the power cap, the
    PIDs NVML saw on it, the samples that read it."""

    util: Dict[Tuple[str, int], List[float]]
    power: Dict[Tuple[str, int], List[float]]
    limit: Dict[Tuple[str, int], float]
    pids: Dict[Tuple[str, int], Set[int]]
    samples: Dict[Tuple[str, int], List[int]]


def _series(bundle: Bundle) -> _Series:
    # Keyed by (host, NVML index): a merged bundle has a GPU 0 on every node.
    out = _Series({}, {}, {}, {}, {})
    for sample in bundle.samples:
        if sample.gpu is None or not sample.gpu.available:
            continue
        for dev in sample.gpu.devices:
            key = (dev.host, dev.index)
            if dev.util_gpu_pct is not None:
                out.util.setdefault(key, []).append(dev.util_gpu_pct)
                out.samples.setdefault(key, []).append(sample.index)
            if dev.power_w is not None:
                out.power.setdefault(key, []).append(dev.power_w)
            if dev.power_limit_w:
                out.limit[key] = dev.power_limit_w
            out.pids.setdefault(key, set()).update(p.pid for p in dev.processes)
    return out


def gpu_findings(ctx: Context) -> Iterable[Finding]:
    """Fuse utilization with power: 100% util at idle power is a kernel spinning on a peer."""
    series = _series(ctx.bundle)
    util, power, limit, pids, samples = series
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
        lean: Lean
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


def _visible_devices(value: str, devices: Sequence[GpuDevice]) -> List[int]:
    """CUDA_VISIBLE_DEVICES entries (indexes, GPU-UUIDs or UUID prefixes) → NVML indexes."""
    out: List[int] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        if item.isdigit():
            out.append(int(item))
            continue
        for dev in devices:
            if dev.uuid and (dev.uuid == item or dev.uuid.startswith(item)):
                out.append(dev.index)
                break
        else:
            return out  # CUDA stops at the first entry it cannot resolve
    return out


def map_devices(
    gpu: GpuSample, processes: Sequence[ProcessInfo]
) -> Dict[Tuple[str, int], Tuple[ProcessInfo, str]]:
    """(host, NVML index) → (process, how it was matched): ``pid``, ``pid:ancestor``, ``env``.

    PIDs win when NVML shows any PID we know; the environment only fills devices that no PID
    claimed, so a container that hides PIDs still gets a mapping. A merged bundle holds the
    GPUs of several hosts: each device is matched only to processes of its own host.
    """
    mapping: Dict[Tuple[str, int], Tuple[ProcessInfo, str]] = {}
    # Grouped by host once: a scan of every device and process per host is hosts x ranks.
    devices_of: Dict[str, List[GpuDevice]] = {}
    for d in gpu.devices:
        devices_of.setdefault(d.host, []).append(d)
    procs_of: Dict[str, List[ProcessInfo]] = {}
    for p in processes:
        if p.host in devices_of:
            procs_of.setdefault(p.host, []).append(p)
    for host in sorted(devices_of):
        devices = devices_of[host]
        mine = procs_of.get(host, [])
        by_pid = {p.pid: p for p in mine}
        for dev in devices:
            for gproc in dev.processes:
                owner, how = _owner(gproc.pid, by_pid)
                if owner is None:
                    continue
                # Prefer a rank over a helper when several of ours share one GPU.
                current = mapping.get((host, dev.index))
                if current is None or (owner.rank is not None and current[0].rank is None):
                    mapping[(host, dev.index)] = (owner, how)
        mine_now = (mapping.get((host, dev.index)) for dev in devices)
        claimed = {got[0].pid for got in mine_now if got is not None}
        for info in mine:
            if info.pid in claimed or (info.rank is None and info.local_rank is None):
                continue
            index = _device_from_env(info, devices)
            if index is not None and (host, index) not in mapping:
                mapping[(host, index)] = (info, "env")
    return mapping


def map_devices_to_ranks(
    gpu: GpuSample, processes: Sequence[ProcessInfo]
) -> Dict[int, Tuple[ProcessInfo, str]]:
    """One host's view of ``map_devices``: NVML device index → (process, how matched)."""
    return {index: owner for (_host, index), owner in map_devices(gpu, processes).items()}


def _owner(pid: int, by_pid: Dict[int, ProcessInfo]) -> Tuple[Optional[ProcessInfo], str]:
    """The process of ours that holds this GPU context, or the rank it is a child of."""
    info = by_pid.get(pid)
    if info is None:
        return None, ""
    if info.rank is not None:
        return info, "pid"
    parent = info
    for _ in range(16):
        parent_info = by_pid.get(parent.ppid) if parent.ppid is not None else None
        if parent_info is None:
            break
        if parent_info.rank is not None:
            return parent_info, "pid:ancestor"
        parent = parent_info
    return info, "pid"


def _device_from_env(info: ProcessInfo, devices: Sequence[GpuDevice]) -> Optional[int]:
    local_rank = info.local_rank
    if local_rank is None:
        raw = info.env.get("LOCAL_RANK")
        local_rank = int(raw) if raw is not None and raw.isdigit() else None
    visible_raw = info.env.get("CUDA_VISIBLE_DEVICES")
    if visible_raw is not None:
        visible = _visible_devices(visible_raw, devices)
        if len(visible) == 1:
            return visible[0]
        if local_rank is not None and local_rank < len(visible):
            return visible[local_rank]
        return None
    if local_rank is not None and local_rank < len(devices):
        return local_rank
    return None
