"""``diag watch`` as a monitor (issue #33): how often it cries wolf, and how fast it sees a hang.

- **False alarms**: verdicts of ``deadlocked`` per 1,000 ``watch`` samples over real healthy
  jobs of the scenario suite (samples/scenarios/): an idle and a busy server, a training job, a
  job loading weights, a straggler. Every sample's verdict counts, as the status line shows
  it (the watch's verdict history: each state change with its sample). Goal: 0.
- **Time to detect**: a real gloo training job (gloo_train_logs) watched; mid-watch one rank
  is SIGSTOPped - the others wait for it in ``all_reduce``. The figure is how many samples the
  watch takes from the hang (the first sample whose time is after the stop: one under way
  began before it) to a ``deadlocked`` verdict, that sample included. Goal: <= 2.

Each job runs under ``diag watch --pid`` at the watch's default interval (2 s) unless told
otherwise; the whole section takes a few minutes (``--smoke``: seconds, 2 jobs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "samples" / "scenarios"
# The healthy jobs: (scenario, what it stands for).
HEALTHY: Tuple[Tuple[str, str], ...] = (
    ("http_idle", "idle server"),
    ("uvicorn_busy_no_log", "busy server"),
    ("gloo_train_logs", "training"),
    ("gloo_load_dequant", "loading"),
    ("gloo_straggler", "straggler"),
)
HANG = "gloo_train_logs"
READY_TIMEOUT_S = 240.0
Line = Tuple[str, str, str, str, Optional[bool]]


def _start(name: str) -> subprocess.Popen[str]:
    """A scenario in its own session, once it printed READY (as samples/run_scenarios.py)."""
    proc = subprocess.Popen(
        [sys.executable, str(SCENARIOS / f"{name}.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "READY" in line:
            return proc
    _stop(proc)
    raise RuntimeError(f"{name} not READY")


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def _journal_times(journal: Path) -> List[float]:
    """The time of each sample journaled so far."""
    if not journal.exists():
        return []
    out: List[float] = []
    for raw in journal.read_bytes().split(b"\n"):
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # the line being written
        if line.get("kind") == "sample":
            out.append(float(line.get("sample", {}).get("t_s", 0.0)))
    return out


def _journal_samples(journal: Path) -> int:
    return len(_journal_times(journal))


def _watch(
    pid: int,
    count: int,
    interval_s: float,
    out_dir: Path,
    at_sample: int = -1,
    hook: Optional[Callable[[], None]] = None,
) -> Tuple[List[str], int]:
    """``diag watch --pid`` for ``count`` samples; ``hook`` runs once ``at_sample`` samples
    are journaled. Returns each sample's state (from the verdict history) and the index of
    the first sample whose time is after the hook ran (-1: it never ran)."""
    out = out_dir / f"watch_{pid}.html"
    argv = [sys.executable, "-m", "diag", "watch", "--pid", str(pid)]
    argv += ["--interval", str(interval_s), "--count", str(count), "-o", str(out)]
    watch = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal, hooked, hooked_at = out.with_suffix(".jsonl"), -1, [0.0]
    while watch.poll() is None:
        if hook is not None and hooked < 0 and _journal_samples(journal) >= at_sample:
            hooked = _journal_samples(journal)
            hook()
            hooked_at[0] = time.time()
        time.sleep(0.05)
    doc: Dict[str, Any] = json.loads(out.with_suffix(".json").read_text())
    if hooked >= 0:  # the first sample taken after the hook ran (one under way began before)
        times = _journal_times(journal)
        hooked = next((i for i, t in enumerate(times) if t >= hooked_at[0]), len(times))
    return _states(doc.get("verdict_history", []), _journal_samples(journal)), hooked


def _states(history: Sequence[Dict[str, Any]], samples: int) -> List[str]:
    """Each sample's state: a change holds until the next one."""
    out = ["unknown"] * samples
    for i, change in enumerate(history):
        end = history[i + 1]["sample"] if i + 1 < len(history) else samples
        for k in range(int(change["sample"]), min(int(end), samples)):
            out[k] = str(change["state"])
    return out


def _rank_pid(root: int, rank: int) -> int:
    """The descendant of ``root`` whose environment says RANK=``rank``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == root:
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            sid = os.getsid(int(entry))
        except OSError:
            continue
        if sid == os.getsid(root) and f"RANK={rank}".encode() in env:
            return int(entry)
    raise RuntimeError(f"no rank {rank} under {root}")


def measure(samples: int, interval_s: float, jobs: int = len(HEALTHY)) -> Dict[str, float]:
    """Both figures (see the module docstring)."""
    figures: Dict[str, float] = {"samples_per_job": samples, "interval_s": interval_s}
    total = alarms = 0
    with tempfile.TemporaryDirectory(prefix="diag-bench-monitor-") as tmp:
        for name, _ in HEALTHY[:jobs]:
            proc = _start(name)
            try:
                states, _ = _watch(proc.pid, samples, interval_s, Path(tmp))
            finally:
                _stop(proc)
            figures[f"{name}_samples"] = len(states)
            figures[f"{name}_deadlocked"] = states.count("deadlocked")
            if "deadlocked" in states:  # which sample: the first one has no deltas yet
                figures[f"{name}_first_alarm_sample"] = states.index("deadlocked")
            total += len(states)
            alarms += states.count("deadlocked")
        figures["healthy_samples"] = total
        figures["false_alarms"] = alarms
        figures["false_alarms_per_1000"] = 1000.0 * alarms / total if total else float("nan")
        figures.update(_detect(samples, interval_s, Path(tmp)))
    return figures


def _detect(samples: int, interval_s: float, tmp: Path) -> Dict[str, float]:
    proc = _start(HANG)
    stopped: List[int] = []
    try:
        rank1 = _rank_pid(proc.pid, 1)

        def hang() -> None:
            os.kill(rank1, signal.SIGSTOP)
            stopped.append(rank1)

        calm = max(3, samples // 3)
        states, hooked = _watch(proc.pid, calm + samples, interval_s, tmp, calm, hang)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        _stop(proc)
    after = states[hooked:] if hooked >= 0 else []
    found = after.index("deadlocked") + 1 if "deadlocked" in after else -1  # -1: never
    return {
        "detect_samples": found,
        "detect_watched": len(after),
        "detect_before_hang_deadlocked": states[:hooked].count("deadlocked") if hooked else 0,
    }


def rows(f: Dict[str, float]) -> List[Line]:
    """The two rows: measure, target, measured, ratio, met."""
    every = f"{int(f['samples_per_job'])} samples per job, --interval {f['interval_s']:g} s"
    per_job = ", ".join(
        f"{label} {int(f[f'{name}_deadlocked'])}/{int(f[f'{name}_samples'])}"
        for name, label in HEALTHY
        if f"{name}_samples" in f
    )
    rate = f["false_alarms_per_1000"]
    detect = f["detect_samples"]
    known = detect > 0  # -1: never detected within the watch
    return [
        (
            "false alarms: `deadlocked` verdicts per 1,000 `diag watch` samples over real "
            f"healthy jobs ({every})",
            "0",
            f"{rate:.1f} ({int(f['false_alarms'])} of {int(f['healthy_samples'])}: {per_job})",
            "",
            f["false_alarms"] == 0,
        ),
        (
            "time to detect: `diag watch` samples from a real job's hang (gloo training, "
            "rank 1 SIGSTOPped mid-watch) to `deadlocked`",
            "<= 2 samples",
            (
                f"{int(detect)} samples ({detect * f['interval_s']:.0f} s)"
                if known
                else f"not within {int(f['detect_watched'])} samples"
            ),
            "",
            known and detect <= 2,
        ),
    ]
