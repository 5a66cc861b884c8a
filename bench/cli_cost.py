"""What the CLI adds around the sampling: start-up imports and ``diag capture --count 1``.

* ``python -c pass`` is the interpreter's own floor; ``python -m diag --help`` adds the CLI's
  imports (click and diag.cli only: every command imports its heavy modules - jinja2,
  psutil, the probes - when it runs). ``-X importtime`` names the slowest imports.
* ``diag capture --count 1 --pid LAUNCHER`` on a job of N ranks, end to end as a user runs it;
  the sample's own ``duration_s`` (from the bundle written) is subtracted, leaving start-up,
  target checks, discovery outside the sample, the verdict and writing JSON + HTML +
  Markdown: the part the target bounds at 0.5 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from bench.job import start_job
from bench.stats import collect

_DIAG = [sys.executable, "-m", "diag"]
PYCACHE = Path(tempfile.gettempdir()) / "diag-bench-pycache"


def user_env() -> Dict[str, str]:
    """The environment of a diag run as users have it: with bytecode caches.

    ``pip install`` byte-compiles diag; a checkout run with PYTHONDONTWRITEBYTECODE (set on
    this machine) recompiles every module on every run, 0.2 s that no user pays. The caches
    go to a temporary prefix, not into the source tree.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def _wall(argv: List[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=user_env()
    )
    return time.perf_counter() - t0


def import_top(argv: List[str], count: int = 8) -> List[Tuple[str, float]]:
    """The slowest imports (cumulative ms, top-level packages only) under ``-X importtime``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        check=True,
        env=user_env(),
    )
    rows: List[Tuple[str, float]] = []
    for line in proc.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(2)) <= 1:
            rows.append((match.group(3), int(match.group(1)) / 1000.0))
    return sorted(rows, key=lambda r: -r[1])[:count]


def measure_startup(repeats: int = 7) -> Dict[str, float]:
    _wall([*_DIAG, "--help"])  # writes the bytecode caches
    bare: List[float] = []
    helped: List[float] = []
    for _ in range(repeats):
        bare.append(_wall([sys.executable, "-c", "pass"]))
        helped.append(_wall([*_DIAG, "--help"]))
    b, h = collect(bare), collect(helped)
    return {
        "python_median_s": b.median,
        "python_min_s": b.min,
        "help_median_s": h.median,
        "help_min_s": h.min,
        "cli_import_median_s": h.median - b.median,
    }


def measure_capture(ranks: int = 4, threads: int = 64, repeats: int = 5) -> Dict[str, float]:
    """End-to-end ``diag capture --count 1`` and what it spends beyond the sample itself."""
    total: List[float] = []
    beyond: List[float] = []
    sizes: Dict[str, float] = {}
    prefix = "diag-bench-capture-"
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, start_job(ranks, threads) as job:
        for i in range(repeats + 1):  # run 0 warms the bytecode and template caches
            out = Path(tmp) / f"c{i}.json"
            argv = [*_DIAG, "capture", "--count", "1", "--pid", str(job.pid), "-o", str(out)]
            t0 = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, check=False, env=user_env())
            wall_s = time.perf_counter() - t0
            if not out.exists():
                raise RuntimeError(f"diag capture failed ({proc.returncode}): {proc.stderr!r}")
            if i == 0:
                continue
            sample_s = float(json.loads(out.read_bytes())["samples"][0]["duration_s"])
            total.append(wall_s)
            beyond.append(wall_s - sample_s)
            for ext in (".json", ".html", ".md"):
                sizes[f"{ext[1:]}_bytes"] = float(out.with_suffix(ext).stat().st_size)
    t, b = collect(total), collect(beyond)
    return {
        "ranks": float(ranks),
        "total_median_s": t.median,
        "total_min_s": t.min,
        "beyond_sample_median_s": b.median,
        "beyond_sample_min_s": b.min,
        **sizes,
    }


if __name__ == "__main__":
    for name, value in {**measure_startup(3), **measure_capture(4, repeats=3)}.items():
        print(f"{name:<26} {value:,.4f}")
    for module, ms in import_top(["-m", "diag", "--help"]):
        print(f"import {module:<30} {ms:8.1f} ms")
