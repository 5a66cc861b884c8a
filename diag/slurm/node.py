"""The per-node half of ``--slurm-job``: what ``diag slurm-node JOBID`` does on every node.

It is started by the controller's ``srun --overlap`` as a step of the job it inspects, finds
that job's processes on this node (``probes.slurm_procs``: cgroup, environ, ``scontrol
listpids``), samples them with the ordinary ``Collector`` (several roots: the batch script and
each step's tasks), and writes the redacted bundle to stdout in the ``slurm_wire`` line format.
It also answers the controller's pings so the controller can measure this node's clock offset.
Secrets are scrubbed *here*, by the redactor that read these processes' environments: the
controller never sees the raw values.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Callable, List, NamedTuple, Optional, Sequence, Tuple

import msgspec

from diag.bundle.io import encode_bundle
from diag.collect.collector import Collector
from diag.commands.capture import captured_bundle, denied_notes, require_pyspy, sample_series
from diag.commands.stopping import StopRequest
from diag.errors import EXIT_NO_TARGET, DiagError
from diag.model import Bundle, ProbeFailure, Sample
from diag.probes.procfs import ProcFS
from diag.probes.slurm_procs import EXCLUDE_ENV, find_job_processes, job_roots, parents
from diag.redaction.redact import Redactor
from diag.slurm.wire import PING, STOP, TAG, encode_chunks

_LISTPIDS_TIMEOUT_S = 10.0
_PING_WAIT_S = 5.0


def node_name() -> str:
    """Slurm's name for this node (what the job's NodeList says), else the short hostname."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


class _Out:
    """Whole lines to stdout from two threads (the capture and the ping answerer)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            self._stream.write(text + "\n")
            self._stream.flush()


def _one_line(text: str) -> str:
    """A reason for the wire: secret-shaped text scrubbed, one short line."""
    return " ".join(Redactor().scrub(text).split())[:500]


class _Control:
    """What the controller says through srun's stdin: pings to answer, and "stop"."""

    def __init__(self, stop_on_eof: bool) -> None:
        self.answered = threading.Event()
        self.stop = StopRequest()  # the controller's "stop", as a signal is for a capture
        self.stop_on_eof = stop_on_eof

    def listen(self, stdin: IO[str], out: _Out, node: str) -> None:
        for line in stdin:
            if line.startswith(PING + " "):
                ctrl = line.split()[2] if len(line.split()) > 2 else "0"
                out.line(f"{TAG} pong {node} {ctrl} {time.time():.6f}")
                self.answered.set()
            elif line.startswith(STOP):
                self.stop.set()
        if self.stop_on_eof:  # the controller is gone: finish instead of sampling forever
            self.stop.set()


def _listpids(job_id: int) -> Tuple[Optional[str], Optional[ProbeFailure]]:
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            ["scontrol", "listpids", str(job_id)],
            capture_output=True,
            text=True,
            timeout=_LISTPIDS_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    else:
        if done.returncode == 0:
            return done.stdout, None
        reason = (done.stderr.strip() or f"exit code {done.returncode}")[:300]
    failure = ProbeFailure(
        probe="slurm-listpids", reason=reason, duration_s=round(time.monotonic() - t0, 3)
    )
    return None, failure


def _excluded(node: str) -> List[int]:
    """This collector, its parent, and the controller when it runs on this node (inside the
    job: it is a process of the job but not one to diagnose)."""
    pids = [os.getpid(), os.getppid()]
    host, _, pid = os.environ.get(EXCLUDE_ENV, "").rpartition(":")
    if pid.isdigit() and host in (node, socket.gethostname().split(".")[0]):
        pids.append(int(pid))
    return pids


class NodeCapture(NamedTuple):
    bundle: Bundle
    scrubbed_json: bytes  # what goes on the wire: scrubbed by this node's redactor
    notes: Tuple[str, ...]


def collect_node(
    job_id: int,
    count: int,
    interval_s: float,
    node: str,
    procfs: Optional[ProcFS] = None,
    fr_dirs: Sequence[str] = (),
    stop: Optional[StopRequest] = None,
    duration_s: Optional[float] = None,
    on_sample: Optional[Callable[[Sample], None]] = None,
) -> NodeCapture:
    """Sample every process of ``job_id`` on this node, as ``diag capture`` samples one tree
    (a last sample records an exit; Flight Recorder dumps and NCCL log lines are read here,
    where the files are). ``count`` 0 samples until ``stop`` is set or ``duration_s`` has
    passed (``diag watch``). DiagError when the job has no process on this node."""
    procfs = procfs if procfs is not None else ProcFS()
    listpids, listpids_failure = _listpids(job_id)
    own_step = os.environ.get("SLURM_STEP_ID") or os.environ.get("SLURM_STEPID")
    found = find_job_processes(procfs, job_id, own_step, _excluded(node), listpids, node)
    if not found:
        raise DiagError(
            f"no process of Slurm job {job_id} on node {node}",
            "the job's processes on this node may have exited (see squeue / sacct)",
            EXIT_NO_TARGET,
        )
    roots = job_roots(found, parents(procfs, found))
    collector = Collector(
        roots[0], extra_roots=roots[1:], procfs=procfs, pyspy=require_pyspy(), host=node
    )
    created_s = time.time()
    series = sample_series(
        collector, count=count, interval_s=interval_s, stop=stop, duration_s=duration_s,
        on_sample=on_sample,
    )  # fmt: skip
    bundle = captured_bundle(collector, series.samples, created_s, fr_dirs)
    if listpids_failure is not None:
        bundle = msgspec.structs.replace(
            bundle,
            failures=(*bundle.failures, msgspec.structs.replace(listpids_failure, host=node)),
        )
    notes = denied_notes(collector)
    return NodeCapture(bundle, collector.redactor.scrub_bytes(encode_bundle(bundle)), tuple(notes))


def run_node(
    job_id: int,
    *,
    count: int,
    interval_s: float,
    fr_dirs: Sequence[str] = (),
    duration_s: Optional[float] = None,
    stop_on_eof: bool = False,
    stdin: Optional[IO[str]] = None,
    stdout: Optional[IO[str]] = None,
) -> int:
    """Capture this node and stream the result; every failure is reported on the wire too."""
    node = node_name()
    out = _Out(stdout if stdout is not None else sys.stdout)
    out.line(f"{TAG} hello {node} {time.time():.6f}")
    control = _Control(stop_on_eof)
    threading.Thread(
        target=control.listen,
        args=(stdin if stdin is not None else sys.stdin, out, node),
        daemon=True,
    ).start()

    def tick(sample: Sample) -> None:
        alive = sum(1 for p in sample.processes if p.status == "alive")
        out.line(f"{TAG} tick {node} {sample.index} {alive}")

    code = 0
    try:
        captured = collect_node(
            job_id, count, interval_s, node, fr_dirs=fr_dirs, stop=control.stop,
            duration_s=duration_s, on_sample=tick,
        )  # fmt: skip
        for note in captured.notes:
            out.line(f"{TAG} note {node} {_one_line(note)}")
        # srun forwards stdin only once every task is launched (slow when a node fails to
        # launch): give the controller's first ping a moment, or the clock stays unmeasured.
        control.answered.wait(_PING_WAIT_S)
        for line in encode_chunks(node, captured.scrubbed_json):
            out.line(line)
    except DiagError as exc:
        out.line(f"{TAG} error {node} {_one_line(exc.one_line())}")
        code = exc.exit_code
    except Exception as exc:  # a bug on one node must still leave a reason for the report
        out.line(f"{TAG} error {node} {_one_line(f'internal error: {type(exc).__name__}: {exc}')}")
        code = 1
    out.line(f"{TAG} done {node}")
    return code
