"""Benchmark: does a day-long ``diag watch`` stay bounded? (a bench, not a test)

Feeds thousands of synthetic samples (an 8-rank job, 32 threads per rank, a log growing every
sample, a finite pool of distinct stacks as real code has) through the real watch loop
(``diag.watch.loop.run_watch``: window, classifier, journal with fsync, atomic report refresh) and
prints the collector-side RSS over time and the size of what lands on disk.

    .venv/bin/python -m bench.watch_memory                 # a day at 30 s: 2,880 samples
    .venv/bin/python -m bench.watch_memory --samples 200   # smoke
    .venv/bin/python -m bench.watch_memory --render        # refresh real HTML/MD each sample
    .venv/bin/python -m bench.watch_memory --no-classify   # memory only (the verdict costs
                                                           # ~0.25 s per sample at 8x32 threads)

``run()`` returns the figures as a dict for ``make bench``.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import psutil

from diag.bundle.io import atomic_write_bytes, encode_bundle, load_bundle
from diag.model import (
    Bundle,
    Frame,
    HostInfo,
    LogSample,
    ProcessInfo,
    ProcessSample,
    Sample,
    Stack,
    Target,
    ThreadSample,
    Verdict,
)
from diag.watch.interrupts import StopRequest
from diag.watch.loop import WatchOptions, run_watch

T0_S = 1_780_000_000.0
INTERVAL_S = 30.0
ROOT_PID = 5000


class SyntheticDelta:
    __slots__ = ("new_processes", "new_stacks", "sample")

    def __init__(
        self, sample: Sample, new_processes: Tuple[ProcessInfo, ...], new_stacks: Dict[str, Stack]
    ) -> None:
        self.sample = sample
        self.new_processes = new_processes
        self.new_stacks = new_stacks


def _stack(n: int) -> Tuple[str, Stack]:
    frames = tuple(
        Frame(name=f"fn_{n % 50}_{depth}", filename=f"/opt/job/mod_{depth}.py", line=10 + n)
        for depth in range(20)
    )
    return hashlib.sha1(str(n).encode()).hexdigest()[:12], Stack(frames=frames)


class SyntheticCollector:
    """Same surface as ``diag.collect.collector.Collector``; sends each stack and process once."""

    def __init__(self, ranks: int, threads: int, distinct_stacks: int) -> None:
        self.ranks = ranks
        self.threads = threads
        self.distinct_stacks = distinct_stacks
        self.target = Target(root_pid=ROOT_PID, log_paths=("/opt/job/train.log",))
        self._sent: set[str] = set()
        self._log_lines = 0

    def host_info(self) -> HostInfo:
        return HostInfo(hostname="bench", cpu_count=64, clk_tck=100)

    def alive(self) -> bool:
        return True

    def _thread(self, index: int, rank: int, tid: int, new: Dict[str, Stack]) -> ThreadSample:
        stack_id: Optional[str] = None
        if tid < 4:  # Python threads; the rest are native (NCCL, OpenMP, CUDA)
            sid, stack = _stack((index * 7 + rank * 3 + tid) % self.distinct_stacks)
            if sid not in self._sent:
                self._sent.add(sid)
                new[sid] = stack
            stack_id = sid
        return ThreadSample(
            tid=ROOT_PID + 100 * (rank + 1) + tid,
            name="python" if tid == 0 else f"worker-{tid}",
            state="R" if tid == 0 else "S",
            utime_ticks=index * (2900 if tid == 0 else 1),
            stime_ticks=index * 10,
            wchan=None if tid == 0 else "futex_wait_queue",
            syscall="futex" if tid else "running",
            futex_addr=None if tid == 0 else f"0x7f00{rank:02x}{tid:04x}",
            futex_op=None if tid == 0 else 0x189,
            stack_id=stack_id,
            py_active=tid == 0 if stack_id else None,
        )

    def take_sample(self, index: int, *, late_s: float = 0.0, lean: bool = False) -> SyntheticDelta:
        t_s = T0_S + index * INTERVAL_S
        new_stacks: Dict[str, Stack] = {}
        procs: List[ProcessSample] = []
        for rank in range(self.ranks):
            threads = tuple(
                self._thread(index, rank, tid, new_stacks) for tid in range(self.threads)
            )
            procs.append(
                ProcessSample(
                    pid=ROOT_PID + rank + 1,
                    t_s=t_s,
                    state="R",
                    utime_ticks=index * 2900,
                    stime_ticks=index * 100,
                    rss_bytes=(8 << 30) + index,
                    num_threads=self.threads,
                    threads=threads,
                    py_status="ok",
                )
            )
        self._log_lines += 5
        log = LogSample(
            path="/opt/job/train.log",
            size_bytes=self._log_lines * 120,
            lines=self._log_lines,
            mtime_s=t_s,
            inode=42,
            tail=tuple(f"step {self._log_lines - i} loss 0.{i:03d}" for i in range(20)),
        )
        new_processes: Tuple[ProcessInfo, ...] = ()
        if index == 0:
            new_processes = tuple(
                ProcessInfo(pid=ROOT_PID + r + 1, ppid=ROOT_PID, name="python", role="rank", rank=r)
                for r in range(self.ranks)
            )
        sample = Sample(index=index, t_s=t_s, duration_s=0.2, processes=tuple(procs), logs=(log,))
        return SyntheticDelta(sample, new_processes, new_stacks)


def _stand_in_classify(_bundle: Bundle) -> Verdict:
    return Verdict(state="progressing", confidence=0.9, summary="bench")


def _classifier(real: bool) -> object:
    if not real:
        return _stand_in_classify
    from diag.verdict.classify import classify

    return classify


def run(
    samples: int = 2880,
    ranks: int = 8,
    threads: int = 32,
    distinct_stacks: int = 500,
    render: bool = False,
    classify: bool = True,
) -> Dict[str, float]:
    """Run the simulated watch; figures in bytes, MiB and milliseconds."""
    proc = psutil.Process()
    rss: Dict[int, int] = {}
    marks = {0, samples // 4, samples // 2, 3 * samples // 4, samples - 1}
    classifier = _classifier(classify)
    with tempfile.TemporaryDirectory(prefix="diag-bench-watch-") as tmp:
        base = Path(tmp) / "watch"
        journal = base.with_suffix(".jsonl")
        report = base.with_suffix(".json")

        if render:
            from diag.redaction.redact import Redactor
            from diag.render.outputs import write_outputs

            redactor = Redactor()

            def writer(bundle: Bundle, _final: bool) -> None:
                write_outputs(bundle, report, redactor)

        else:

            def writer(bundle: Bundle, _final: bool) -> None:
                atomic_write_bytes(report, encode_bundle(bundle))

        def echo(_line: str) -> None:
            index = len(rss_seen)
            rss_seen.append(index)
            if index in marks:
                rss[index] = proc.memory_info().rss

        rss_seen: List[int] = []
        source = SyntheticCollector(ranks, threads, distinct_stacks)
        options = WatchOptions(journal_path=journal, interval_s=0.0, count=samples)
        started = time.perf_counter()
        run_watch(
            source,
            options,
            writer=writer,
            classify=classifier,  # type: ignore[arg-type]
            echo=echo,
            stop=StopRequest(),
        )
        wall_s = time.perf_counter() - started
        journal_bytes = journal.stat().st_size
        report_bytes = report.stat().st_size
        html = base.with_suffix(".html")
        html_bytes = html.stat().st_size if html.exists() else 0
        t0 = time.perf_counter()
        full = load_bundle(journal)
        load_s = time.perf_counter() - t0
        assert len(full.samples) == samples
    mib = 1024 * 1024
    first, last = rss[min(rss)], rss[max(rss)]
    quarter = rss.get(samples // 4, first)
    return {
        "samples": float(samples),
        "rss_start_mib": first / mib,
        "rss_quarter_mib": quarter / mib,
        "rss_end_mib": last / mib,
        "rss_growth_after_quarter_mib": (last - quarter) / mib,
        "journal_mib": journal_bytes / mib,
        "journal_bytes_per_sample": journal_bytes / samples,
        "report_json_kib": report_bytes / 1024,
        "report_html_kib": html_bytes / 1024,
        "ms_per_sample": 1000 * wall_s / samples,
        "journal_load_s": load_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=2880)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--distinct-stacks", type=int, default=500)
    parser.add_argument("--render", action="store_true", help="real HTML/MD refresh per sample")
    parser.add_argument(
        "--no-classify", action="store_true", help="a stand-in verdict (memory figures only)"
    )
    args = parser.parse_args()
    figures = run(
        args.samples,
        args.ranks,
        args.threads,
        args.distinct_stacks,
        args.render,
        classify=not args.no_classify,
    )
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:,.2f}")


if __name__ == "__main__":
    main()
