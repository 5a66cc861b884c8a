"""One snapshot of a job of N ranks x 64 threads: diag against raw py-spy, interleaved.

Per repeat, on the same live job (``bench.job.start_job``):

* raw ``py-spy dump --pid RANK`` of every rank, one after the other (what a user types); the
  slowest rank (by its median over the repeats) is the baseline: a tool that dumps the ranks
  in parallel cannot beat it;
* raw ``py-spy dump --subprocesses --pid LAUNCHER`` (py-spy's own way to dump a job);
* diag's first sample, the ``Collector`` built and its workers forked included (process
  discovery, environ, the GPU probe's first answer: what ``diag capture --count 1`` pays), and
  a second, steady-state sample (what every ``diag watch`` sample pays);
* the same first sample with py-spy per rank instead of diag's own reader
  (``stack_reader="py-spy"``: what a Python < 3.11 job gets), for comparison.

The CPU time of the raw dumps is recorded too: N dumps need N x (CPU of one dump) however they
are scheduled, so on a machine with fewer cores than ranks the best any tool that runs py-spy
per rank can do is that sum over the core count. ``floor_ratio`` reports that bound.

``--busy N`` (``measure(..., busy=N)``): the job's ranks each have ``N`` threads spinning
(``bench.job``), so every rank has a thread in state R and each sample pays the native-location
probe's perf windows - a busy GPU job's case, which the parked job never shows.
"""

from __future__ import annotations

import os
import subprocess
from functools import partial
from typing import Any, Dict, List, Tuple

from bench.job import start_job
from bench.stats import Series, collect, ratio, timed, timed_call
from diag.collect.collector import Collector
from diag.probes.cpython.linetable import line_of
from diag.probes.cpython.pymem import forget_symbols
from diag.probes.stacks import find_pyspy


def _raw_dump(pyspy: str, pid: int, *extra: str) -> None:
    subprocess.run(
        [pyspy, "dump", "--pid", str(pid), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def _first_sample(pid: int, pyspy: str, **options: Any) -> Tuple[Collector, Any]:
    """A fresh Collector's first sample (construction and worker start included), with what
    a new diag process would not have yet: the binaries' symbols, the line-table cache."""
    forget_symbols()
    line_of.cache_clear()
    collector = Collector(pid, pyspy=pyspy, **options)
    return collector, collector.take_sample(0)


def measure(ranks: int, threads: int = 64, repeats: int = 7, busy: int = 0) -> Dict[str, float]:
    """Seconds (median and min over ``repeats``) and the ratios against the raw baseline."""
    pyspy = find_pyspy()
    if pyspy is None:
        raise RuntimeError("py-spy not found: make install")
    cores = os.cpu_count() or 1
    per_rank: Dict[int, List[float]] = {}
    raw_cpu_sum: List[float] = []
    raw_sub: List[float] = []
    first: List[float] = []
    first_pyspy: List[float] = []
    steady: List[float] = []
    diag_cpu: List[float] = []
    probes: Dict[str, List[float]] = {}
    with start_job(ranks, threads, busy) as job:
        _raw_dump(pyspy, job.rank_pids[0])  # warm the page cache for py-spy and the target
        for _ in range(repeats):
            singles = [timed(partial(_raw_dump, pyspy, pid)) for pid in job.rank_pids]
            for pid, t in zip(job.rank_pids, singles):
                per_rank.setdefault(pid, []).append(t.wall_s)
            raw_cpu_sum.append(sum(t.children_cpu_s for t in singles))
            raw_sub.append(timed(partial(_raw_dump, pyspy, job.pid, "--subprocesses")).wall_s)
            cost, (collector, delta) = timed_call(partial(_first_sample, job.pid, pyspy))
            first.append(cost.wall_s)
            # Which probe kept the first sample long: each sample records its probes' times.
            for probe, took_s in delta.sample.probe_timings_s.items():
                probes.setdefault(f"first_probe_{probe}", []).append(took_s)
            cost = timed(partial(collector.take_sample, 1))
            collector.close()  # its NVML worker, if this host started one
            steady.append(cost.wall_s)
            diag_cpu.append(cost.self_cpu_s + cost.children_cpu_s)
            cost, (old, _) = timed_call(
                partial(_first_sample, job.pid, pyspy, stack_reader="py-spy")
            )
            old.close()
            first_pyspy.append(cost.wall_s)
    # The slowest rank's typical dump: per-rank medians, then the max over ranks. (The max of
    # each repeat's N dumps would pick up every noise spike and flatter diag.)
    base = Series(
        (max(collect(v).median for v in per_rank.values()),),
    )
    base_min = max(collect(v).min for v in per_rank.values())
    cpu_sum = collect(raw_cpu_sum)
    floor_s = max(base.median, cpu_sum.median / cores)
    series = {
        "raw_slowest_single": base,
        "raw_subprocesses": collect(raw_sub),
        "diag_first": collect(first),
        "diag_first_pyspy": collect(first_pyspy),
        "diag_steady": collect(steady),
        "diag_steady_cpu": collect(diag_cpu),
        "raw_cpu_sum": cpu_sum,
    }
    out: Dict[str, float] = {
        "ranks": float(ranks),
        "threads": float(threads),
        "busy": float(busy),
        "cores": cores,
    }
    for name, values in series.items():
        out[f"{name}_median_s"] = values.median
        out[f"{name}_min_s"] = values.min
    out["raw_slowest_single_min_s"] = base_min
    for probe_name, took in sorted(probes.items()):
        out[f"{probe_name}_median_s"] = collect(took).median
    # Best against best: a noisy repeat can slow the raw dumps more than diag (it then
    # flatters diag's median ratio); the fastest of each cannot be flattered that way.
    out["first_ratio_min"] = series["diag_first"].min / base_min
    out["steady_ratio_min"] = series["diag_steady"].min / base_min
    out["first_ratio"] = ratio(series["diag_first"], base)
    out["first_pyspy_ratio"] = ratio(series["diag_first_pyspy"], base)
    out["steady_ratio"] = ratio(series["diag_steady"], base)
    out["floor_ratio"] = floor_s / base.median
    out["first_vs_subprocesses"] = ratio(series["diag_first"], series["raw_subprocesses"])
    out["steady_vs_subprocesses"] = ratio(series["diag_steady"], series["raw_subprocesses"])
    return out


def describe(figures: Dict[str, float]) -> str:
    keys = sorted(figures)
    return "\n".join(f"{k:<32} {figures[k]:.4f}" for k in keys)


def series_of(figures: Dict[str, float], name: str) -> Series:
    return Series((figures[f"{name}_median_s"],))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.snapshot")
    parser.add_argument("ranks", type=int, nargs="?", default=4)
    parser.add_argument("repeats", type=int, nargs="?", default=5)
    parser.add_argument("--busy", type=int, default=0, help="spinning threads per rank")
    args = parser.parse_args()
    print(describe(measure(args.ranks, repeats=args.repeats, busy=args.busy)))
