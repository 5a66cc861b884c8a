"""Hostile targets against diag's total budgets (issue #25): what one capture costs.

Two targets from ``tests/programs``: ``deep_distinct.py`` (threads parked in distinct
300-511-deep stacks of a 5,000-character function name: 135 MB of JSON, 72 MB of HTML and
1.2 GiB of RSS before the stack and output budgets) and ``env_flood.py`` (processes with
30,000 secret-named environment variables each: 156-185 s a capture before the redactor's
literal matcher). Each is captured once with ``diag capture --count 1`` from a fresh parent
that reports its children's peak RSS, so the figure is diag's (and its workers') alone. The
environment capture is compared with the same shape of job without the flood.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from bench.report import Row
from diag.bundle.stack_budget import MAX_STACK_BYTES
from diag.render.output_caps import MAX_HTML_BYTES, MAX_JSON_BYTES

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
RSS_CAP_MIB = 512  # documented in the README's Security model


def _started(argv: List[str]) -> subprocess.Popen[str]:
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert job.stdout is not None
    if job.stdout.readline().strip() != "READY":
        job.kill()
        raise RuntimeError(f"{argv[1]} did not start")
    return job


_MEASURE = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "r = subprocess.run(sys.argv[1:], capture_output=True); "
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
    "sys.exit(r.returncode)"
)


def _capture(pid: int, out: Path) -> Dict[str, float]:
    """One ``diag capture --count 1`` of ``pid``: its time, peak RSS and output sizes."""
    argv = [sys.executable, "-m", "diag", "capture", "--pid", str(pid), "--count", "1"]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    elapsed_s, peak_kb = done.stdout.split()[-2:]
    return {
        "capture_s": float(elapsed_s),
        "peak_rss_mib": int(peak_kb) / 1024,
        "json_bytes": float(out.with_suffix(".json").stat().st_size),
        "html_bytes": float(out.with_suffix(".html").stat().st_size),
    }


def _of(program: str, *args: int) -> List[str]:
    return [sys.executable, str(PROGRAMS / program), *(str(a) for a in args)]


def measure(threads: int, name_chars: int, env_procs: int, env_vars: int) -> Dict[str, float]:
    """The figures of both targets (see the module docstring)."""
    figures: Dict[str, float] = {
        "threads": threads,
        "name_chars": name_chars,
        "env_procs": env_procs,
        "env_vars": env_vars,
    }
    with tempfile.TemporaryDirectory(prefix="diag-hostile-") as tmp:
        for key, argv in (
            ("stacks", _of("deep_distinct.py", threads, name_chars)),
            ("env", _of("env_flood.py", env_procs, env_vars)),
            ("env_normal", _of("env_flood.py", env_procs, 0)),
        ):
            job = _started(argv)
            try:
                time.sleep(0.5)
                got = _capture(job.pid, Path(tmp) / key)
            finally:
                job.kill()
                job.wait()
            figures.update({f"{key}_{name}": value for name, value in got.items()})
    figures["own_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def rows(f: Dict[str, float]) -> List[Row]:
    """The table rows of ``measure``'s figures."""
    mb = 1 << 20
    met = (
        f["stacks_json_bytes"] <= MAX_JSON_BYTES
        and f["stacks_html_bytes"] <= MAX_HTML_BYTES
        and f["stacks_peak_rss_mib"] <= RSS_CAP_MIB
    )
    env_ratio = f["env_capture_s"] / f["env_normal_capture_s"]
    return [
        Row(
            f"hostile stacks: {int(f['threads'])} threads x distinct 300-511-deep stacks of a "
            f"{int(f['name_chars']):,}-char name, `capture --count 1`",
            f"JSON <= {MAX_JSON_BYTES // mb} MiB, HTML <= {MAX_HTML_BYTES // mb} MiB, "
            f"peak RSS <= {RSS_CAP_MIB} MiB (stacks budget {MAX_STACK_BYTES // mb} MiB)",
            f"JSON {f['stacks_json_bytes'] / mb:.1f} MiB, HTML {f['stacks_html_bytes'] / mb:.1f} "
            f"MiB, peak RSS {f['stacks_peak_rss_mib']:.0f} MiB, {f['stacks_capture_s']:.1f} s "
            "(before: 127 / 67 MiB, 1,427 MiB, 47 s)",
            "",
            met,
        ),
        Row(
            f"hostile environment: {int(f['env_procs'])} processes x "
            f"{int(f['env_vars']):,} secret-named variables, `capture --count 1`",
            "seconds, not minutes: <= 10 s (ratio: to the same job without them)",
            f"{f['env_capture_s']:.2f} s, peak RSS {f['env_peak_rss_mib']:.0f} MiB vs "
            f"{f['env_normal_capture_s']:.2f} s, {f['env_normal_peak_rss_mib']:.0f} MiB "
            "(before: 10.1 s, 694 MiB here; 156-185 s in the issue)",
            f"{env_ratio:.2f}",
            f["env_capture_s"] <= 10.0,
        ),
    ]
