"""``diag capture --slurm-job JOBID``: capture every node of a running Slurm job, merge.

Why srun: it is the transport the cluster already trusts. ``srun --overlap --jobid J
--ntasks-per-node=1`` starts one collector per node *inside the job's allocation* without
taking resources from it (``--overlap`` shares the job's CPUs/memory), so no ssh keys, no
daemons, no open ports. Each node finds the job's processes itself (``probes.slurm_procs``),
samples them with the ordinary single-host ``Collector``, and sends its bundle back on stdout.

The wire (``diag.slurm.wire``): srun forwards stdout in messages of at most 1 KiB and only keeps
*lines* whole, so a bundle travels as compressed, base64 chunks of short lines, each tagged with
its node and sequence number - lines from different nodes may interleave, chunks are put back
together per node. The controller also pings every node through srun's stdin (forwarded to all
tasks) and reads the pongs: NTP's round-trip estimate gives each node's clock offset with an
error bound of half the round trip. Offsets are recorded and shown, not applied.

Streamed: each node's bundle is decoded the moment its last chunk arrives (its chunks then
dropped) while the others still sample, and once every node has said ``done`` the merge starts
at once - srun's teardown of the step is not waited for - so the time to the merged verdict is
the slowest node's capture plus one merge, never a sum over the nodes.

A node that fails (srun error, node down, no job process there, timeout) becomes a recorded
failure and the merged bundle is made from the rest; only "no node at all" is an error.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from diag.bundle.merge import HostPart, MissingHost, merge_bundles
from diag.errors import EXIT_MISSING_TOOL, EXIT_NO_TARGET, EXIT_REMOTE, DiagError
from diag.model import Bundle
from diag.probes.pychild import python_module_argv
from diag.slurm.srun import run_srun, srun_env
from diag.slurm.wire import Gathered

# Time for a node to start Python, find the job and write its bundle, on top of the sampling,
# plus, per sample, a py-spy that runs into its own timeout (10 s) and grace.
_NODE_SLACK_S = 30.0
_PER_SAMPLE_SLACK_S = 15.0


class JobInfo:
    __slots__ = ("job_id", "nodes", "state")

    def __init__(self, job_id: int, state: str, nodes: Tuple[str, ...]) -> None:
        self.job_id = job_id
        self.state = state
        self.nodes = nodes


def parse_job_line(text: str) -> Dict[str, str]:
    """``scontrol show job -o`` (one line of ``Key=Value``) as a dict; values may hold spaces
    only in fields diag does not read (Command, WorkDir), which later keys then split off."""
    fields: Dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def _run(argv: Sequence[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, env=srun_env()
        )
    except FileNotFoundError:
        raise DiagError(
            f"{argv[0]} not found: this host is not a Slurm client",
            "run diag on a login node of the cluster (where squeue/srun work)",
            EXIT_MISSING_TOOL,
        ) from None
    except subprocess.TimeoutExpired:
        raise DiagError(
            f"`{' '.join(argv)}` did not answer within {timeout_s:g}s",
            "check that slurmctld is up (scontrol ping)",
            EXIT_REMOTE,
        ) from None


# Override the per-node command, e.g. "apptainer exec diag.sif diag" (default: this Python).
NODE_CMD_ENV = "DIAG_SLURM_NODE_CMD"


def job_info(job_id: int) -> JobInfo:
    """State and node names of a job; a DiagError with its remedy when it is not running."""
    shown = _run(["scontrol", "show", "job", "-o", str(job_id)])
    fields = _job_fields(shown)
    if fields is None:
        why = (shown.stderr or shown.stdout).strip() or f"exit code {shown.returncode}"
        raise DiagError(
            f"Slurm job {job_id} not found ({why})",
            "check the job id with squeue",
            EXIT_NO_TARGET,
        )
    state = fields.get("JobState", "?")
    nodelist = fields.get("NodeList", "")
    if state != "RUNNING" or nodelist in ("", "(null)"):
        raise DiagError(
            f"Slurm job {job_id} is {state}, not RUNNING",
            "capture a running job (squeue -t R)",
            EXIT_NO_TARGET,
        )
    names = _run(["scontrol", "show", "hostnames", nodelist])
    nodes = tuple(n for n in names.stdout.split() if n) or (nodelist,)
    return JobInfo(job_id, state, nodes)


def job_state(job_id: int) -> str:
    """The job's state now ("RUNNING", "CANCELLED", ...); "gone" when Slurm no longer knows
    it, "?" when scontrol does not answer. Never raises: it only explains a failure."""
    try:
        shown = _run(["scontrol", "show", "job", "-o", str(job_id)], timeout_s=10.0)
    except DiagError:
        return "?"
    fields = _job_fields(shown)
    return "gone" if fields is None else fields.get("JobState", "?")


def _job_fields(shown: subprocess.CompletedProcess[str]) -> Optional[Dict[str, str]]:
    """``scontrol show job -o``'s fields; None when Slurm does not know the job."""
    if shown.returncode != 0 or "JobState=" not in shown.stdout:
        return None
    return parse_job_line(shown.stdout.splitlines()[0])


def _rerun_note(gathered: Gathered, name: str) -> str:
    said = gathered.signal_line(name).removeprefix("srun: ") or "the task died"
    return f"{name}: diag's collector there was killed by a signal (srun: {said}) and run once more"


def _job_ended(host: MissingHost, job_id: int, state: str) -> MissingHost:
    said = "; Slurm no longer knows it" if state == "gone" else f" ({state})"
    return MissingHost(
        name=host.name,
        reason=f"job {job_id} ended during the capture{said}, which killed diag's collector "
        f"there: {host.reason}",
        duration_s=host.duration_s,
    )


def node_command(
    job_id: int,
    count: int,
    interval_s: float,
    diag_cmd: Sequence[str] = (),
    fr_dirs: Sequence[str] = (),
    duration_s: Optional[float] = None,
) -> List[str]:
    """What each node runs: this same diag (same interpreter path) in its hidden node mode,
    unless ``$DIAG_SLURM_NODE_CMD`` says how diag starts on the nodes. ``count`` 0 (a watch):
    sample until told to stop, or until srun's stdin closes because diag is gone."""
    default = python_module_argv("diag")  # -P: not from the submit directory, on every node
    base = list(diag_cmd) or shlex.split(os.environ.get(NODE_CMD_ENV, "")) or default
    return [
        *base,
        "slurm-node",
        str(job_id),
        "--count",
        str(count),
        "--interval",
        f"{interval_s:g}",
        *[arg for d in fr_dirs for arg in ("--fr-dir", d)],
        *(["--duration-s", f"{duration_s:g}"] if duration_s else []),
        *(["--stop-on-eof"] if count <= 0 else []),
    ]


def srun_argv(job: JobInfo, command: Sequence[str], nodes: Sequence[str] = ()) -> List[str]:
    """One task per node; ``nodes`` narrows it to some of the job's nodes (the retry)."""
    n = str(len(nodes or job.nodes))
    return [
        "srun",
        "--overlap",  # share the job's resources: take nothing from it
        f"--jobid={job.job_id}",
        f"--nodes={n}",
        f"--ntasks={n}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",  # one node's collector failing must not end the others
        *([f"--nodelist={','.join(nodes)}"] if nodes else []),
        "--job-name=diag",
        *command,
    ]


class SlurmCapture(NamedTuple):
    bundle: Bundle
    notes: Tuple[str, ...]  # what the nodes want the user to know, "node: ..."


def expected_s(count: int, interval_s: float, duration_s: Optional[float]) -> Optional[float]:
    """How long the nodes may take before diag gives up on them; None: until stopped."""
    if count > 0:
        return (count - 1) * interval_s + _NODE_SLACK_S + count * _PER_SAMPLE_SLACK_S
    if duration_s:
        return duration_s + _NODE_SLACK_S + _PER_SAMPLE_SLACK_S
    return None


def capture_job(
    job_id: int,
    *,
    count: int = 3,
    interval_s: float = 2.0,
    timeout_s: Optional[float] = None,
    diag_cmd: Sequence[str] = (),
    fr_dirs: Sequence[str] = (),
    duration_s: Optional[float] = None,
    echo: Optional[Callable[[str], None]] = None,
) -> SlurmCapture:
    """Capture every node of a running job and merge; failed nodes are recorded. ``count`` 0
    with or without ``duration_s`` is ``diag watch --slurm-job``: until Ctrl-C / duration."""
    job = job_info(job_id)
    limit_s = timeout_s if timeout_s is not None else expected_s(count, interval_s, duration_s)
    command = node_command(job_id, count, interval_s, diag_cmd, fr_dirs, duration_s)
    gathered = run_srun(srun_argv(job, command), job.nodes, limit_s, echo)
    parts: List[HostPart] = gathered.parts()
    missing: List[MissingHost] = gathered.missing(limit_s or gathered.elapsed_s)
    notes = gathered.notes()
    # srun cancels the whole step when it cannot launch on some node (even with --no-kill), so
    # healthy nodes may have been cut off mid-capture: run those once more, on their own.
    unreachable = gathered.launch_failures()
    retry = [m.name for m in missing if unreachable and m.name not in unreachable
             and not gathered.nodes[m.name].errors]  # fmt: skip
    # A collector killed by a signal (its step ended there, the OOM killer): once more if the
    # job still runs - it is the job diag was asked about, not the collector, that decides.
    killed = [n for n in gathered.signalled() if n not in retry]
    state = job_state(job_id) if killed else "RUNNING"
    rerun: List[str] = []
    if killed and state not in ("RUNNING", "?"):
        missing = [_job_ended(m, job_id, state) if m.name in killed else m for m in missing]
    elif killed and count > 0:
        rerun = killed
        retry.extend(killed)
        if echo is not None:
            echo(f"diag's collector was killed on {', '.join(killed)} (srun said so); "
                 f"job {job_id} still runs: again there")  # fmt: skip
    if retry:
        if echo is not None and unreachable:
            echo(f"srun could not start on {', '.join(unreachable)}: again on {', '.join(retry)}")
        again = run_srun(srun_argv(job, command, retry), retry, limit_s, echo)
        parts.extend(again.parts())
        missing = [m for m in missing if m.name not in retry]
        missing.extend(again.missing(limit_s or again.elapsed_s))
        notes = [n for n in notes if n.split(":")[0] not in retry] + again.notes()
        notes += [_rerun_note(gathered, name) for name in rerun]
    order = {name: i for i, name in enumerate(job.nodes)}
    parts.sort(key=lambda p: order.get(p.label, len(order)))
    missing.sort(key=lambda m: order.get(m.name, len(order)))
    return SlurmCapture(merge_bundles(parts, missing), tuple(notes))
