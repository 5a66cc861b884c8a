"""``diag merge`` and ``diag capture --slurm-job``: from per-host bundles to the written report.

Both end the same way as a single-host capture - verdict, then ``capture.write_outputs`` (JSON
bundle, and the HTML/Markdown reports where the report step is installed) - so a merged bundle
is classified and rendered by the very same code, only with ranks from several hosts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence

import msgspec

from diag.bundle_io import load_bundle
from diag.capture import write_outputs
from diag.classify import classify
from diag.errors import DiagError
from diag.merge import HostPart, MissingHost, merge_bundles
from diag.model import Bundle
from diag.outcome import Outcome
from diag.output_paths import json_output_path
from diag.redact import Redactor

# A host whose first sample is further than this from the reference host's is called out.
_STAGGER_NOTE_S = 1.0


def describe_hosts(bundle: Bundle) -> List[str]:
    """One line per host for people: captured or why not, and how its clock compares."""
    lines: List[str] = []
    for e in bundle.hosts:
        if e.status != "ok":
            lines.append(f"{e.name}: not captured - {e.reason}")
            continue
        parts = [f"{e.name}: {e.samples} sample(s)"]
        if e.samples_dropped:
            parts.append(f"{e.samples_dropped} past the shortest host left out")
        start = e.start_offset_s
        if e.clock_offset_s is not None:
            err = f" ±{e.clock_offset_error_s:.3f}" if e.clock_offset_error_s is not None else ""
            parts.append(f"clock {e.clock_offset_s:+.3f}s{err} vs reference ({e.clock_source})")
            if start is not None and abs(start) >= _STAGGER_NOTE_S:
                parts.append(f"first sample {start:+.1f}s from the reference host's")
        elif start is not None:
            parts.append(
                f"clock offset not measured: first sample {start:+.3f}s from the reference "
                "host's (clock skew and start difference together)"
            )
        else:
            parts.append("clock offset not measured")
        lines.append(", ".join(parts))
    return lines


def _with_verdict(bundle: Bundle) -> Bundle:
    """The verdict across every rank of every host: the same classifier as one host's."""
    return msgspec.structs.replace(bundle, verdict=classify(bundle))


def finish(bundle: Bundle, out: Optional[str], stem: str, notes: Sequence[str]) -> Outcome:
    path = json_output_path(out, stem)
    bundle = _with_verdict(bundle)
    # Per-host bundles were scrubbed where they were taken; this pass applies the generic
    # patterns (tokens in argv, user:pass@ URLs) once more over the merged whole.
    written = write_outputs(bundle, path, Redactor())
    return Outcome(bundle, written, (*notes, *describe_hosts(bundle)))


def run_merge(paths: Sequence[str], out: Optional[str] = None) -> Outcome:
    """Merge bundle files; an unreadable one is recorded as a failed host, not fatal."""
    parts: List[HostPart] = []
    missing: List[MissingHost] = []
    first_error: Optional[DiagError] = None
    for path in paths:
        try:
            parts.append(HostPart(bundle=load_bundle(path)))
        except DiagError as exc:
            first_error = first_error or exc
            missing.append(MissingHost(name=Path(path).name, reason=exc.one_line()))
    if not parts and first_error is not None:
        raise first_error
    out_path = json_output_path(out, "merged")  # checked before the work, like capture
    return finish(merge_bundles(parts, missing), str(out_path), "merged", ())


def run_slurm_capture(
    job_id: int,
    *,
    count: int,
    interval_s: float,
    out: Optional[str] = None,
    fr_dirs: Sequence[str] = (),
) -> Outcome:
    """``diag capture --slurm-job``: every node of the job, merged; failed nodes recorded."""
    from diag.slurm import capture_job

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
    from diag.slurm import capture_job
    from diag.watch_session import stop_duration_s

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
