"""The bounded state of a watch between samples, and the one status line it prints per sample.

``SampleWindow`` is why a day-long watch stays small: it keeps the last ``max_samples`` samples
only (the journal on disk has all of them) plus the interned stacks and process identities the
collector sends once each. The status-line helpers read the last two samples of the window.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Deque, Dict, FrozenSet, Iterable, List, Optional, Protocol, Set, Tuple

from diag.model import (
    Bundle,
    HostInfo,
    ProcessInfo,
    Sample,
    Stack,
    Target,
    Verdict,
    main_thread,
)
from diag.text.units import rank_set
from diag.vocab import RankPhaseName
from diag.watch.launch import describe_exit


class SampleDeltaLike(Protocol):
    """What ``Collector.take_sample`` returns: the sample plus records seen for the first time."""

    @property
    def sample(self) -> Sample: ...

    @property
    def new_processes(self) -> Tuple[ProcessInfo, ...]: ...

    @property
    def new_stacks(self) -> Dict[str, Stack]: ...


class SampleSource(Protocol):
    """The part of ``collect.collector.Collector`` the loop uses (a fake drives the benchmark)."""

    @property
    def target(self) -> Target: ...

    def host_info(self) -> HostInfo: ...

    def take_sample(
        self, index: int, *, late_s: float = 0.0, lean: bool = False
    ) -> SampleDeltaLike: ...

    def alive(self) -> bool: ...


# Roles whose own wake-ups are not the job's work: a launcher polling its children, a helper.
_BESIDE_THE_JOB = frozenset({"launcher", "helper"})


class SampleWindow:
    """The last ``max_samples`` samples, plus every interned stack and process identity seen."""

    def __init__(self, max_samples: int) -> None:
        self.samples: Deque[Sample] = deque(maxlen=max(max_samples, 2))
        self.processes: Dict[Tuple[str, int], ProcessInfo] = {}
        self.stacks: Dict[str, Stack] = {}

    def add(self, delta: SampleDeltaLike) -> None:
        self.samples.append(delta.sample)
        for info in delta.new_processes:
            self.processes[(info.host, info.pid)] = info
        self.stacks.update(delta.new_stacks)

    def recent(self, min_samples: int, min_span_s: float) -> int:
        """How many trailing samples the verdict judges: the fewest that are both
        ``min_samples`` and ``min_span_s`` long (or the whole window, if shorter)."""
        samples = self.samples
        n = min(len(samples), max(min_samples, 1))
        while n < len(samples) and samples[-1].t_s - samples[-n].t_s < min_span_s:
            n += 1
        return n

    def quiet_tail(self) -> int:
        """How many trailing samples were taken since the job last ran (issue #33): the main
        thread of every live process but its launchers and helpers off the CPU (the kernel's
        ``off_cpu_s``, as ``diag.verdict.wait_age`` reads it) for at least the time back to
        them, and no thread of theirs runnable. 0 when one runs, or the kernel did not say (an
        older kernel, no permission). A backend's own housekeeping threads (gloo's loop) wake
        on their own and say nothing about the job's work; work on other threads shows in the
        judged samples' CPU.

        The time off the CPU counts back from when the process was read (``ProcessSample.t_s``),
        not from the sample's start: on a loaded host a process is read a second or more into
        its sample, and counting from the start took in the sample before the stop - whose
        log growth read "progressing" again for as long as reads came late."""
        if not self.samples:
            return 0
        last = self.samples[-1]
        since: Optional[float] = None  # when the last of them last ran (epoch s)
        for ps in last.processes:
            info = self.processes.get((ps.host, ps.pid))
            if ps.status != "alive" or (info is not None and info.role in _BESIDE_THE_JOB):
                continue
            main = main_thread(ps)
            if main is None or main.off_cpu_s is None or any(t.state == "R" for t in ps.threads):
                return 0
            ran_s = (ps.t_s or last.t_s) - main.off_cpu_s
            since = ran_s if since is None else max(since, ran_s)
        if since is None:
            return 0
        return sum(1 for s in self.samples if s.t_s >= since)

    def bundle(
        self, host: HostInfo, target: Target, created_s: float, last: Optional[int] = None
    ) -> Bundle:
        """A bundle of the window (or of its ``last`` samples), carrying only the processes and
        stacks its samples use."""
        chosen = tuple(self.samples)
        if last is not None:
            chosen = chosen[len(chosen) - last :]
        keys: Set[Tuple[str, int]] = set()
        stack_ids: Set[str] = set()
        for sample in chosen:
            for proc in sample.processes:
                keys.add((proc.host, proc.pid))
                for thread in proc.threads:
                    if thread.stack_id is not None:
                        stack_ids.add(thread.stack_id)
        return Bundle(
            created_s=created_s,
            host=host,
            target=target,
            processes=tuple(info for key, info in self.processes.items() if key in keys),
            stacks={sid: self.stacks[sid] for sid in sorted(stack_ids) if sid in self.stacks},
            samples=chosen,
        )


def _labels(processes: Iterable[ProcessInfo]) -> Dict[Tuple[str, int], str]:
    return {
        (p.host, p.pid): (f"r{p.rank}" if p.rank is not None else f"pid{p.pid}") for p in processes
    }


def cpu_by_process(
    prev: Sample, cur: Sample, clk_tck: int, labels: Dict[Tuple[str, int], str]
) -> List[Tuple[str, float]]:
    """Per-process CPU % between two samples (100 = one core), ranks first."""
    before = {(p.host, p.pid): p for p in prev.processes}
    rows: List[Tuple[bool, int, str, float]] = []
    for p in cur.processes:
        old = before.get((p.host, p.pid))
        if old is None or p.status != "alive" or p.t_s <= old.t_s:
            continue
        ticks = (p.utime_ticks + p.stime_ticks) - (old.utime_ticks + old.stime_ticks)
        pct = 100.0 * ticks / max(clk_tck, 1) / (p.t_s - old.t_s)
        label = labels.get((p.host, p.pid), f"pid{p.pid}")
        rows.append((not label.startswith("r"), p.pid, label, max(pct, 0.0)))
    rows.sort()
    return [(label, pct) for _, _, label, pct in rows]


def log_growth(prev: Sample, cur: Sample) -> Tuple[int, int]:
    """(new lines, new bytes) across every log between two samples; a rotated log counts 0."""
    before = {log.path: log for log in prev.logs}
    lines = grown_bytes = 0
    for log in cur.logs:
        old = before.get(log.path)
        if old is None or log.inode != old.inode:
            continue
        lines += max(log.lines - old.lines, 0)
        grown_bytes += max(log.size_bytes - old.size_bytes, 0)
    return lines, grown_bytes


def short_eta(seconds: float) -> str:
    """``190`` -> ``3m10s``; ``45`` -> ``45s``; ``7300`` -> ``2h01m``."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


# The phases of ranks beside a start-up, grouped by what they wait in or serve (not by pid).
_BESIDE: FrozenSet[RankPhaseName] = frozenset({"waiting", "serving"})


def phase_parts(verdict: Verdict, limit: int = 3) -> List[str]:
    """The verdict's startup phases as status-line parts: ``rank 0 loading weights 62% ETA
    3m10s``, and ranks with the same phase and evidence merged (``ranks 1-3 wait in barrier``)."""
    groups: Dict[Tuple[str, str, Optional[float], Optional[float]], List[int]] = {}
    order: List[Tuple[str, str, Optional[float], Optional[float]]] = []
    texts: Dict[Tuple[str, str, Optional[float], Optional[float]], str] = {}
    for ph in verdict.phases:
        pct = ph.progress_pct
        shown = ph.evidence if ph.phase in _BESIDE else str(ph.pid)
        key: Tuple[str, str, Optional[float], Optional[float]] = (ph.phase, shown, pct, ph.eta_s)
        if key not in groups:
            order.append(key)
            groups[key] = []
            if ph.phase == "waiting":
                texts[key] = ph.evidence
            elif ph.phase == "serving":
                texts[key] = "serving"
            else:
                text: str = ph.phase
                if pct is not None:
                    text += f" {pct:.0f}%"
                if ph.eta_s is not None:
                    text += f" ETA {short_eta(ph.eta_s)}"
                texts[key] = text
        groups[key].append(ph.rank if ph.rank is not None else -ph.pid)
    out = []
    for key in order[:limit]:
        ids = groups[key]
        who = rank_set(ids) if all(i >= 0 for i in ids) else f"pid {-ids[0]}"
        out.append(f"{who} {texts[key]}")
    if len(order) > limit:
        out.append(f"+{len(order) - limit} more")
    if verdict.warnings:
        out.append(f"warning: {verdict.warnings[0]}")
    return out


def status_line(
    window: SampleWindow,
    verdict: Verdict,
    clk_tck: int,
    child_exit_code: Optional[int] = None,
    launched: bool = False,
    max_ranks: int = 8,
) -> str:
    """One line per sample: time, verdict so far, per-rank CPU, log growth (and a child exit)."""
    cur = window.samples[-1]
    stamp = time.strftime("%H:%M:%S", time.localtime(cur.t_s))
    parts = [f"{stamp} #{cur.index} {verdict.state}"]
    parts += phase_parts(verdict)
    if len(window.samples) >= 2:
        prev = window.samples[-2]
        cpu = cpu_by_process(prev, cur, clk_tck, _labels(window.processes.values()))
        if cpu:
            shown = " ".join(f"{label} {pct:.0f}%" for label, pct in cpu[:max_ranks])
            more = f" +{len(cpu) - max_ranks} more" if len(cpu) > max_ranks else ""
            parts.append(f"cpu {shown}{more}")
        if cur.logs:
            lines, grown_bytes = log_growth(prev, cur)
            parts.append(
                f"log +{lines} lines +{grown_bytes} B" if lines or grown_bytes else "log quiet"
            )
    if launched and child_exit_code is not None:
        parts.append(f"command ended: {describe_exit(child_exit_code)}")
    failures = len(cur.failures)
    if failures:
        parts.append(f"{failures} probe failure{'s' if failures != 1 else ''}")
    return " | ".join(parts)
