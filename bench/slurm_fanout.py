"""``diag capture --slurm-job`` across N real local slurmd against one node's capture, interleaved.

The cluster is the tests' (``tests/slurm_cluster.py``): munged, slurmctld and N slurmd, every
one but the first in its own network namespace on a bridge. One job of one rank per node
(``tests/slurm/job.sh``, ``rank.py``) runs while, per repeat, in this order:

* ``diag capture --pid RANK0`` (one node's capture, the baseline): the whole CLI, sampling,
  verdict and the three outputs;
* ``diag capture --slurm-job JOB`` over every node, same ``--count`` / ``--interval``: srun
  fan-out, each node's collector, its bundle back over srun's stdout (decoded as it arrives),
  the merge, one verdict, the outputs: the time to the merged verdict;
* the same fan-out to a job of one node: what srun and a remote start add to one capture.

Then one more fan-out in this process, its timeline kept (when the first and last node said
hello and done, when the last bundle was decoded, when the verdict and outputs were written):
where the time goes.

All N nodes share this machine's cores, which a real cluster does not: the N collectors (each a
Python start, diag's imports, its forked workers) run side by side on the same CPUs. So that
in-process run starts each node's collector under a wrapper (``DIAG_SLURM_NODE_CMD``, this
``_NODE_CPU``) that records the CPU it and its children used, and ``floor_s`` =
max(one capture, the N collectors' CPU / cores) is the wall time no schedule of that work on
this machine could beat (a real cluster has N x the cores).
"""

from __future__ import annotations

import importlib
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench.stats import collect

REPO = Path(__file__).resolve().parent.parent


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _capture(argv: List[str], out: Path, env: Dict[str, str]) -> Tuple[float, float]:
    """(wall s, its CPU s: the CLI's and its children's) of one ``diag capture``."""
    mine, t0 = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "diag", "capture", *argv, "-o", str(out)],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"diag capture {' '.join(argv)} failed: {done.stderr[-1500:]}")
    return wall, _children_cpu_s() - mine


def _cluster_module() -> Any:
    """tests/slurm_cluster.py, the one cluster code the tests use too."""
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module("slurm_cluster")


# The wrapper each node's collector runs under in the timeline run: the collector, then the CPU
# seconds it used (its children's too) appended to a file. Self-contained: it runs on the node.
_NODE_CPU = """\
import os, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"%.4f\\n" % (used.ru_utime + used.ru_stime))
sys.exit(code)
"""


def _timeline(job_id: int, count: int, interval_s: float, out: Path) -> Dict[str, float]:
    """One in-process fan-out (what ``diag capture --slurm-job`` runs after its CLI start-up),
    the moments of its srun's lines, from the start."""
    from diag.commands.merge import finish
    from diag.slurm import controller
    from diag.slurm.wire import Gathered

    runs: List[Gathered] = []
    real = controller.run_srun
    cpu_file = out / "node-cpu.txt"
    cpu_file.write_text("")
    wrapper = [sys.executable, "-c", _NODE_CPU, str(cpu_file)]
    old_cmd = os.environ.get(controller.NODE_CMD_ENV)
    os.environ[controller.NODE_CMD_ENV] = shlex.join([*wrapper, sys.executable, "-m", "diag"])

    def recording(*args: Any, **kwargs: Any) -> Gathered:
        runs.append(real(*args, **kwargs))
        return runs[-1]

    controller.run_srun = recording  # type: ignore[assignment]
    try:
        t0 = time.time()
        done = controller.capture_job(job_id, count=count, interval_s=interval_s)
        gathered_s = time.time() - t0
        finish(done.bundle, str(out / "timeline.json"), f"slurm-{job_id}", ())
        verdict_s = time.time() - t0
    finally:
        controller.run_srun = real  # type: ignore[assignment]
        if old_cmd is None:
            os.environ.pop(controller.NODE_CMD_ENV, None)
        else:
            os.environ[controller.NODE_CMD_ENV] = old_cmd
    nodes = [n for g in runs for n in g.nodes.values()]
    deadline = time.monotonic() + 10.0  # each wrapper writes once its collector has exited
    while len(cpu_file.read_text().split()) < len(nodes) and time.monotonic() < deadline:
        time.sleep(0.1)
    node_cpu = [float(v) for v in cpu_file.read_text().split()]
    hellos = [n.hello_recv_s - t0 for n in nodes if n.hello_recv_s is not None]
    dones = [n.done_recv_s - t0 for n in nodes if n.done_recv_s is not None]
    return {
        "t_first_hello_s": min(hellos),
        "t_last_hello_s": max(hellos),
        "t_first_done_s": min(dones),
        "t_last_done_s": max(dones),
        "t_gathered_s": gathered_s,
        "t_verdict_s": verdict_s,
        "nodes_cpu_s": sum(node_cpu),
        "node_cpu_max_s": max(node_cpu, default=0.0),
        "nodes_cpu_reported": float(len(node_cpu)),
    }


# (--count, --interval): diag capture's defaults, and a short capture where the fixed costs
# (srun, the nodes' Python start) weigh most.
SETTINGS: Tuple[Tuple[int, float], ...] = ((3, 2.0), (2, 0.5))


def _one_setting(
    cluster: Any, jobs: Tuple[Any, Any], rank0: str, setting: Tuple[int, float], repeats: int,
    out: Path,
) -> Dict[str, float]:  # fmt: skip
    job, one = jobs
    count, interval_s = setting
    env = dict(cluster.env, PYTHONPATH=str(REPO))
    common = ["--count", str(count), "--interval", f"{interval_s:g}"]
    single: List[float] = []
    single_cpu: List[float] = []
    fanout: List[float] = []
    fanout_1: List[float] = []
    for _ in range(repeats):
        wall, own = _capture(["--pid", rank0, *common], out / "single", env)
        single.append(wall)
        single_cpu.append(own)
        wall, _ = _capture(["--slurm-job", str(job.job_id), *common], out / "all", env)
        fanout.append(wall)
        wall, _ = _capture(["--slurm-job", str(one.job_id), *common], out / "one", env)
        fanout_1.append(wall)
    old_conf = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        timeline = _timeline(job.job_id, count, interval_s, out)
    finally:
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf
    cores = os.cpu_count() or 1
    sg, f, f1 = collect(single), collect(fanout), collect(fanout_1)
    floor_s = max(sg.median, timeline["nodes_cpu_s"] / cores)
    return {
        "count": float(count),
        "interval_s": interval_s,
        "single_median_s": sg.median,
        "single_min_s": sg.min,
        "single_cpu_median_s": collect(single_cpu).median,
        "fanout_median_s": f.median,
        "fanout_min_s": f.min,
        "fanout_1_median_s": f1.median,
        "fanout_1_min_s": f1.min,
        "ratio": f.median / sg.median,
        "ratio_min": f.min / sg.min,
        "fanout_1_ratio": f1.median / sg.median,
        "floor_s": floor_s,
        "floor_ratio": floor_s / sg.median,
        **timeline,
    }


def measure(
    nodes: int = 8, repeats: int = 5, settings: Sequence[Tuple[int, float]] = SETTINGS
) -> Dict[str, float]:
    """Per setting ``k`` (``s{k}_...``): seconds (median, min) of each, the ratio of the fan-out
    to one node's capture, the CPU floor and the timeline; RuntimeError saying why where
    Slurm cannot start or gives fewer nodes than asked."""
    sc = _cluster_module()
    root = Path(tempfile.mkdtemp(prefix="diag-bench-slurm-"))
    root.chmod(0o755)  # munged wants every directory above its socket searchable
    cluster = sc.Cluster(root)
    figures: Dict[str, float] = {
        "nodes": float(nodes), "cores": float(os.cpu_count() or 1), "repeats": float(repeats),
        "settings": float(len(settings)),
    }  # fmt: skip
    try:
        try:
            started = time.perf_counter()
            sc.start_cluster(cluster, want_nodes=nodes)
            figures["cluster_start_s"] = time.perf_counter() - started
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"Slurm cannot start here: {exc}") from exc
        if len(cluster.nodes) < nodes:
            raise RuntimeError(f"only {len(cluster.nodes)} of {nodes} nodes: {cluster.fallback}")
        jobs = (cluster.submit(nodes), cluster.submit(1))
        jobs[0].wait_ready(nodes)
        jobs[1].wait_ready(1)
        rank0 = re.findall(r"READY rank 0 pid (\d+)", jobs[0].out.read_text())[0]
        out = root / "out"
        out.mkdir()
        for k, setting in enumerate(settings):
            measured = _one_setting(cluster, jobs, rank0, setting, repeats, out)
            figures.update({f"s{k}_{name}": value for name, value in measured.items()})
        for job in jobs:
            job.cancel()
    finally:
        sc.stop_cluster(cluster)
    return figures


Line = Tuple[str, str, str, str, Optional[bool]]


def rows(figures: Dict[str, float]) -> List[Line]:
    """(measure, target, measured, ratio, met) per setting, for bench.run's table: the ratio,
    then what explains it (the fan-out to one node, the CPU, the timeline)."""
    out: List[Line] = []
    n, cores = int(figures["nodes"]), int(figures["cores"])
    for k in range(int(figures["settings"])):
        f = {name[len(f"s{k}_") :]: v for name, v in figures.items() if name.startswith(f"s{k}_")}
        c, i = int(f["count"]), f"{f['interval_s']:g}"
        out.append(
            (
                f"Slurm fan-out, {n} local slurmd nodes: time to merged verdict "
                f"(`capture --slurm-job --count {c} --interval {i}`)",
                "<= 1.5 x one node's `capture --pid`",
                f"{f['fanout_median_s']:.2f} s (min {f['fanout_min_s']:.2f}) vs one node "
                f"{f['single_median_s']:.2f} s (min {f['single_min_s']:.2f})",
                f"{f['ratio']:.2f} (min/min {f['ratio_min']:.2f})",
                max(f["ratio"], f["ratio_min"]) <= 1.5,
            )
        )
        out.append(
            (
                "  same, fan-out to a job of 1 node (srun + the node's start, nothing shared)",
                "(explains)",
                f"{f['fanout_1_median_s']:.2f} s (min {f['fanout_1_min_s']:.2f})",
                f"{f['fanout_1_ratio']:.2f}",
                None,
            )
        )
        out.append(
            (
                f"  same, in-process: the {n} collectors' CPU / {cores} cores; timeline",
                "(explains: bound here)",
                f"{f['nodes_cpu_s']:.2f} s CPU (max {f['node_cpu_max_s']:.2f} a node; one "
                f"`capture --pid`: {f['single_cpu_median_s']:.2f} s); nodes' hello "
                f"{f['t_first_hello_s']:.2f}-{f['t_last_hello_s']:.2f} s, done "
                f"{f['t_first_done_s']:.2f}-{f['t_last_done_s']:.2f} s, merged "
                f"{f['t_gathered_s']:.2f} s, verdict + outputs {f['t_verdict_s']:.2f} s",
                f"{f['floor_ratio']:.2f}",
                None,
            )
        )
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for key, value in sorted(measure(n, reps).items()):
        print(f"{key:<24} {value:.4f}")
