"""The benchmarks run (smoke mode): every situation is built, measured and reported.

Benchmarks are not tests - no figure is asserted here, only that ``make bench-smoke`` runs
each section end to end against real processes and the real CLI, and that the report it
writes names every target of issue 7 with the machine it ran on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.job import start_counter, start_job
from bench.report import Row, markdown, table
from bench.stats import Series, ratio

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_smoke_run_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "BENCH.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--write", str(out)],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    for needle in (
        "diag snapshot, first sample",
        "py-spy dump --subprocesses",
        "target throughput with `diag watch --interval 1`",
        "render ",
        "collector RSS",
        "`diag capture --count 1` beyond the sample",
        "**cpu**",
        "**py-spy**",
        "bench.run --smoke",
        "hostile stacks:",  # issue 25: the total budgets
        "hostile environment:",
    ):
        assert needle in text, needle
    for section in ("snapshot_2", "overhead", "render_1h", "render_24h", "watch_memory"):
        assert f"### {section}" in text
    assert "collector RSS" in proc.stdout  # the same table goes to the terminal


def test_job_has_its_ranks_and_threads() -> None:
    with start_job(2, threads=8) as job:
        assert len(job.rank_pids) == 2
        for pid in job.rank_pids:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
            assert len(tasks) >= 8
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert b"WORLD_SIZE=2" in environ
    assert not Path(f"/proc/{job.pid}").exists() or job.proc.poll() is not None


def test_counter_counts(tmp_path: Path) -> None:
    with start_counter(tmp_path / "count", threads=2) as counter:
        first = counter.count()
        deadline = 200
        while counter.count() == first and deadline:
            subprocess.run(["sleep", "0.05"], check=True)
            deadline -= 1
        assert counter.count() > first


def test_table_and_markdown_mark_missed_targets() -> None:
    rows = [
        Row("a | b", "<= 1", "2 s", "2.00", False),
        Row("c", "(explains)", "1 s", "", None),
    ]
    assert "**no**" in table(rows)
    md = markdown(rows, {"sec": {"x_s": 1.5}}, {"cpu": "2 cores"}, "make bench", 3.0)
    assert "| a \\| b | <= 1 | 2 s | 2.00 | **no** |" in md
    assert "### sec" in md and "| x_s | 1.5 |" in md and "- **cpu**: 2 cores" in md


def test_series_ratio_is_median_over_median() -> None:
    assert Series((3.0, 1.0, 2.0)).median == 2.0 and Series((3.0, 1.0)).min == 1.0
    assert ratio(Series((2.0, 4.0, 6.0)), Series((1.0, 2.0, 3.0))) == 2.0
    assert ratio(Series((1.0,)), Series(())) != ratio(Series((1.0,)), Series(()))  # nan
