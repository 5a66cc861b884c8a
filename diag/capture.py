"""``diag capture --pid P``: check the target, take N samples, write the bundle.

Kept small on purpose: ``check_target`` turns every bad input into a ``DiagError`` with its
remedy before anything is sampled; ``run_capture`` is the sampling loop; ``build_bundle`` and
``write_outputs`` are the seams where the verdict (classification) and the HTML/Markdown
reports plug in. Every file diag writes goes through ``Redactor.scrub_bytes`` last.

A target that exits mid-capture is not an error: the samples already taken are written and a
note says so (the verdict will read "exited"). Only a target gone before the first sample is
(``EXIT_TARGET_GONE``).
"""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import msgspec

from diag.bundle_io import atomic_write_bytes, encode_bundle
from diag.classify import classify
from diag.errors import (
    EXIT_MISSING_TOOL,
    EXIT_NO_TARGET,
    EXIT_PERMISSION,
    EXIT_TARGET_GONE,
    DiagError,
)
from diag.model import Bundle, ProcessInfo, Sample
from diag.outcome import Outcome
from diag.output_paths import json_output_path
from diag.probes.flight_recorder import enrich_bundle
from diag.probes.procfs import ProcFS
from diag.probes.stacks import KIND_PERMISSION, find_pyspy
from diag.probes.threads import parse_status
from diag.redact import Redactor
from diag.render.outputs import write_reports
from diag.sampler import Collector

PTRACE_REMEDY = "run diag as root or as the target's user, or grant CAP_SYS_PTRACE"


def check_target(pid: int, procfs: ProcFS) -> None:
    """Fail early, with the remedy, on a PID diag cannot capture."""
    if pid <= 0:
        raise DiagError(f"invalid PID {pid}", "pass the PID of a running process", EXIT_NO_TARGET)
    try:
        stat = procfs.read_text(pid, "stat")
    except OSError:
        raise DiagError(
            f"no process with PID {pid}",
            "check the PID with `ps -ef` (the job may have exited)",
            EXIT_NO_TARGET,
        ) from None
    tgid_text = parse_status(procfs.try_read_text(pid, "status") or "").get("Tgid", "")
    tgid = int(tgid_text) if tgid_text.isdigit() else None
    if tgid is not None and tgid != pid:  # /proc/TID exists too, hidden from listings
        raise DiagError(
            f"{pid} is a thread of process {tgid}, not a process",
            f"pass --pid {tgid}",
            EXIT_NO_TARGET,
        )
    state = stat.rpartition(")")[2].split()[:1]
    if state and state[0] in ("Z", "X", "x"):
        raise DiagError(
            f"PID {pid} is a zombie (it exited; its parent has not reaped it)",
            "capture its parent or a live rank instead",
            EXIT_NO_TARGET,
        )
    try:
        procfs.read_bytes(pid, "environ")
    except PermissionError:
        raise DiagError(
            f"no permission to inspect PID {pid}", PTRACE_REMEDY, EXIT_PERMISSION
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise DiagError(
                f"PID {pid} exited before diag could read it", "", EXIT_TARGET_GONE
            ) from None


def require_pyspy() -> str:
    pyspy = find_pyspy()
    if pyspy is None:
        raise DiagError(
            "py-spy not found",
            "install it (pip install py-spy, or make install) or put it on PATH",
            EXIT_MISSING_TOOL,
        )
    return pyspy


def build_bundle(collector: Collector, samples: Sequence[Sample], created_s: float) -> Bundle:
    """The bundle of a capture; the verdict step attaches ``verdict`` here."""
    return Bundle(
        created_s=created_s,
        host=collector.host_info(),
        target=collector.target,
        processes=tuple(sorted(collector.processes.values(), key=lambda p: p.pid)),
        stacks=dict(collector.stacks),
        samples=tuple(samples),
    )


def write_outputs(bundle: Bundle, json_path: Path, redactor: Redactor) -> Tuple[Path, ...]:
    """Write every output file: PATH.json, then PATH.html and PATH.md (all scrubbed)."""
    atomic_write_bytes(json_path, redactor.scrub_bytes(encode_bundle(bundle)))
    return (json_path, *write_reports(bundle, json_path, redactor))


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
) -> Outcome:
    procfs = procfs if procfs is not None else ProcFS()
    check_target(pid, procfs)
    pyspy = require_pyspy()
    json_path = json_output_path(out, pid)
    collector = Collector(pid, procfs=procfs, log_paths=log_paths, pyspy=pyspy)
    created_s = time.time()
    samples: List[Sample] = []
    notes: List[str] = []
    try:
        for index in range(count):
            if index:
                time.sleep(max(0.0, interval_s - (time.time() - samples[-1].t_s)))
            if not collector.alive():
                if samples:  # one last sample records the exit (status, exit code)
                    samples.append(collector.take_sample(index).sample)
                    if on_sample is not None:
                        on_sample(samples[-1])
                break
            sample = collector.take_sample(index).sample
            samples.append(sample)
            if on_sample is not None:
                on_sample(sample)
    except KeyboardInterrupt:
        if not samples:
            raise  # nothing to write: the CLI exits with EXIT_INTERRUPTED
        notes.append(f"interrupted: writing the {len(samples)} sample(s) taken")
    finally:
        collector.close()  # the NVML worker must not outlive the sampling
    if not samples:
        raise DiagError(
            f"PID {pid} exited before the first sample", "nothing to capture", EXIT_TARGET_GONE
        )
    if not collector.alive() and len(samples) < count:
        notes.append(
            f"target PID {pid} exited during the capture: "
            f"writing the {len(samples)} sample(s) taken"
        )
    notes.extend(_stack_notes(list(collector.processes.values()), samples[-1]))
    denied = sorted(p for p, kind in collector.stack_errors.items() if kind == KIND_PERMISSION)
    if denied:
        notes.append(
            f"no permission to read the Python stacks of PID(s) {', '.join(map(str, denied))} - "
            + PTRACE_REMEDY
        )
    bundle = build_bundle(collector, samples, created_s)
    # Flight Recorder dumps (rank env prefixes, --fr-dir) and the NCCL lines of the logs.
    bundle = enrich_bundle(bundle, fr_dirs, collector.redactor.scrub)
    bundle = msgspec.structs.replace(bundle, verdict=classify(bundle))
    written = write_outputs(bundle, json_path, collector.redactor)
    return Outcome(bundle, written, tuple(notes))
