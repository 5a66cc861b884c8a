"""Time to a verdict on a saturated host (issue 27): ``diag capture --pid`` beside CPU hogs.

diag is run when a host looks wrong, and such a host often has every core busy. Here a real
job (``bench.job.start_job``: a launcher and 4 ranks of 64 threads, as an idle server's) is
captured end to end as a user runs it - ``diag capture --pid`` with the defaults, a fresh
interpreter, verdict and outputs written - while ``per_core`` x cores CPU-bound processes
(``while True: pass``: the busy part of the host, e.g. the busy-polling ranks of a server under
load) run beside it, against the same capture with no hogs, in one run, the situations
interleaved round by round so all see the same background. Each hog runs in a session of its
own, as a host's busy services and jobs do: with the kernel's autogroups (or cgroups) a nice
value then only orders diag's own threads, which is why the default boost is real-time.

Situations: ``quiet``; ``1x`` and ``4x`` hogs per core with diag's priority boost (the
default, ``collect.priority``: real-time workers); ``4x`` with the nice-only variant
(``DIAG_BOOST_POLICY=nice``) and with no boost (``DIAG_NO_BOOST=1``), which is what diag did
before issue 27. For each
capture: the wall time to the verdict, the spread of the intervals between samples (their real
timestamps against ``--interval``), the latest sample's lateness, and the CPU the hogs got
during the capture over what they got in a window just before it: what the capture cost the
busy work (with and without the boost: a boost only moves diag's CPU earlier, it should not
take more).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from bench.cli_cost import user_env
from bench.job import Job, start_job
from bench.stats import collect

DEFAULT_INTERVAL_S = 2.0  # diag capture's defaults (cli.py): 3 samples 2 s apart
DEFAULT_COUNT = 3


class Situation(NamedTuple):
    name: str
    per_core: int  # CPU hogs per core beside the job (0: a quiet host)
    env: Tuple[Tuple[str, str], ...]  # what selects the boost policy


SITUATIONS: Tuple[Situation, ...] = (
    Situation("quiet", 0, ()),
    Situation("1x", 1, ()),
    Situation("4x", 4, ()),
    Situation("4x_nice", 4, (("DIAG_BOOST_POLICY", "nice"),)),
    Situation("4x_off", 4, (("DIAG_NO_BOOST", "1"),)),
)


class Run(NamedTuple):
    wall_s: float  # launch to exit: the verdict printed, outputs written
    spread_s: float  # max |interval between samples - --interval|
    late_s: float  # the latest sample's lateness as diag recorded it
    first_s: float  # launch to the first sample's start (start-up, imports, target checks)
    after_s: float  # the last sample's end to exit (verdict, render, write)
    sample_s: float  # median sample duration
    lost_cpu_s: float  # hogs' CPU in the capture's wall time at the rate before it, minus got
    diag_cpu_s: float  # diag's CPU (its workers, py-spy and the NVML worker included)
    boosted: int  # samples whose burst ran at a raised priority


def start_hogs(count: int) -> List[subprocess.Popen[bytes]]:
    """``count`` CPU-bound processes, each in its own session (killed by ``stop_hogs``)."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(count)
    ]


def stop_hogs(hogs: Sequence[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        try:
            os.killpg(hog.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for hog in hogs:
        hog.wait(timeout=10)


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _cpu_s(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total * _TICK_S


def _rate(pids: Sequence[int], seconds: float) -> float:
    c0, t0 = _cpu_s(pids), time.perf_counter()
    time.sleep(seconds)
    return (_cpu_s(pids) - c0) / (time.perf_counter() - t0)


def _spread(samples: List[Dict[str, object]], interval_s: float) -> float:
    times = [float(s["t_s"]) for s in samples]  # type: ignore[arg-type]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return max((abs(g - interval_s) for g in gaps), default=0.0)


def capture_once(
    job: Job, hogs: Sequence[int], out: Path, env: Dict[str, str], count: int, interval_s: float
) -> Run:
    """One ``diag capture --pid`` of the job; the hogs' CPU in a window before it first."""
    before = _rate(hogs, 2.0) if hogs else 0.0
    argv = [sys.executable, "-m", "diag", "capture", "--pid", str(job.pid)]
    argv += ["--count", str(count), "--interval", f"{interval_s:g}", "-o", str(out)]
    c0, kids0 = _cpu_s(hogs), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0_wall, t0 = time.time(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env, timeout=300)
    wall_s = time.perf_counter() - t0
    got_s, kids1 = _cpu_s(hogs) - c0, resource.getrusage(resource.RUSAGE_CHILDREN)
    diag_cpu_s = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
    if not out.exists():
        raise RuntimeError(f"diag capture failed ({proc.returncode}): {proc.stderr[-2000:]!r}")
    bundle = json.loads(out.read_bytes())
    samples = bundle["samples"]
    last = samples[-1]
    end_s = float(last["t_s"]) + float(last.get("duration_s", 0.0))
    return Run(
        wall_s=wall_s,
        spread_s=_spread(samples, interval_s),
        late_s=max(float(s.get("late_s", 0.0)) for s in samples),
        first_s=float(samples[0]["t_s"]) - t0_wall,
        after_s=t0_wall + wall_s - end_s,
        sample_s=collect([float(s.get("duration_s", 0.0)) for s in samples]).median,
        lost_cpu_s=before * wall_s - got_s if hogs else float("nan"),
        diag_cpu_s=diag_cpu_s,
        boosted=sum(1 for s in samples if s.get("boost")),
    )


def _quartiles(values: List[float]) -> Tuple[float, float, float]:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 4], collect(ordered).median, ordered[(3 * n) // 4]


def measure(
    repeats: int = 3,
    count: int = DEFAULT_COUNT,
    interval_s: float = DEFAULT_INTERVAL_S,
    ranks: int = 4,
    threads: int = 64,
    situations: Sequence[Situation] = SITUATIONS,
) -> Dict[str, float]:
    """Every situation ``repeats`` times, interleaved (the order rotates each round)."""
    cores = os.cpu_count() or 1
    runs: Dict[str, List[Run]] = {s.name: [] for s in situations}
    base_env = user_env()
    with tempfile.TemporaryDirectory(prefix="diag-bench-saturation-") as tmp:
        job = start_job(ranks, threads)
        try:
            warm = Path(tmp) / "warm.json"  # bytecode and template caches, as installed
            capture_once(job, [], warm, base_env, 1, interval_s)
            for round_no in range(repeats):
                order = list(situations[round_no % len(situations) :])
                order += situations[: round_no % len(situations)]
                for situation in order:
                    env = {**base_env, **dict(situation.env)}
                    hogs = start_hogs(situation.per_core * cores)
                    try:
                        time.sleep(0.5 if hogs else 0.0)  # the hogs running, not starting
                        out = Path(tmp) / f"{situation.name}-{round_no}.json"
                        pids = [hog.pid for hog in hogs]
                        runs[situation.name].append(
                            capture_once(job, pids, out, env, count, interval_s)
                        )
                    finally:
                        stop_hogs(hogs)
        finally:
            job.stop()
    figures = _figures(runs, cores, repeats, count, interval_s)
    return {"ranks": float(ranks), "threads": float(threads), **figures}


def _figures(
    runs: Dict[str, List[Run]], cores: int, repeats: int, count: int, interval_s: float
) -> Dict[str, float]:
    out: Dict[str, float] = {
        "cores": float(cores),
        "repeats": float(repeats),
        "count": float(count),
        "interval_s": interval_s,
    }
    for name, series in runs.items():
        if not series:
            continue
        q1, median, q3 = _quartiles([r.wall_s for r in series])
        out[f"{name}_wall_q1_s"] = q1
        out[f"{name}_wall_median_s"] = median
        out[f"{name}_wall_q3_s"] = q3
        out[f"{name}_wall_max_s"] = max(r.wall_s for r in series)
        fields = (
            "spread_s",
            "late_s",
            "first_s",
            "after_s",
            "sample_s",
            "lost_cpu_s",
            "diag_cpu_s",
        )
        for field in fields:
            out[f"{name}_{field}_median"] = collect([getattr(r, field) for r in series]).median
        out[f"{name}_boosted_samples"] = float(sum(r.boosted for r in series))
    quiet = out.get("quiet_wall_median_s", float("nan"))
    for name in runs:
        if name != "quiet" and f"{name}_wall_median_s" in out:
            out[f"{name}_ratio"] = out[f"{name}_wall_median_s"] / quiet
    return out


Line = Tuple[str, str, str, str, Optional[bool]]


def rows(f: Dict[str, float]) -> List[Line]:
    """The table's rows: measure, target, measured, ratio, met (None: explains)."""
    out: List[Line] = []
    quiet = f["quiet_wall_median_s"]
    hogs4 = int(4 * f["cores"])
    settings = f"{int(f['count'])} samples {f['interval_s']:g} s apart"
    if (f["count"], f["interval_s"]) == (DEFAULT_COUNT, DEFAULT_INTERVAL_S):
        settings = f"defaults: {settings}"
    head = (
        f"`diag capture --pid` ({settings}) of {int(f['ranks'])} ranks x "
        f"{int(f['threads'])} threads"
    )
    out.append(
        (
            f"{head}, quiet host: time to verdict",
            "baseline",
            f"{quiet:.2f} s (q1-q3 {f['quiet_wall_q1_s']:.2f}-{f['quiet_wall_q3_s']:.2f})",
            "1.00",
            None,
        )
    )
    for name, label, target in (
        ("4x", f"beside {hogs4} CPU hogs (4 per core), boost on (default)", "<= 1.5 x, <= 10 s"),
        ("1x", f"beside {int(f['cores'])} CPU hogs (1 per core), boost on", "(compares)"),
        ("4x_nice", f"beside {hogs4} CPU hogs, nice -10 only (measured variant)", "(compares)"),
        ("4x_off", f"beside {hogs4} CPU hogs, --no-boost (diag before issue 27)", "(compares)"),
    ):
        if f"{name}_wall_median_s" not in f:
            continue
        wall = f[f"{name}_wall_median_s"]
        met: Optional[bool] = None
        if name == "4x":
            met = f["4x_ratio"] <= 1.5 and wall <= 10.0
        out.append(
            (
                f"  {label}",
                target,
                f"{wall:.2f} s (q1-q3 {f[f'{name}_wall_q1_s']:.2f}-{f[f'{name}_wall_q3_s']:.2f}); "
                f"interval spread {f[f'{name}_spread_s_median'] * 1e3:.0f} ms, latest sample "
                f"{f[f'{name}_late_s_median'] * 1e3:.0f} ms late; start-up "
                f"{f[f'{name}_first_s_median']:.2f} s, "
                f"sample {f[f'{name}_sample_s_median']:.3f} s, "
                f"verdict + outputs {f[f'{name}_after_s_median']:.2f} s",
                f"{f[f'{name}_ratio']:.2f}",
                met,
            )
        )
    if "4x_lost_cpu_s_median" in f and "4x_off_lost_cpu_s_median" in f:
        out.append(
            (
                f"  CPU the {hogs4} hogs lost to the capture: boost on / nice only / --no-boost",
                "(the boost takes no more)",
                " / ".join(
                    f"{f[f'{name}_lost_cpu_s_median']:.2f} s"
                    for name in ("4x", "4x_nice", "4x_off")
                    if f"{name}_lost_cpu_s_median" in f
                )
                + " (diag's own CPU "
                + " / ".join(
                    f"{f[f'{name}_diag_cpu_s_median']:.2f} s"
                    for name in ("4x", "4x_nice", "4x_off")
                    if f"{name}_diag_cpu_s_median" in f
                )
                + ")",
                "",
                None,
            )
        )
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    figures = measure(n)
    for key, value in figures.items():
        print(f"{key:<28} {value:,.4f}")
    for line in rows(figures):
        print(" | ".join(str(c) for c in line))
