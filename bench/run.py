"""``make bench``: every benchmark in one run, a table of ratios against raw py-spy, BENCHMARKS.md.

    .venv/bin/python -m bench.run                      # full run, table on stdout
    .venv/bin/python -m bench.run --write BENCHMARKS.md
    .venv/bin/python -m bench.run --smoke              # seconds: checks that every bench runs
    .venv/bin/python -m bench.run --only snapshot_8x300,slurm_fanout   # some sections only

Benchmarks are not tests: nothing here fails on a slow machine. Each row says its target and
whether this run met it; ``--smoke`` (what CI runs) shrinks every situation so the whole run
takes seconds and only proves the code paths work. The sections live in their own modules:
``snapshot`` (diag vs raw py-spy on a live N-rank job), ``overhead`` (target throughput under
``diag watch --interval 1``), ``render_cost`` (long synthetic bundles), ``watch_memory``
(collector RSS over a simulated day, from the watch helper), ``cli_cost`` (start-up and
``diag capture --count 1`` end to end), ``slurm_fanout`` (``capture --slurm-job`` over N real
local slurmd against one node's capture; skipped, saying why, where Slurm cannot start),
``saturation`` (``diag capture --pid`` beside 1x and 4x CPU hogs per core against a quiet
host, with diag's priority boost, its real-time variant and without it), ``hostile`` (the
issue-25 targets against the stack, output and environment budgets), ``monitor`` (issue 33:
``diag watch``'s false alarms over healthy jobs and its time to detect a hang).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from functools import partial
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from bench import (
    cli_cost,
    discovery_cost,
    hostile,
    monitor,
    overhead,
    saturation,
    scale,
    slurm_fanout,
    snapshot,
)
from bench.notes import NOTES
from bench.report import Row, machine_facts, markdown, table

Figures = Dict[str, Dict[str, float]]


class Sizes(NamedTuple):
    """How big each situation is: the real run and the smoke run differ only here."""

    snapshot_ranks: Tuple[int, ...]
    snapshot_threads: int
    snapshot_repeats: int
    overhead_pairs: int
    overhead_window_s: float
    render_samples: Tuple[int, int]
    render_repeats: int
    watch_samples: int
    startup_repeats: int
    capture_ranks: int
    capture_repeats: int
    scale_hosts: int = 512  # x 8 ranks x scale_threads threads (issue 19)
    scale_threads: int = 300
    discovery_others: int = 5000  # other PIDs on the host while discovery is timed
    snapshot_big: Tuple[int, int] = (8, 300)  # ranks x threads of the issue-19 first sample
    slurm_nodes: int = 8  # local slurmd of the fan-out bench (issue 19)
    slurm_repeats: int = 5
    # capture beside CPU hogs (issue 27): repeats per situation, --count, --interval
    saturation: Tuple[int, int, float] = (5, 3, 2.0)
    # hostile targets (issue 25): threads x name chars of the deep stacks; processes x env vars
    hostile: Tuple[int, int, int, int] = (40, 5000, 5, 30_000)
    # diag watch as a monitor (issue 33): samples per healthy job, --interval, healthy jobs
    monitor: Tuple[int, float, int] = (20, 2.0, 5)


FULL = Sizes((4, 8), 64, 7, 40, 2.0, (120, 2880), 5, 2880, 7, 4, 5)
SMOKE = Sizes(
    (2,),
    8,
    1,
    1,
    0.5,
    (4, 8),
    1,
    20,
    1,
    2,
    1,
    10,
    8,
    200,
    (2, 16),
    2,
    1,
    (1, 2, 0.5),
    (4, 600, 2, 500),
    (4, 0.5, 2),
)


def isolated(function: str, **kwargs: Any) -> Dict[str, float]:
    """Run ``module.function(**kwargs)`` in a fresh interpreter and return its figures.

    Memory figures need it (the RSS of a process that already built a 24-hour bundle says
    nothing about the watch), and it keeps one section's garbage out of the next's timings.
    """
    module, _, name = function.rpartition(".")
    code = (
        "import json, sys\n"
        f"from {module} import {name}\n"
        f"print(json.dumps({name}(**json.loads(sys.argv[1]))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{function} failed: {proc.stderr[-2000:]}")
    figures: Dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def _slurm_fanout(sizes: Sizes, log: Callable[[str], None]) -> Dict[str, float]:
    try:
        settings = slurm_fanout.SETTINGS if sizes.slurm_repeats > 1 else ((2, 0.5),)
        return slurm_fanout.measure(sizes.slurm_nodes, sizes.slurm_repeats, settings)
    except RuntimeError as exc:  # no Slurm, not root, no namespaces: a skipped row, not a crash
        log(f"bench: slurm_fanout skipped: {exc}")
        return {"skipped": 1.0, "nodes": float(sizes.slurm_nodes)}


def run_all(
    sizes: Sizes, log: Callable[[str], None], only: Optional[Sequence[str]] = None
) -> Figures:
    """Every section, or those whose name starts with one of ``only``."""
    figures: Figures = {}

    def step(name: str, fn: Callable[[], Dict[str, float]]) -> None:
        if only and not any(name.startswith(prefix) for prefix in only):
            return
        log(f"bench: {name} ...")
        t0 = time.perf_counter()
        figures[name] = fn()
        log(f"bench: {name} done in {time.perf_counter() - t0:.1f} s")

    for n in sizes.snapshot_ranks:
        step(
            f"snapshot_{n}",
            partial(snapshot.measure, n, sizes.snapshot_threads, sizes.snapshot_repeats),
        )
    big_ranks, big_threads = sizes.snapshot_big
    step(
        f"snapshot_{big_ranks}x{big_threads}",
        partial(snapshot.measure, big_ranks, big_threads, sizes.snapshot_repeats),
    )
    step("overhead", lambda: overhead.measure(sizes.overhead_pairs, sizes.overhead_window_s))
    short, long = sizes.render_samples
    render = "bench.render_cost.measure"
    step("render_1h", partial(isolated, render, samples=short, repeats=sizes.render_repeats))
    step(
        "render_24h", partial(isolated, render, samples=long, repeats=min(sizes.render_repeats, 3))
    )
    step("watch_memory", partial(isolated, "bench.watch_memory.run", samples=sizes.watch_samples))
    step("startup", lambda: cli_cost.measure_startup(sizes.startup_repeats))
    step(
        "capture",
        lambda: cli_cost.measure_capture(
            sizes.capture_ranks, sizes.snapshot_threads, sizes.capture_repeats
        ),
    )
    for story in scale.STORIES:  # each in a fresh interpreter: its peak RSS is its own
        step(
            f"scale_{story}",
            partial(
                isolated,
                "bench.scale.run",
                which=story,
                hosts=sizes.scale_hosts,
                threads=sizes.scale_threads,
            ),
        )
    step("discovery", lambda: discovery_cost.measure(sizes.discovery_others))
    from bench import ps_cost  # issue 26: diag ps on a busy host

    step("ps", lambda: ps_cost.measure(sizes.discovery_others))
    step("slurm_fanout", partial(_slurm_fanout, sizes, log))
    repeats, count, interval_s = sizes.saturation
    step("saturation", partial(saturation.measure, repeats, count, interval_s))
    step("hostile", partial(isolated, "bench.hostile.measure", **_hostile_kwargs(sizes)))
    samples, every_s, jobs = sizes.monitor
    step("monitor", partial(monitor.measure, samples, every_s, jobs))
    return figures


def _hostile_kwargs(sizes: Sizes) -> Dict[str, Any]:
    threads, name_chars, env_procs, env_vars = sizes.hostile
    return {
        "threads": threads,
        "name_chars": name_chars,
        "env_procs": env_procs,
        "env_vars": env_vars,
    }


def rows_of(figures: Figures) -> List[Row]:
    """The table: one row per target of issue 7, plus the figures that explain them."""
    rows: List[Row] = []
    for key in sorted(k for k in figures if k.startswith("snapshot_")):
        f = figures[key]
        n, t = int(f["ranks"]), int(f["threads"])
        base = f["raw_slowest_single_median_s"]
        rows.append(
            Row(
                f"raw `py-spy dump` of one rank, slowest of {n} (x {t} threads)",
                "baseline",
                f"{base:.3f} s (min {f['raw_slowest_single_min_s']:.3f})",
                "1.00",
                None,
            )
        )
        of = f"{n} ranks" if t == 64 else f"{n} ranks x {t} threads"
        rows.append(
            Row(
                f"diag snapshot, first sample (= `capture --count 1`), {of}",
                "<= 1.5 x baseline",
                f"{f['diag_first_median_s']:.3f} s (min {f['diag_first_min_s']:.3f})",
                f"{f['first_ratio']:.2f} (min/min {f['first_ratio_min']:.2f})",
                max(f["first_ratio"], f["first_ratio_min"]) <= 1.5,
            )
        )
        rows.append(
            Row(
                "  first sample's slowest probes: NVML worker, workers (/proc + stacks)",
                "(explains)",
                f"{f.get('first_probe_gpu_median_s', float('nan')):.3f} s, "
                f"{f.get('first_probe_workers_median_s', float('nan')):.3f} s",
                "",
                None,
            )
        )
        rows.append(
            Row(
                "  same, with py-spy per rank (as for Python < 3.11)",
                "(compares)",
                f"{f['diag_first_pyspy_median_s']:.3f} s (min {f['diag_first_pyspy_min_s']:.3f})",
                f"{f['first_pyspy_ratio']:.2f}",
                None,
            )
        )
        rows.append(
            Row(
                f"diag snapshot, steady sample (each `watch` sample), {of}",
                "<= 1.5 x baseline",
                f"{f['diag_steady_median_s']:.3f} s (min {f['diag_steady_min_s']:.3f})",
                f"{f['steady_ratio']:.2f} (min/min {f['steady_ratio_min']:.2f})",
                max(f["steady_ratio"], f["steady_ratio_min"]) <= 1.5,
            )
        )
        rows.append(
            Row(
                f"py-spy's CPU floor: {n} dumps' CPU / {int(f['cores'])} cores",
                "(bound on py-spy per rank)",
                f"{f['raw_cpu_sum_median_s']:.3f} s CPU",
                f"{f['floor_ratio']:.2f}",
                None,
            )
        )
        rows.append(
            Row(
                f"raw `py-spy dump --subprocesses` of the job, {of}",
                "diag faster",
                f"{f['raw_subprocesses_median_s']:.3f} s (min {f['raw_subprocesses_min_s']:.3f});"
                f" diag first / steady sample take {f['first_vs_subprocesses']:.2f} / "
                f"{f['steady_vs_subprocesses']:.2f} of it",
                f"{f['raw_subprocesses_median_s'] / base:.2f}",
                f["first_vs_subprocesses"] < 1.0,
            )
        )
    o = figures.get("overhead")
    if o:
        _overhead_rows(rows, o)
    _long_rows(rows, figures)
    rows.extend(Row(m, t, v, "", ok) for m, t, v, ok in scale.rows(figures))
    d = figures.get("discovery")
    if d:
        rows.append(
            Row(
                f"process discovery per sample, {int(d['host_pids']):,} PIDs on the host "
                f"(tree of {int(d['tree'])})",
                "<= 2 ms or <= 0.1 x full scan",
                f"{d['steady_median_s'] * 1e3:.2f} ms (min {d['steady_min_s'] * 1e3:.2f}) vs "
                f"full scan {d['full_median_s'] * 1e3:.1f} ms; same tree: "
                f"{'yes' if d['same_answer'] else 'NO'}",
                f"{d['ratio']:.3f}",
                bool(d["same_answer"]) and (d["steady_median_s"] <= 0.002 or d["ratio"] <= 0.1),
            )
        )
    if "ps" in figures:
        from bench import ps_cost

        rows.extend(Row(*line) for line in ps_cost.rows(figures["ps"]))
    sf = figures.get("slurm_fanout")
    if sf and sf.get("skipped"):
        rows.append(
            Row(
                f"Slurm fan-out, {int(sf['nodes'])} local slurmd nodes",
                "<= 1.5 x one node's capture",
                "skipped: Slurm cannot start here (the run's log says why)",
                "",
                None,
            )
        )
    elif sf:
        rows.extend(Row(*line) for line in slurm_fanout.rows(sf))
    if "saturation" in figures:
        rows.extend(Row(*line) for line in saturation.rows(figures["saturation"]))
    if "hostile" in figures:
        rows.extend(hostile.rows(figures["hostile"]))
    if "monitor" in figures:
        rows.extend(Row(*line) for line in monitor.rows(figures["monitor"]))
    return rows


def _overhead_rows(rows: List[Row], o: Dict[str, float]) -> None:
    rows.append(
        Row(
            "target throughput with `diag watch --interval 1` / without",
            ">= 0.99",
            f"{o['with_median_ips']:,.0f} / {o['without_median_ips']:,.0f} it/s; per-pair "
            f"quartiles {o['ratio_q1']:.3f}-{o['ratio_q3']:.3f} ({int(o['pairs'])} pairs)",
            f"{o['ratio_median']:.3f}",
            o["ratio_median"] >= 0.99,
        )
    )
    rows.append(
        Row(
            "  same, per CPU second of the target",
            "(explains)",
            f"the watch (its workers and py-spy included) used "
            f"{o['watch_cpu_pct_median']:.1f} % of one core",
            f"{o['cpu_ratio_median']:.3f}",
            None,
        )
    )


def _long_rows(rows: List[Row], figures: Figures) -> None:
    """Render cost, watch memory, CLI start-up and capture: the rows of the sections run."""
    for key, limit_mb in (("render_1h", 2.0), ("render_24h", 10.0)):
        if key not in figures:
            continue
        r = figures[key]
        html_mb = r["html_bytes"] / 1e6
        ok = html_mb <= limit_mb and (key != "render_1h" or r["render_median_s"] <= 1.0)
        target = "<= 1 s, <= 2 MB" if key == "render_1h" else "<= 10 MB"
        rows.append(
            Row(
                f"render {r['hours']:.3g} h bundle ({int(r['samples'])} samples, 8 x 60)",
                target,
                f"{r['render_median_s']:.3f} s, HTML {html_mb:.2f} MB, "
                f"MD {r['md_bytes'] / 1e3:.1f} kB (JSON bundle {r['json_bytes'] / 1e6:.0f} MB)",
                "",
                ok,
            )
        )
    w = figures.get("watch_memory")
    if w:
        flat = w["rss_growth_after_quarter_mib"] <= 8.0
        rows.append(
            Row(
                f"collector RSS, simulated watch of {int(w['samples'])} samples",
                "flat, <= 80 MB",
                f"{w['rss_start_mib']:.0f} -> {w['rss_quarter_mib']:.0f} -> "
                f"{w['rss_end_mib']:.0f} MiB (journal {w['journal_mib']:.0f} MiB)",
                "",
                flat and w["rss_end_mib"] <= 80.0,
            )
        )
    s = figures.get("startup")
    if s:
        rows.append(
            Row(
                "CLI start-up: `diag --help` minus `python -c pass`",
                "(part of the next)",
                f"{s['cli_import_median_s']:.3f} s (help {s['help_median_s']:.3f} s)",
                "",
                None,
            )
        )
    c = figures.get("capture")
    if c:
        rows.append(
            Row(
                f"`diag capture --count 1` beyond the sample, {int(c['ranks'])} ranks",
                "<= 0.5 s",
                f"{c['beyond_sample_median_s']:.3f} s of "
                f"{c['total_median_s']:.3f} s total (min {c['beyond_sample_min_s']:.3f})",
                "",
                c["beyond_sample_median_s"] <= 0.5,
            )
        )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="diag benchmarks (issue 7)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: check that all run")
    parser.add_argument("--write", metavar="PATH", help="write the Markdown report to PATH")
    parser.add_argument(
        "--only",
        metavar="NAMES",
        help="only the sections whose name starts with one of these (comma-separated, e.g. "
        "snapshot_8x300,slurm_fanout): their rows on stdout, with their figures",
    )
    args = parser.parse_args(argv)
    if args.only and args.write:
        parser.error("--only writes no BENCHMARKS.md (it would lack the other rows)")
    sizes = SMOKE if args.smoke else FULL
    facts_before = machine_facts()
    started = time.time()
    only = [name for name in (args.only or "").split(",") if name]
    figures = run_all(sizes, lambda line: print(line, file=sys.stderr, flush=True), only)
    if only:  # the table, then the same as Markdown: its rows and figures to paste in
        rows = rows_of(figures)
        print(table(rows))
        command = ".venv/bin/python -m bench.run --only " + ",".join(only)
        facts = {**facts_before, "load_after": machine_facts()["load_before"]}
        print("\n" + markdown(rows, figures, facts, command, time.time() - started))
        return 0
    facts = {**facts_before, "load_after": machine_facts()["load_before"]}
    rows = rows_of(figures)
    print(table(rows))
    if args.write:
        command = "make bench  # = .venv/bin/python -m bench.run --write BENCHMARKS.md"
        if args.smoke:
            command = ".venv/bin/python -m bench.run --smoke --write " + args.write
        text = markdown(rows, figures, facts, command, time.time() - started, NOTES)
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
