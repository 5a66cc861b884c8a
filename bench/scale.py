"""Scale (issue 19): one verdict for 4,096 ranks on 512 nodes, in seconds, in a readable report.

Synthetic per-host bundles (``bench.synth``'s builders, scaled): ``hosts`` nodes x ``per_host``
ranks x ``threads`` threads (the main thread and a pin-memory thread in Python, the rest native
NCCL/CUDA/OpenMP threads), ``samples`` samples 30 s apart, stacks interned by content hash and
shared by every rank that runs them, as a capture interns them. Four stories:

- ``healthy``: every rank steps through the same phase of the same training step;
- ``diverged``: every rank spins in ``all_reduce`` except one rank on one node, which waits on
  its DataLoader queue;
- ``missing``: healthy, but one node produced no bundle (the merge records a failed host);
- ``clock``: healthy, but one node's clock runs ~5 s ahead (measured by the gatherer).

Each story runs in a fresh interpreter: the per-host bundles are built, then the real path of
``diag merge`` is timed: ``merge_bundles`` over the per-host parts, ``judged`` (the NCCL log
summary and ``diag.verdict.classify``), the view, the HTML and the Markdown, scrubbed and
written (``diag.render.outputs.write_reports``). The JSON bundle of the merge is not written
here (at this size it is ~1 GB of text; its cost is a separate matter). The per-host parts
are built one at a time as the merge folds them (``host_parts``, as ``diag merge`` reads one
file at a time; the time spent building them is left out of the merge's). Peak RSS is the
process's (``ru_maxrss``: the one part being built included); ``rss_inputs_mib`` is the RSS
before the merge starts.

    .venv/bin/python -m bench.scale [story] [--profile]
"""

from __future__ import annotations

import gc
import re
import resource
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import msgspec

from bench import synth_story as story
from bench.synth import _gpu, _threads
from bench.synth_story import (
    ALLREDUCE,
    CLK_TCK,
    LAUNCHER_PID,
    QUEUE_GET,
    STEP_STACKS,
    T0_S,
    TRAIN,
)
from diag.bundle.merge import HostPart, MissingHost, merge_bundles
from diag.model import (
    Bundle,
    GpuSample,
    HostInfo,
    IoCounters,
    LogSample,
    ProcessInfo,
    ProcessSample,
    Sample,
    Stack,
    Target,
)

STORIES = ("healthy", "diverged", "missing", "clock", "straggler")
INTERVAL_S = 30.0


class Shape:
    """Sizes of the synthetic job; the suspect node/rank sit in the middle of it."""

    def __init__(self, hosts: int, per_host: int, threads: int, samples: int) -> None:
        self.hosts = hosts
        self.per_host = per_host
        self.threads = threads
        self.samples = samples
        self.ranks = hosts * per_host
        self.odd_host = (hosts * 5) // 8  # node-0320 of 512
        self.odd_local = min(5, per_host - 1)
        self.odd_rank = self.odd_host * per_host + self.odd_local


def host_name(h: int) -> str:
    return f"node-{h:04d}"


def _log(shape: Shape, h: int, index: int, scenario: str) -> LogSample:
    steps = index + 40 if scenario == "healthy" else 40
    first = h * shape.per_host
    tail = tuple(
        f"[rank{first + r}] step {s} loss {2.5 - s * 0.001:.3f}"
        for s in range(max(0, steps - 3), steps)
        for r in (0, 1)
    )
    return LogSample(
        path="/var/log/job/train.log",
        pids=(LAUNCHER_PID,),
        size_bytes=(12 + steps * shape.per_host) * 48,
        lines=12 + steps * shape.per_host,
        mtime_s=T0_S + steps * INTERVAL_S,
        inode=131077,
        head=(f"[launcher] starting {shape.per_host} workers on {host_name(h)}",),
        tail=tail,
    )


def host_bundle(shape: Shape, h: int, scenario: str, clock_s: float = 0.0) -> Bundle:
    """One node's bundle as ``diag capture`` on that node writes it (hosts unlabelled).

    ``scenario``: ``healthy`` (every rank steps) or ``diverged`` (every rank spins in
    ``all_reduce``, the odd rank of the odd node waits on its DataLoader queue)."""
    per = shape.per_host
    ranks = [h * per + local for local in range(per)]
    pids = [LAUNCHER_PID + 1 + local * 100 for local in range(per)]  # the same on every node
    cmd = ("torchrun", "--nnodes", str(shape.hosts), "--nproc-per-node", str(per), TRAIN)
    infos: List[ProcessInfo] = [
        ProcessInfo(
            pid=LAUNCHER_PID, name="torchrun", cmdline=cmd, role="launcher", exe="/usr/bin/python3"
        )
    ]
    for local, (rank, pid) in enumerate(zip(ranks, pids)):
        env = story.env(rank, shape.ranks, devices=per)  # the node's GPUs
        env["LOCAL_RANK"] = str(local)
        env["LOCAL_WORLD_SIZE"] = str(per)
        infos.append(
            ProcessInfo(
                pid=pid,
                ppid=LAUNCHER_PID,
                name="python3",
                exe="/usr/bin/python3",
                cmdline=("/usr/bin/python3", "-u", TRAIN, "--lr", "3e-4"),
                role="rank",
                rank=rank,
                local_rank=local,
                world_size=shape.ranks,
                rank_source="env:RANK",
                env=env,
                start_time_s=T0_S - 60.0 + clock_s,
            )
        )
    stacks: Dict[str, Stack] = {}
    out: List[Sample] = []
    for i in range(shape.samples):
        t_s = T0_S + i * INTERVAL_S + clock_s + 0.002 * (h % 7)
        procs: List[ProcessSample] = [
            ProcessSample(
                pid=LAUNCHER_PID,
                t_s=t_s,
                state="S",
                utime_ticks=50 + i,
                rss_bytes=90_000_000,
                num_threads=3,
                py_status="ok",
                listen_ports=(29500,) if h == 0 else (),
            )
        ]
        for local, (rank, pid) in enumerate(zip(ranks, pids)):
            odd = scenario in ("diverged", "straggler") and rank == shape.odd_rank
            if scenario == "healthy":
                main = STEP_STACKS[i % len(STEP_STACKS)]
            elif scenario == "straggler":  # the odd rank still computes its step's forward
                main = STEP_STACKS[0] if odd else ALLREDUCE
            else:
                main = QUEUE_GET if odd else ALLREDUCE
            spinning = not odd or scenario == "straggler"
            active = 40 + i if spinning else 40
            ths = _threads(pid, shape.threads, main, spinning, 40 + i, active, stacks)
            ticks = sum(t.utime_ticks for t in ths)
            moved = 40 + i if scenario == "healthy" else 40
            procs.append(
                ProcessSample(
                    pid=pid,
                    t_s=t_s + 0.001 * local,
                    state="R" if spinning else "S",
                    utime_ticks=ticks,
                    stime_ticks=ticks // 20,
                    rss_bytes=6_000_000_000 + moved * 10_000_000 + local * 1_000_000,
                    vms_bytes=40_000_000_000,
                    num_threads=shape.threads,
                    io=IoCounters(rchar=moved * 500_000_000 + local, wchar=moved * 1_000_000),
                    threads=ths,
                    py_status="ok",
                )
            )
        out.append(
            Sample(
                index=i,
                t_s=t_s,
                duration_s=0.4,
                processes=tuple(procs),
                logs=(_log(shape, h, i, scenario),),
                gpu=_story_gpu(shape, h, pids, i, scenario),
                probe_timings_s={"procfs": 0.05, "stacks": 0.04, "nvml": 0.01, "logs": 0.002},
            )
        )
    return Bundle(
        created_s=T0_S + clock_s,
        host=HostInfo(
            hostname=host_name(h),
            kernel="6.8.0-45-generic",
            machine="x86_64",
            cpu_count=224,
            clk_tck=CLK_TCK,
            python_version="3.11.7",
            diag_version="0.1.0",
            boot_time_s=T0_S - 86400 + clock_s,
        ),
        target=Target(root_pid=LAUNCHER_PID, command=cmd, log_paths=("/var/log/job/train.log",)),
        processes=tuple(infos),
        stacks=stacks,
        samples=tuple(out),
    )


def _story_gpu(shape: Shape, h: int, pids: List[int], index: int, scenario: str) -> GpuSample:
    """The node's GPUs: busy in a healthy step; in the other stories at full utilisation
    and idle power (NCCL kernels spinning in the collective) - but for the straggler's own
    GPU, which computes at full power."""
    if scenario == "healthy":
        return _gpu(pids, index, False)
    stuck = _gpu(pids, index, True)
    if scenario != "straggler" or h != shape.odd_host:
        return stuck
    devices = list(stuck.devices)
    devices[shape.odd_local] = _gpu(pids, index, False).devices[shape.odd_local]
    return msgspec.structs.replace(stuck, devices=tuple(devices))


def story_missing(shape: Shape, which: str) -> List[MissingHost]:
    """The node that produced no bundle in the ``missing`` story (none in the others)."""
    if which != "missing":
        return []
    h = shape.odd_host
    reason = f"srun: error: {host_name(h)}: task {h}: Communication connection failure"
    return [MissingHost(name=host_name(h), reason=reason, duration_s=30.0)]


def host_parts(shape: Shape, which: str) -> Iterator[HostPart]:
    """The per-host parts of one story, built one at a time as they are asked for - as ``diag
    merge`` reads its files - so a merge that folds each as it comes never holds them all."""
    scenario = which if which in ("diverged", "straggler") else "healthy"
    for h in range(shape.hosts):
        if which == "missing" and h == shape.odd_host:
            continue
        offset = 5.02 if which == "clock" and h == shape.odd_host else ((h * 7919) % 21 - 10) / 1e3
        yield HostPart(
            bundle=host_bundle(shape, h, scenario, clock_s=offset),
            label=host_name(h),
            clock_offset_s=offset,
            clock_offset_error_s=0.002,
            clock_source="srun-stdout",
        )


def expected(shape: Shape, which: str) -> Dict[str, object]:
    """What the report must name first: the odd node (and rank), none when healthy."""
    expect: Dict[str, object] = {} if which == "healthy" else {"host": host_name(shape.odd_host)}
    if which in ("diverged", "straggler"):
        expect["rank"] = shape.odd_rank
    return expect


def make_parts(
    shape: Shape, which: str
) -> Tuple[List[HostPart], List[MissingHost], Dict[str, object]]:
    """The per-host parts of one story all built (for tests and small sizes), what it left
    out, and what the report must name."""
    return list(host_parts(shape, which)), story_missing(shape, which), expected(shape, which)


class _Timed:
    """The parts of a generator, with the time spent building them summed apart (the bench
    times the merge, not the synthetic job's construction)."""

    def __init__(self, parts: Iterator[HostPart]) -> None:
        self.parts = parts
        self.build_s = 0.0

    def __iter__(self) -> Iterator[HostPart]:
        while True:
            t = time.perf_counter()
            part = next(self.parts, None)
            self.build_s += time.perf_counter() - t
            if part is None:
                return
            yield part


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return float("nan")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(
    which: str = "diverged",
    hosts: int = 512,
    per_host: int = 8,
    threads: int = 300,
    samples: int = 3,
    profile: str = "",
) -> Dict[str, float]:
    """One story at one size: seconds per stage, peak RSS, report sizes, targets checked."""
    from diag.commands.capture import judged
    from diag.render.html import render_html
    from diag.render.markdown import render_markdown
    from diag.render.outputs import view_of, write_reports

    shape = Shape(hosts, per_host, threads, samples)
    missing, expect = story_missing(shape, which), expected(shape, which)
    gc.collect()
    rss_inputs = _rss_mib()  # before the merge: the parts are built as the merge asks
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    times: Dict[str, float] = {}
    parts = _Timed(host_parts(shape, which))
    t = time.perf_counter()
    merged = merge_bundles(parts, missing)
    build_s = parts.build_s
    times["merge_s"] = time.perf_counter() - t - build_s
    t = time.perf_counter()
    bundle = judged(merged)
    times["classify_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        html_path, md_path = write_reports(bundle, Path(tmp) / "merged.json")
        html = html_path.read_text(encoding="utf-8")
        md = md_path.read_text(encoding="utf-8")
    times["render_s"] = time.perf_counter() - t
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    total = sum(times.values())
    peak = _peak_mib()
    verdict = bundle.verdict
    assert verdict is not None
    # What a person must see: the suspect node (and rank) in the banner and first in the MD.
    banner = html[html.find('<section id="verdict"') : html.find("</section>")]
    rank = expect.get("rank")
    rank_text = f"rank {rank}" if rank is not None else None
    if "host" in expect:  # healthy: nobody to name
        host = str(expect["host"])
        in_banner = host in banner and (rank_text is None or rank_text in banner)
        md_first = _named_first(md, host, rank_text)
    else:
        in_banner = md_first = True
    # Not timed, for the figures only: the view's own build (write_reports includes it).
    t = time.perf_counter()
    view = view_of(bundle)
    view_s = time.perf_counter() - t
    t = time.perf_counter()
    render_html(view)
    html_s = time.perf_counter() - t
    t = time.perf_counter()
    render_markdown(view)
    md_s = time.perf_counter() - t
    return {
        "hosts": float(hosts),
        "ranks": float(shape.ranks),
        "threads": float(threads),
        "samples": float(samples),
        "thread_records": float(shape.ranks * threads * samples),
        "build_inputs_s": build_s,
        **times,
        "total_s": total,
        "view_s": view_s,
        "html_render_s": html_s,
        "md_render_s": md_s,
        "rss_inputs_mib": rss_inputs,
        "peak_rss_mib": peak,
        "html_bytes": float(len(html.encode("utf-8"))),
        "md_chars": float(len(md)),
        "state_" + verdict.state: 1.0,
        "suspects": float(len(verdict.suspects)),
        "classes": float(len(verdict.classes)),
        "suspect_in_banner": float(in_banner),
        "suspect_first_in_md": float(md_first),
        "failed_hosts": float(sum(1 for e in bundle.hosts if e.status == "failed")),
        "met": float(
            total <= 10.0
            and peak <= 1536.0
            and len(html.encode("utf-8")) <= 10e6
            and len(md) <= 60_000
            and in_banner
            and md_first
        ),
    }


def _named_first(md: str, host: str, rank_text: Optional[str]) -> bool:
    """The first node the Markdown names is the suspect's (and the first rank, its rank)."""
    node = re.search(r"node-\d{4}", md)
    if node is None or node.group(0) != host:
        return False
    if rank_text is None:
        return True
    rank = re.search(r"rank \d+", md)
    return rank is not None and rank.group(0) == rank_text


def rows(figures: Dict[str, Dict[str, float]]) -> List[Tuple[str, str, str, Optional[bool]]]:
    """(measure, target, measured, met) per story, for bench.run's table."""
    out: List[Tuple[str, str, str, Optional[bool]]] = []
    for which in STORIES:
        f = figures.get(f"scale_{which}")
        if not f:
            continue
        state = next((k[6:] for k in f if k.startswith("state_")), "?")
        out.append(
            (
                f"scale, {which}: {int(f['ranks']):,} ranks on {int(f['hosts'])} nodes x "
                f"{int(f['threads'])} threads x {int(f['samples'])} samples: merge + classify + "
                "render",
                "<= 10 s, <= 1.5 GB RSS, HTML <= 10 MB, MD <= 60,000 chars, suspect first",
                f"{f['total_s']:.2f} s (merge {f['merge_s']:.2f}, classify {f['classify_s']:.2f}, "
                f"render {f['render_s']:.2f}); peak RSS {f['peak_rss_mib']:,.0f} MiB (before the "
                f"merge {f['rss_inputs_mib']:,.0f}); HTML {f['html_bytes'] / 1e6:.2f} MB, MD "
                f"{int(f['md_chars']):,} chars; verdict {state}; suspect / odd node in banner "
                f"{'yes' if f['suspect_in_banner'] else 'no'}, first in MD "
                f"{'yes' if f['suspect_first_in_md'] else 'no'}",
                bool(f["met"]),
            )
        )
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("story", nargs="?", default="diverged", choices=STORIES)
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--threads", type=int, default=300)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--profile", default="", help="write cProfile stats to this path")
    args = parser.parse_args(argv)
    figures = run(args.story, args.hosts, args.per_host, args.threads, args.samples, args.profile)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
