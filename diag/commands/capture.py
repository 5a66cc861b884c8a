"""Taking a capture: sample a Collector N times, read the per-bundle evidence, judge, write.

The samples are taken by the one sampling loop (``commands.sampling.run_series``) that a
watch runs too; a capture's ``Sampler`` (``_Recorder``) keeps every sample for one verdict at
the end, where a watch's keeps a window, a journal and a live report (``diag.watch.loop``).
``diag capture --pid`` is ``run_capture``; the Slurm per-node collector samples with
``sample_series`` and ``captured_bundle``; ``diag capture -- CMD`` is a short watch without a
journal. Every bundle's verdict comes from ``commands.judge``. Every file diag writes goes
through ``Redactor.scrub_bytes`` last (``render.outputs``).

A target that exits mid-capture is not an error: the samples already taken are written and a
note says so (the verdict will read "exited"). Only a target gone before the first sample is
(``EXIT_TARGET_GONE``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from diag.collect.collector import Collector
from diag.collect.enrich import enrich_bundle
from diag.collect.target import PTRACE_REMEDY, check_target, require_pyspy
from diag.commands.judge import judged
from diag.commands.outcome import Outcome
from diag.commands.output_paths import json_output_path
from diag.commands.sampling import Hooks, SeriesOptions, run_series
from diag.commands.schedule import Schedule
from diag.commands.stopping import StopRequest, StopSignals
from diag.errors import EXIT_TARGET_GONE, DiagError
from diag.model import Bundle, ProcessInfo, Sample
from diag.probes.procfs import ProcFS
from diag.probes.stacks import KIND_PERMISSION
from diag.verdict.rhythm import MAX_EXTEND_S, extension_end, grew_since

__all__ = [
    "PTRACE_REMEDY",
    "Series",
    "captured_bundle",
    "check_target",
    "judged",
    "require_pyspy",
    "run_capture",
    "sample_series",
]


class Series(NamedTuple):
    """The samples a capture took, and whether a Ctrl-C (or SIGTERM) cut it short."""

    samples: List[Sample]
    interrupted: bool
    extended_by: int = 0  # samples added to cover the job's log rhythm (``verdict.rhythm``)


class _Recorder:
    """A capture's ``Sampler``: it keeps every sample (a capture is a few) for one verdict."""

    def __init__(
        self,
        collector: Collector,
        on_sample: Optional[Callable[[Sample], None]],
        rhythm: Optional[Tuple[int, float]] = None,
    ):
        self.collector = collector
        self.on_sample = on_sample
        self.samples: List[Sample] = []
        # (count, interval): end at ``count`` samples, or later to cover the job's rhythm.
        self.rhythm = rhythm
        self.limit = rhythm[0] if rhythm else 0
        self.extended_by = 0
        self.beat_path = ""  # the log whose beat the extension waits for
        self.until_s = 0.0  # the sample time (``Sample.t_s``) the extension lasts to
        # A bound on the samples, whatever the clock says: the planned ones and the most an
        # extension of MAX_EXTEND_S at the interval takes, twice over for late ones.
        if rhythm:
            self.limit = rhythm[0] + 2 * math.ceil(MAX_EXTEND_S / max(rhythm[1], 0.1))

    def alive(self) -> bool:
        return self.collector.alive()

    def take(self, index: int, late_s: float, lean: bool, ended: bool) -> bool:
        self.samples.append(self.collector.take_sample(index, late_s=late_s, lean=lean).sample)
        if self.on_sample is not None:
            self.on_sample(self.samples[-1])
        return self._done() if self.rhythm else False

    def _done(self) -> bool:
        """With the planned samples taken, whether the job's log beats slower than the
        capture so far: then more samples until the capture is long enough to decide (at
        most ``rhythm.MAX_EXTEND_S`` more), ended early by a line. The end is a time, not a
        number of samples: on a loaded host the planned samples run late and the extra ones
        come back to back, so a count of them would end the capture before the log is due."""
        assert self.rhythm is not None
        count, _ = self.rhythm
        taken = len(self.samples)
        if taken == count:
            end = extension_end(self.samples)
            if end is None:
                return True
            self.beat_path, self.until_s = end
            return self.samples[-1].t_s >= self.until_s
        if taken < count:
            return False
        self.extended_by = taken - count
        if grew_since(self.samples[count - 1], self.samples[-1], self.beat_path):
            return True  # the rhythm answered: its log has a new line
        return self.samples[-1].t_s >= self.until_s or taken >= self.limit


# The first gap between samples must leave this long for the warm-up (imports, a template):
# under it (a short --interval) the warm-up would make the next sample late; it is skipped.
WARM_GAP_S = 1.0


def sample_series(
    collector: Collector,
    *,
    count: int,
    interval_s: float,
    stop: Optional[StopRequest] = None,
    duration_s: Optional[float] = None,
    on_sample: Optional[Callable[[Sample], None]] = None,
    warm: Optional[Callable[[], None]] = None,
    extend_to_rhythm: bool = False,
) -> Series:
    """A capture's samples, taken by the one sampling loop (``commands.sampling``): ``count``
    samples (0: until ``stop`` or ``duration_s``), or until the target is gone - one last
    sample records the exit. A stop request ends it after the sample in flight; a signal's
    makes it ``interrupted``, as does a KeyboardInterrupt after the first sample. ``warm``
    runs once, in the first gap between samples when it is ``WARM_GAP_S`` long or more.
    ``extend_to_rhythm`` (the user fixed neither count nor interval): a capture shorter than
    its job's log beat takes more samples, at most ``rhythm.MAX_EXTEND_S`` of them."""
    stop = stop if stop is not None else StopRequest()
    extend = extend_to_rhythm and count > 0
    recorder = _Recorder(collector, on_sample, (count, interval_s) if extend else None)
    options = SeriesOptions(
        interval_s=interval_s, count=0 if extend else count, duration_s=duration_s
    )
    schedule = Schedule(interval_s, count)
    hooks = Hooks(between=_once_in_a_gap(warm, schedule, recorder)) if warm else None
    try:  # a KeyboardInterrupt before the first sample propagates: EXIT_INTERRUPTED
        end = run_series(recorder, options, stop, hooks, schedule)
    finally:
        collector.close()  # the NVML worker must not outlive the sampling
    return Series(
        recorder.samples, end.interrupted or stop.signum is not None, recorder.extended_by
    )


def _once_in_a_gap(
    warm: Callable[[], None], schedule: Schedule, recorder: _Recorder
) -> Callable[[], None]:
    """``warm``, the first time there is ``WARM_GAP_S`` before the next sample is due."""
    done: List[bool] = []

    def between() -> None:
        if done or schedule.due(len(recorder.samples)) - time.monotonic() < WARM_GAP_S:
            return
        done.append(True)
        try:
            warm()
        except Exception:  # a head start only: judging and writing load the same after
            pass  # the last sample, and fail there with their own message

    return between


def warm_up() -> None:
    """Load what the verdict and the reports need while the capture waits for its next
    sample, not after the last one: the imports and the report template are the part of
    ``_finish`` that does not depend on the samples, and on a saturated host (issue 27)
    every CPU second diag spends after the last sample is several seconds to the verdict."""
    import diag.verdict.classify  # noqa: F401 - imported for its side effect: loaded
    from diag.render.outputs import warm_templates

    warm_templates()


def captured_bundle(
    collector: Collector, samples: Sequence[Sample], created_s: float, fr_dirs: Sequence[str]
) -> Bundle:
    """The capture's bundle with what is read once per capture: Flight Recorder dumps (rank
    env prefixes, --fr-dir) and the NCCL lines of the logs."""
    bundle = collector.bundle(samples, created_s)
    return enrich_bundle(bundle, fr_dirs, collector.redactor.scrub)


def denied_notes(collector: Collector) -> List[str]:
    denied = sorted(p for p, kind in collector.stack_errors.items() if kind == KIND_PERMISSION)
    if not denied:
        return []
    return [
        f"no permission to read the Python stacks of PID(s) {', '.join(map(str, denied))} - "
        + PTRACE_REMEDY
    ]


def _stack_notes(processes: Sequence[ProcessInfo], last: Sample) -> List[str]:
    names = {p.pid: p.name for p in processes}
    return [
        f"PID {s.pid} ({names.get(s.pid, '?')}) is not a Python process: "
        "no Python stacks, threads and /proc captured"
        for s in last.processes
        if s.py_status == "not-python"
    ]


def run_capture(
    pid: int,
    *,
    interval_s: float = 2.0,
    count: int = 3,
    out: Optional[str] = None,
    log_paths: Sequence[str] = (),
    procfs: Optional[ProcFS] = None,
    on_sample: Optional[Callable[[Sample], None]] = None,
    fr_dirs: Sequence[str] = (),
    extend_to_rhythm: bool = False,
) -> Outcome:
    """``diag capture --pid P``: check the target, take ``count`` samples, write the bundle
    (more, bounded, where ``extend_to_rhythm`` and the job's log beats slower)."""
    procfs = procfs if procfs is not None else ProcFS()
    check_target(pid, procfs)
    pyspy = require_pyspy()
    json_path = json_output_path(out, pid)
    collector = Collector(pid, procfs=procfs, log_paths=log_paths, pyspy=pyspy)
    created_s = time.time()
    with StopSignals(StopRequest()) as stop:
        series = sample_series(
            collector,
            count=count,
            interval_s=interval_s,
            stop=stop,
            on_sample=on_sample,
            warm=warm_up,
            extend_to_rhythm=extend_to_rhythm,
        )
        if stop.requested and not series.samples:
            raise KeyboardInterrupt  # nothing to write: the CLI exits with EXIT_INTERRUPTED
        return _finish(pid, series, collector, created_s, json_path, count, fr_dirs, stop)


def _finish(
    pid: int,
    series: Series,
    collector: Collector,
    created_s: float,
    json_path: Path,
    count: int,
    fr_dirs: Sequence[str],
    stop: StopRequest,
) -> Outcome:
    samples = series.samples
    notes: List[str] = []
    if series.interrupted:
        notes.append(f"interrupted{stop.by()}: writing the {len(samples)} sample(s) taken")
    if not samples:
        raise DiagError(
            f"PID {pid} exited before the first sample", "nothing to capture", EXIT_TARGET_GONE
        )
    if not collector.alive() and len(samples) < count:
        notes.append(
            f"target PID {pid} exited during the capture: "
            f"writing the {len(samples)} sample(s) taken"
        )
    if series.extended_by:
        notes.append(
            f"extended the capture by {series.extended_by} sample(s) to cover the job's log "
            "rhythm (--count/--interval fix its length)"
        )
    notes.extend(_stack_notes(list(collector.processes.values()), samples[-1]))
    notes.extend(denied_notes(collector))
    bundle = judged(captured_bundle(collector, samples, created_s, fr_dirs))
    from diag.render.outputs import write_outputs

    written = write_outputs(bundle, json_path, collector.redactor)
    return Outcome(bundle, written, tuple(notes), collector.redactor)
