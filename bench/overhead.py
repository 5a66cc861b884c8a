"""What ``diag watch --interval 1`` costs the job it watches: target throughput with / without.

The target (``bench.job.start_counter``) counts iterations of a fixed unit of CPU work into a
shared counter. One ``diag watch --interval 1 --pid TARGET`` runs (the real CLI: journal and
report rewritten every second); once it has journalled its first sample (its start-up is not
billed to the target), windows of ``window_s`` alternate between the watch running and the
watch frozen with SIGSTOP (a frozen process costs the target nothing: the "without" case),
``pairs`` times, in ABBA order. Freezing instead of restarting allows many short pairs, and
the median of the per-pair ratios is reported with its quartiles: on a shared 2-core VM the
background noise of one window is several percent, far more than the effect measured.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

from bench.cli_cost import user_env
from bench.job import Counter, start_counter
from bench.stats import collect

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads) and of its reaped children (py-spy, the
    NVML worker: cutime + cstime), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rpartition(b")")[2].split()
    return sum(int(f) for f in fields[11:15]) * _TICK_S


def _watch_cpu_s(pid: int) -> float:
    """The watch's CPU with its live children's (the forked workers, which live as long as
    the watch and so are never among its reaped children)."""
    total = _cpu_s(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return total
    for tid in tids:
        try:
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                total += _cpu_s(int(child))
            except OSError:
                pass  # exited between the listing and the read
    return total


class Window(NamedTuple):
    per_s: float  # iterations per wall second
    per_cpu_s: float  # iterations per CPU second of the target
    watch_cpu_pct: float  # the watch's CPU use (workers and py-spy included), % of one core


def _window(counter: Counter, window_s: float, watch_pid: Optional[int] = None) -> Window:
    """One window, timed on this side."""
    w0 = _watch_cpu_s(watch_pid) if watch_pid else 0.0
    c0, t0, cpu0 = counter.count(), time.perf_counter(), _cpu_s(counter.pid)
    time.sleep(window_s)
    c1, t1, cpu1 = counter.count(), time.perf_counter(), _cpu_s(counter.pid)
    w1 = _watch_cpu_s(watch_pid) if watch_pid else 0.0
    return Window(
        (c1 - c0) / (t1 - t0), (c1 - c0) / max(cpu1 - cpu0, _TICK_S), 100 * (w1 - w0) / (t1 - t0)
    )


def _start_watch(pid: int, base: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "diag", "watch", "--interval", "1", "--pid", str(pid)]
    proc = subprocess.Popen(
        [*argv, "-o", str(base.with_suffix(".html"))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=user_env(),
    )
    journal = base.with_suffix(".jsonl")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and journal.read_bytes().count(b'"sample"') >= 1:
            return proc
        time.sleep(0.05)
    _stop_watch(proc)
    raise RuntimeError("diag watch did not journal a first sample within 60 s")


def _stop_watch(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def measure(pairs: int = 20, window_s: float = 2.0) -> Dict[str, float]:
    """Throughput with and without a watch: medians and the median of the per-pair ratios.

    Besides iterations per wall second (what the job sees, and what the target is about), the
    iterations per CPU second of the target (it moves only if diag slows the target's own
    execution, e.g. by pausing it or by cache pressure; in a VM, stolen time blurs it too)
    and the watch's own CPU use are reported, so a noisy wall-clock ratio can be told from a
    real cost.
    """
    off: List[Window] = []
    on: List[Window] = []
    with tempfile.TemporaryDirectory(prefix="diag-bench-overhead-") as tmp:
        counter = start_counter(Path(tmp) / "count")
        watch: Optional[subprocess.Popen[bytes]] = None
        try:
            watch = _start_watch(counter.pid, Path(tmp) / "watch")
            for i in range(pairs):
                # ABBA order: a drift in the background load cancels out over two pairs.
                for running in (True, False) if i % 2 == 0 else (False, True):
                    os.kill(watch.pid, signal.SIGCONT if running else signal.SIGSTOP)
                    if running:
                        on.append(_window(counter, window_s, watch.pid))
                    else:
                        off.append(_window(counter, window_s))
        finally:
            if watch is not None:
                os.kill(watch.pid, signal.SIGCONT)
                _stop_watch(watch)
            counter.stop()
    wall = sorted(a.per_s / b.per_s for a, b in zip(on, off))
    cpu = collect([a.per_cpu_s / b.per_cpu_s for a, b in zip(on, off)])
    return {
        "pairs": float(pairs),
        "window_s": window_s,
        "without_median_ips": collect([w.per_s for w in off]).median,
        "with_median_ips": collect([w.per_s for w in on]).median,
        "ratio_median": collect(wall).median,
        "ratio_q1": wall[len(wall) // 4],
        "ratio_q3": wall[(3 * len(wall)) // 4],
        "ratio_min": wall[0],
        "ratio_max": wall[-1],
        "cpu_ratio_median": cpu.median,
        "watch_cpu_pct_median": collect([w.watch_cpu_pct for w in on]).median,
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    w = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    for key, value in measure(n, w).items():
        print(f"{key:<22} {value:,.4f}")
