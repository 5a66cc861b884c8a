"""``diag capture --slurm-job`` and ``diag watch --slurm-job``: every node of a job, merged.

The controller (``slurm.controller``) fans out one per-node collector over ``srun --overlap``
and merges what comes back; the merged bundle ends like any ``diag merge``
(``commands.merge.finish``): one verdict over every rank of every node, then the outputs.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from diag.commands.merge import finish
from diag.commands.outcome import Outcome
from diag.commands.output_paths import json_output_path
from diag.slurm.controller import capture_job
from diag.watch.session import stop_duration_s


def run_slurm_capture(
    job_id: int,
    *,
    count: int,
    interval_s: float,
    out: Optional[str] = None,
    fr_dirs: Sequence[str] = (),
) -> Outcome:
    """``diag capture --slurm-job``: every node of the job, merged; failed nodes recorded."""
    out_path = json_output_path(out, f"slurm-{job_id}")  # checked before the work
    done = capture_job(job_id, count=count, interval_s=interval_s, fr_dirs=fr_dirs)
    notes = tuple(f"note: {n}" for n in done.notes)
    return finish(done.bundle, str(out_path), f"slurm-{job_id}", notes)


def run_slurm_watch(
    job_id: int,
    *,
    interval_s: float,
    count: Optional[int],
    duration: Optional[str],
    out: Optional[str] = None,
    fr_dirs: Sequence[str] = (),
    echo: Optional[Callable[[str], None]] = None,
) -> Outcome:
    """``diag watch --slurm-job``: every node samples until --count, --duration or Ctrl-C
    (then each node sends what it has), merged into one report at the end. Unlike a
    single-host watch there is no journal while it runs: the samples live on the nodes."""
    duration_s = stop_duration_s(count, duration)
    out_path = json_output_path(out, f"slurm-{job_id}")  # checked before the work
    if echo is not None:
        until = f"{count} samples" if count else (duration if duration else "Ctrl-C")
        echo(f"watching Slurm job {job_id} every {interval_s:g}s until {until}")
    done = capture_job(
        job_id, count=count or 0, interval_s=interval_s, fr_dirs=fr_dirs,
        duration_s=duration_s, echo=echo,
    )  # fmt: skip
    notes = tuple(f"note: {n}" for n in done.notes)
    return finish(done.bundle, str(out_path), f"slurm-{job_id}", notes)
