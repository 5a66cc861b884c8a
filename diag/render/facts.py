"""The reference sections of a report: environment, host, commands, logs, probe failures.

Split from build.py because these are plain tables over the bundle with their own caps (line
length, rows, log head/tail), independent of the verdict and of stacks.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from diag.model import Bundle, LogSample, ProbeFailure
from diag.render import fmt
from diag.render.index import BundleIndex
from diag.render.series import spark
from diag.render.view import EnvDiff, EnvRow, FailureRow, LogView, ProcCommand, TimingRow

MAX_FAILURES = 200
MAX_LOG_HEAD = 40
MAX_LOG_TAIL = 80
MAX_LINE_CHARS = 400
MAX_ENV_ROWS = 200


def env_common(index: BundleIndex) -> Tuple[EnvRow, ...]:
    envs = [p.info.env for p in index.procs if p.info.env]
    if not envs:
        return ()
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    rows = [EnvRow(name=k, value=fmt.clip(v, MAX_LINE_CHARS)) for k, v in sorted(common.items())]
    return tuple(rows[:MAX_ENV_ROWS])


def env_diffs(index: BundleIndex) -> Tuple[EnvDiff, ...]:
    envs = [p.info.env for p in index.procs if p.info.env]
    common = (
        {k for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])} if envs else set()
    )
    out = []
    for proc in index.procs:
        own = {k: v for k, v in proc.info.env.items() if k not in common}
        if own:
            rows = tuple(
                EnvRow(name=k, value=fmt.clip(v, MAX_LINE_CHARS))
                for k, v in sorted(own.items())[:MAX_ENV_ROWS]
            )
            out.append(EnvDiff(label=proc.label, rows=rows))
    return tuple(out)


def host_facts(bundle: Bundle) -> Tuple[Tuple[str, str], ...]:
    h = bundle.host
    facts = [
        ("hostname", h.hostname),
        ("kernel", h.kernel),
        ("machine", h.machine),
        ("CPUs", str(h.cpu_count) if h.cpu_count else ""),
        ("clock ticks/s", str(h.clk_tck)),
        ("booted", fmt.utc(h.boot_time_s) if h.boot_time_s else ""),
        ("Python", h.python_version),
        ("diag", h.diag_version),
        ("py-spy", h.pyspy_version or ""),
        ("bundle schema", str(bundle.schema_version)),
        (
            "complete",
            "yes" if bundle.complete else "no: the watch was cut short, rebuilt from its journal",
        ),
    ]
    return tuple((k, v) for k, v in facts if v)


def commands(index: BundleIndex) -> Tuple[ProcCommand, ...]:
    out: List[ProcCommand] = []
    target = index.bundle.target
    if target.command:
        out.append(
            ProcCommand(
                label="launched by diag" if target.launched else "target",
                command=fmt.command(target.command),
            )
        )
    seen = set()
    for proc in index.procs:
        cmd = fmt.command(proc.info.cmdline)
        if cmd and cmd not in seen:
            seen.add(cmd)
            out.append(ProcCommand(label=proc.label, command=fmt.clip(cmd, 4000)))
    return tuple(out)


def _growth(deltas: Sequence[int]) -> str:
    parts: List[str] = []
    prev: Optional[int] = None
    count = 0
    for d in [*deltas, None]:
        if d == prev:
            count += 1
            continue
        if prev is not None:
            parts.append(f"{prev:+d}" + (f" ×{count}" if count > 1 else ""))
        prev, count = d, 1
    text = ", ".join(parts[:40])
    return text + (f", … ({len(parts) - 40} more changes)" if len(parts) > 40 else "")


def logs(index: BundleIndex) -> Tuple[LogView, ...]:
    series: Dict[Tuple[str, str], List[Tuple[float, LogSample]]] = {}
    for sample in index.bundle.samples:
        for log in sample.logs:
            series.setdefault((log.host, log.path), []).append((sample.t_s, log))
    out = []
    for (host, path), items in series.items():
        last = items[-1][1]
        deltas = [b.lines - a.lines for (_, a), (_, b) in zip(items, items[1:])]
        head = tuple(fmt.clip(x, MAX_LINE_CHARS) for x in last.head[:MAX_LOG_HEAD])
        tail = tuple(fmt.clip(x, MAX_LINE_CHARS) for x in last.tail[-MAX_LOG_TAIL:])
        out.append(
            LogView(
                path=f"{host}:{path}" if host else path,
                lines_exact=last.lines_exact,
                exists=last.exists,
                lines=last.lines,
                size=fmt.size(last.size_bytes),
                growth=_growth(deltas) if deltas else "one sample",
                spark=spark(
                    [(t, float(x.size_bytes)) for t, x in items],
                    index.t_first_s,
                    index.t_last_s,
                    max(float(x.size_bytes) for _, x in items),
                    fmt.size,
                ),
                head=head,
                tail=tail,
                skipped_lines=max(0, last.lines - len(head) - len(tail)),
            )
        )
    return tuple(out)


def _target(index: BundleIndex, f: ProbeFailure) -> str:
    if f.pid is None:
        return f.host or "job"
    proc = index.proc_for_pid(f.pid, f.host)
    return f"{proc.label} (pid {f.pid})" if proc is not None else f"pid {f.pid}"


def failures(index: BundleIndex) -> Tuple[Tuple[FailureRow, ...], int]:
    all_failures: List[ProbeFailure] = list(index.bundle.failures)
    for sample in index.bundle.samples:
        all_failures.extend(sample.failures)
    rows = tuple(
        FailureRow(
            sample=str(f.sample) if f.sample is not None else "–",
            probe=f.probe,
            target=_target(index, f),
            reason=fmt.clip(f.reason, MAX_LINE_CHARS),
            duration=f"{f.duration_s * 1000:.0f} ms",
        )
        for f in all_failures[:MAX_FAILURES]
    )
    return rows, max(0, len(all_failures) - MAX_FAILURES)


def timings(bundle: Bundle) -> Tuple[TimingRow, ...]:
    values: Dict[str, List[float]] = {}
    for sample in bundle.samples:
        values.setdefault("whole sample", []).append(sample.duration_s)
        for probe, secs in sample.probe_timings_s.items():
            values.setdefault(probe, []).append(secs)
    return tuple(
        TimingRow(
            probe=p,
            mean_ms=f"{sum(v) / len(v) * 1000:.1f}",
            max_ms=f"{max(v) * 1000:.1f}",
            count=len(v),
        )
        for p, v in values.items()
    )
