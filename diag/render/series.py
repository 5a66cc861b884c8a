"""Per-process time series drawn as inline-SVG sparklines (no JavaScript, no chart library).

A rate needs two samples, a shared y-scale per metric lets a reader compare ranks at a glance
(the rank whose CPU line is flat stands out), and a day-long watch has thousands of samples,
so each series is reduced to at most ``MAX_POINTS`` buckets keeping the bucket maximum: a
short spike stays visible, and the SVG size no longer grows with the capture length.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Dict, List, Optional, Sequence, Tuple

from diag.model import Bundle, GpuDevice, ProcessSample
from diag.render import fmt
from diag.render.index import BundleIndex, Proc
from diag.render.view import Gpu, GpuRow, Spark, TimelineGroup, TimelineRow, Timelines

WIDTH = 160
HEIGHT = 28
MAX_POINTS = 120

Point = Tuple[float, Optional[float]]  # (t_s, value or None when unknown)


def downsample(points: Sequence[Point], limit: int = MAX_POINTS) -> List[Point]:
    """At most ``limit`` points, each the maximum of its bucket (spikes survive)."""
    known: List[Point] = [(t, v) for t, v in points if v is not None]
    if len(known) <= limit:
        return known
    out: List[Point] = []
    step = len(known) / limit
    for b in range(limit):
        bucket = known[int(b * step) : max(int((b + 1) * step), int(b * step) + 1)]
        peak = max(bucket, key=lambda p: p[1] if p[1] is not None else 0.0)
        out.append((bucket[len(bucket) // 2][0], peak[1]))
    return out


def spark(
    points: Sequence[Point], t0: float, t1: float, top: float, show: Callable[[float], str]
) -> Spark:
    pts = downsample(points)
    if not pts:
        return Spark()
    span = max(t1 - t0, 1e-9)
    top = max(top, 1e-9)
    coords = []
    for t, v in pts:
        x = (t - t0) / span * WIDTH
        y = HEIGHT - 1 - min(max(v or 0.0, 0.0), top) / top * (HEIGHT - 2)
        coords.append(f"{x:.1f},{y:.1f}")
    if len(coords) == 1:  # one sample: draw a short tick so it is visible
        coords.append(
            f"{min(WIDTH, float(coords[0].split(',')[0]) + 3):.1f},{coords[0].split(',')[1]}"
        )
    last = pts[-1][1]
    peak = max(v or 0.0 for _, v in pts)
    return Spark(points=" ".join(coords), last=show(last or 0.0), peak=show(peak), empty=False)


def _rate(
    samples: Sequence[Tuple[int, ProcessSample]], value: Callable[[ProcessSample], Optional[float]]
) -> List[Point]:
    out: List[Point] = []
    prev: Optional[Tuple[float, float]] = None
    for _, ps in samples:
        v = value(ps)
        if v is None:
            prev = None
            continue
        if prev is not None and ps.t_s > prev[0]:
            out.append((ps.t_s, max(0.0, (v - prev[1]) / (ps.t_s - prev[0]))))
        prev = (ps.t_s, v)
    return out


def _ticks(ps: ProcessSample) -> Optional[float]:
    return float(ps.utime_ticks + ps.stime_ticks) if ps.status == "alive" else None


def _io(ps: ProcessSample) -> Optional[float]:
    return float(ps.io.rchar + ps.io.wchar) if ps.io is not None else None


def cpu_points(proc: Proc, clk_tck: int) -> List[Point]:
    return [(t, (v or 0.0) / clk_tck * 100.0) for t, v in _rate(proc.samples, _ticks)]


def _log_bytes(bundle: Bundle, proc: Proc) -> List[Point]:
    out: List[Point] = []
    pid = proc.key[1]
    for sample in bundle.samples:
        mine = [
            log.size_bytes
            for log in sample.logs
            if pid in log.pids and log.host in ("", proc.key[0])
        ]
        if mine:
            out.append((sample.t_s, float(sum(mine))))
    return out


GpuIndex = Dict[Tuple[str, int], List[Tuple[float, List[GpuDevice]]]]


def gpu_by_process(bundle: Bundle) -> GpuIndex:
    """(host, pid) → [(t_s, devices it uses)]: one pass instead of one per process."""
    out: GpuIndex = {}
    for sample in bundle.samples:
        if sample.gpu is None or not sample.gpu.available:
            continue
        here: Dict[Tuple[str, int], List[GpuDevice]] = {}
        for d in sample.gpu.devices:
            for p in d.processes:
                here.setdefault((d.host, p.pid), []).append(d)
        for key, devices in here.items():
            out.setdefault(key, []).append((sample.t_s, devices))
    return out


def _gpu_points(gpus: GpuIndex, proc: Proc, field: str) -> List[Point]:
    out: List[Point] = []
    rows = gpus.get(proc.key) or gpus.get(("", proc.key[1]), [])
    for t_s, devices in rows:
        values = [getattr(d, field) for d in devices if getattr(d, field) is not None]
        if values:
            out.append((t_s, sum(values) / len(values)))
    return out


_METRICS: Tuple[Tuple[str, str], ...] = (
    ("CPU %", "pct"),
    ("RSS", "bytes"),
    ("I/O rate", "bytes_per_s"),
    ("log bytes", "bytes"),
    ("GPU util %", "pct"),
    ("GPU power", "w"),
)


def _show(kind: str) -> Callable[[float], str]:
    if kind == "pct":
        return lambda v: f"{v:.0f}%"
    if kind == "bytes":
        return fmt.size
    if kind == "bytes_per_s":
        return lambda v: fmt.size(v) + "/s"
    return lambda v: f"{v:.0f} W"


def build_timelines(index: BundleIndex) -> Timelines:
    bundle = index.bundle
    clk = bundle.host.clk_tck or 100
    series: Dict[Tuple[str, int], List[List[Point]]] = {}
    gpus = gpu_by_process(bundle)
    for proc in index.procs:
        series[proc.key] = [
            cpu_points(proc, clk),
            [
                (ps.t_s, float(ps.rss_bytes) if ps.status == "alive" else None)
                for _, ps in proc.samples
            ],
            _rate(proc.samples, _io),
            _log_bytes(bundle, proc),
            _gpu_points(gpus, proc, "util_gpu_pct"),
            _gpu_points(gpus, proc, "power_w"),
        ]
    keep = [m for m in range(len(_METRICS)) if m < 4 or any(s[m] for s in series.values())]
    tops = []
    for m in keep:
        peak = max((v or 0.0 for s in series.values() for _, v in s[m]), default=0.0)
        tops.append(max(peak, 100.0) if _METRICS[m][1] == "pct" else peak)
    groups = []
    for host in index.hosts:
        rows = []
        for proc in index.procs:
            if proc.key[0] != host:
                continue
            sparks = tuple(
                spark(
                    series[proc.key][m], index.t_first_s, index.t_last_s, top, _show(_METRICS[m][1])
                )
                for m, top in zip(keep, tops)
            )
            rows.append(
                TimelineRow(
                    label=proc.label,
                    anchor=proc.anchor,
                    suspect=proc.is_suspect,
                    sparks=sparks,
                    badge=proc.badge,
                )
            )
        groups.append(TimelineGroup(host=host, rows=tuple(rows)))
    n = len(bundle.samples)
    note = f"{n} samples over {fmt.duration(index.t_last_s - index.t_first_s)}"
    if n > MAX_POINTS:
        note += f"; each line keeps the peak of {MAX_POINTS} buckets"
    return Timelines(
        metrics=tuple(_METRICS[m][0] for m in keep),
        scales=tuple(_show(_METRICS[m][1])(t) for m, t in zip(keep, tops)),
        groups=tuple(groups),
        width=WIDTH,
        height=HEIGHT,
        note=note + "; rates need two samples. Every rank shares one scale per column.",
    )


def build_gpu(index: BundleIndex, hosts: Optional[AbstractSet[str]] = None) -> Gpu:
    """The GPU table; ``hosts``: only those nodes' devices (the report at scale keeps the
    rows of the nodes it draws - building 16,384 sparklines to drop them cost ~0.3 s)."""
    bundle = index.bundle
    last = next((s.gpu for s in reversed(bundle.samples) if s.gpu is not None), None)
    if last is None:
        return Gpu(available=False, note="no GPU sample in this bundle")
    if not last.available:
        return Gpu(available=False, note=last.reason or "NVML not available")
    util: Dict[Tuple[str, int], List[Point]] = {}
    power: Dict[Tuple[str, int], List[Point]] = {}
    for sample in bundle.samples:
        if sample.gpu is None or not sample.gpu.available:
            continue
        for d in sample.gpu.devices:
            if hosts is not None and d.host and d.host not in hosts:
                continue
            util.setdefault((d.host, d.index), []).append((sample.t_s, d.util_gpu_pct))
            power.setdefault((d.host, d.index), []).append((sample.t_s, d.power_w))
    rows = []
    for d in last.devices:
        if hosts is not None and d.host and d.host not in hosts:
            continue
        owners = []
        for p in d.processes:
            proc = index.proc_for_pid(p.pid, d.host)
            owners.append(f"{proc.label} ({p.pid})" if proc is not None else str(p.pid))
        limit = d.power_limit_w or max(
            (v or 0.0 for _, v in power.get((d.host, d.index), [])), default=0.0
        )
        mem = (
            f"{fmt.size(d.mem_used_bytes)} / {fmt.size(d.mem_total_bytes)}"
            if d.mem_used_bytes is not None
            else "–"
        )
        rows.append(
            GpuRow(
                index=d.index,
                name=(f"{d.host}: " if d.host else "")
                + (d.name or "?")
                + (f" ({d.error})" if d.error else ""),
                util=fmt.number(d.util_gpu_pct, "%"),
                mem=mem,
                power=fmt.number(d.power_w, "W")
                + (f" / {d.power_limit_w:.0f} W" if d.power_limit_w else ""),
                temp=fmt.number(d.temperature_c, "°C"),
                pids=", ".join(owners) or "–",
                util_spark=spark(
                    util.get((d.host, d.index), []),
                    index.t_first_s,
                    index.t_last_s,
                    100.0,
                    _show("pct"),
                ),
                power_spark=spark(
                    power.get((d.host, d.index), []),
                    index.t_first_s,
                    index.t_last_s,
                    limit,
                    _show("w"),
                ),
            )
        )
    note = f"driver {last.driver_version}" if last.driver_version else ""
    return Gpu(available=True, note=note, rows=tuple(rows))
