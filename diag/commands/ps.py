"""``diag ps``: the ML jobs on this host, one line each, and the capture command for each.

Everyone who reaches for diag at 3 a.m. starts without a PID - an on-call engineer on a node,
or a coding agent asked "is it hung?". ``diag ps`` answers "which jobs are there, and which
PID do I hand to ``diag capture``" from /proc alone (``diag.probes.jobs``), cheaply enough to
run any time. ``diag capture`` with neither ``--pid`` nor a command uses ``only_job``: one job
is taken (and said so), several are listed and refused - guessing which job someone meant
would diagnose the wrong one.
"""

from __future__ import annotations

import time
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from diag.commands.machine_json import JsonJob, PsDoc
from diag.errors import EXIT_NO_TARGET, EXIT_USAGE, DiagError
from diag.model import GpuSample
from diag.probes.gpu.nvidia_host import nvidia_signs
from diag.probes.gpu.probe import read_gpu
from diag.probes.jobs import Job, find_jobs
from diag.probes.procfs import ProcFS
from diag.probes.runner import ProbeError
from diag.redaction.redact import Redactor
from diag.text.terminal import safe_line
from diag.text.units import ranges

COMMAND_CHARS = 80  # of a job's command in its line (the JSON keeps COMMAND_JSON_CHARS)
COMMAND_JSON_CHARS = 400
GPU_TIMEOUT_S = 5.0
_STATE_WORDS: Tuple[Tuple[str, str], ...] = (
    ("R", "running"),
    ("S", "sleeping"),
    ("D", "disk"),
    ("T", "stopped"),
    ("Z", "zombie"),
)


class PsResult(NamedTuple):
    jobs: Tuple[Job, ...]
    gpu: str  # "nvml" or why GPUs were not read
    scan_ms: float
    problems: Tuple[str, ...] = ()  # what could not be read, one line each


def _gpu_sample() -> Tuple[Optional[GpuSample], str]:
    """NVML's process lists, or why there are none. A host with no sign of a driver costs
    nothing; otherwise the killable worker answers within ``GPU_TIMEOUT_S``."""
    if not nvidia_signs():
        return None, "no NVIDIA driver on this host"
    try:
        sample = read_gpu(timeout_s=GPU_TIMEOUT_S)
    except ProbeError as exc:
        return None, f"NVML: {exc}"
    if not sample.available:
        return None, sample.reason or "NVML unavailable"
    return sample, "nvml"


def scan(
    procfs: Optional[ProcFS] = None, *, gpu: bool = True, cpu_window_s: float = 0.1
) -> PsResult:
    """The jobs of this host now (``gpu``: ask NVML which processes hold a GPU)."""
    sample, how = _gpu_sample() if gpu else (None, "not asked")
    started = time.perf_counter()
    problems: List[str] = []
    jobs = find_jobs(
        procfs, gpu=sample, cpu_window_s=cpu_window_s, redactor=Redactor(), problems=problems
    )
    scan_ms = (time.perf_counter() - started - cpu_window_s) * 1e3
    return PsResult(tuple(jobs), how, round(max(scan_ms, 0.0), 1), tuple(problems))


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def age_text(age_s: Optional[float]) -> str:
    if age_s is None:
        return "?"
    seconds = int(age_s)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def capture_hint(job: Job) -> str:
    return f"diag capture --pid {job.root_pid}"


def job_line(job: Job) -> str:
    """``4242  torchrun  ranks 0-3  6 procs  up 2h03m  ports 29500  GPUs 0-3  running 1
    sleeping 5  CPU 104%  torchrun --nproc-per-node 4 train.py  -> diag capture --pid 4242``"""
    parts = [str(job.root_pid), job.kind]
    if job.ranks:
        parts.append(("rank " if len(job.ranks) == 1 else "ranks ") + ranges(job.ranks))
    parts.append(f"{len(job.pids)} proc" + ("s" if len(job.pids) != 1 else ""))
    parts.append(f"up {age_text(job.age_s)}")
    if job.ports:
        parts.append("ports " + ",".join(str(p) for p in job.ports[:8]))
    if job.gpus:
        parts.append(("GPU " if len(job.gpus) == 1 else "GPUs ") + ranges(job.gpus))
    parts.append(" ".join(f"{word} {job.states[s]}" for s, word in _STATE_WORDS if job.states[s]))
    if job.cpu_pct is not None:
        parts.append(f"CPU {job.cpu_pct:.0f}%")
    parts.append(shorten(" ".join(job.command), COMMAND_CHARS))
    parts.append(f"-> {capture_hint(job)}")
    return "  ".join(p for p in parts if p)


def ps_doc(result: PsResult) -> PsDoc:
    return PsDoc(
        jobs=tuple(
            JsonJob(
                root_pid=j.root_pid,
                kind=j.kind,
                launcher=j.launcher,
                command=shorten(" ".join(j.command), COMMAND_JSON_CHARS),
                ranks=j.ranks,
                world_size=j.world_size,
                processes=len(j.pids),
                pids=j.pids[:256],
                age_s=round(j.age_s, 1) if j.age_s is not None else None,
                ports=j.ports,
                gpus=j.gpus,
                states=dict(j.states),
                cpu_pct=j.cpu_pct,
                signals=j.signals,
                capture=capture_hint(j),
            )
            for j in result.jobs
        ),
        gpu=result.gpu,
        scan_ms=result.scan_ms,
        problems=tuple(safe_line(p) for p in result.problems),
    )


def run_ps(out: Callable[[str], None], err: Callable[[str], None], *, gpu: bool = True) -> None:
    """``diag ps``: one line per job on ``out``; "none found" on ``err`` (exit 0 all the same:
    an empty host is an answer)."""
    result = scan(gpu=gpu)
    for job in result.jobs:
        out(job_line(job))
    for problem in result.problems:
        err(safe_line(f"diag: {problem}"))
    if not result.jobs:
        err(
            "diag: no ML job found on this host (no ranks, launchers, serving stacks or GPU "
            "processes) - diag capture --pid P takes any process"
        )


def only_job(err: Callable[[str], None], jobs: Optional[Sequence[Job]] = None) -> int:
    """The root PID of this host's one job (``diag capture`` without ``--pid``), said on
    ``err``; several or none raise the error that lists them."""
    found = list(jobs) if jobs is not None else list(scan().jobs)
    if len(found) == 1:
        err(f"diag: capturing the only ML job on this host: {job_line(found[0])}")
        return found[0].root_pid
    if not found:
        raise DiagError(
            "no ML job found on this host to capture",
            "give its PID: diag capture --pid P (or launch it: diag capture -- CMD)",
            EXIT_NO_TARGET,
        )
    listing: List[str] = [job_line(j) for j in found]
    for line in listing:
        err(f"diag:   {line}")
    raise DiagError(
        f"{len(found)} ML jobs on this host (listed above); which one?",
        "give its PID: " + ", ".join(capture_hint(j) for j in found[:4]),
        EXIT_USAGE,
    )
