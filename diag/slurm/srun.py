"""Running srun and reading what the nodes send back, for ``diag capture --slurm-job``.

srun runs in its own session so a Ctrl-C reaches only diag, which then tells the nodes to stop
(through srun's stdin, forwarded to every task) instead of losing their samples. Lines from
srun's stdout go to ``slurm_wire.Gathered`` with the time they arrived (the clock estimate
needs it); srun's stderr is kept for the reasons of nodes that sent nothing.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple

from diag.errors import EXIT_MISSING_TOOL, DiagError
from diag.probes.slurm_procs import EXCLUDE_ENV
from diag.slurm.wire import PING, STOP, Gathered

_MAX_PONGS = 3
_STOP_GRACE_S = 60.0

if TYPE_CHECKING:
    Lines = queue.Queue[Tuple[float, Optional[str]]]


# Slurm client settings that say which cluster to talk to; every other SLURM_* variable here
# describes a job or step diag itself may run in, and srun would take it for an option.
_KEEP_SLURM_ENV = ("SLURM_CONF", "SLURM_CLUSTERS", "SLURM_CONF_SERVER")


def srun_env(marker: Optional[str] = None) -> Dict[str, str]:
    """Our environment without the SLURM_* of any job diag itself runs in; the marker lets
    nodes leave the controller out."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k in _KEEP_SLURM_ENV
    }
    if marker is not None:
        env[EXCLUDE_ENV] = marker
    return env


def _pump(stream: Optional[IO[str]], out: Lines) -> None:
    for line in stream if stream is not None else ():
        out.put((time.time(), line))
    out.put((time.time(), None))


def run_srun(
    argv: Sequence[str],
    nodes: Sequence[str],
    timeout_s: Optional[float],
    echo: Optional[Callable[[str], None]] = None,
) -> Gathered:
    """Start srun, ping the nodes as they say hello, collect every line until all nodes are
    done, srun exits or the deadline passes (then srun is stopped and what arrived is kept).

    srun runs in its own session, so a Ctrl-C reaches only diag: the first one tells every
    node to stop and send what it has (the report is made from that), a second one aborts.
    ``timeout_s`` None: no deadline until a stop is asked for (an open-ended watch)."""
    marker = f"{os.uname().nodename.split('.')[0]}:{os.getpid()}"
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=srun_env(marker),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise DiagError(
            "srun not found: this host is not a Slurm client",
            "run diag on a login node of the cluster",
            EXIT_MISSING_TOOL,
        ) from None
    step = _Step(proc, Gathered(nodes), echo)
    step.gather(started + timeout_s if timeout_s is not None else None)
    step.finish()
    step.gathered.elapsed_s = time.monotonic() - started
    return step.gathered


class _Step:
    """One srun step as diag drives it: its output pumped into queues, the nodes pinged,
    a Ctrl-C turned into a stop request."""

    def __init__(
        self, proc: subprocess.Popen[str], gathered: Gathered, echo: Optional[Callable[[str], None]]
    ) -> None:
        self.proc = proc
        self.gathered = gathered
        self.echo = echo
        self.lines: Lines = queue.Queue()
        self.errors: Lines = queue.Queue()
        self.stopping = False
        self.shown = 0
        threading.Thread(target=_pump, args=(proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=_pump, args=(proc.stderr, self.errors), daemon=True).start()

    def send(self, text: str) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.write(text + "\n")
                stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def gather(self, deadline: Optional[float]) -> None:
        """Every line until all nodes are done, srun's output ends, or the deadline."""
        gathered = self.gathered
        while not gathered.all_done():
            try:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    gathered.timed_out = True
                    return
                wait_s = 1.0 if deadline is None else min(deadline - now, 1.0)
                try:
                    recv_s, line = self.lines.get(timeout=wait_s)
                except queue.Empty:
                    continue
                if line is None:
                    return  # srun's output ended
                self._on_line(line, recv_s)
            except KeyboardInterrupt:
                if self.stopping:
                    self.proc.kill()
                    raise
                self.stopping = True
                self.send(STOP)
                deadline = time.monotonic() + _STOP_GRACE_S
                if self.echo is not None:
                    self.echo(
                        f"stopping: waiting up to {_STOP_GRACE_S:g}s for every node's samples "
                        "(Ctrl-C again to abort)"
                    )

    def _on_line(self, line: str, recv_s: float) -> None:
        """A node's line: answer its hello (and its first pongs) with a ping, echo progress."""
        gathered = self.gathered
        event = gathered.feed(line, recv_s)
        if event == "hello" or (event == "pong" and gathered.min_pongs() < _MAX_PONGS):
            self.send(f"{PING} {time.time():.6f}")
        progress = gathered.progress()
        if self.echo is not None and event == "tick" and progress and progress[0] > self.shown:
            self.shown = progress[0]
            self.echo(
                f"sample {self.shown}: {progress[1]} node(s), {progress[2]} process(es) alive"
            )

    def finish(self) -> None:
        """Close srun's stdin, stop it if the deadline passed, reap it, keep its stderr."""
        proc, gathered = self.proc, self.gathered
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        if gathered.timed_out:
            proc.terminate()
        if gathered.all_done() and not self.stopping:
            # Every node sent its last line, and what each sent is decoded already (a node's
            # failure came on the wire): the merge need not wait the ~0.2 s srun takes to tear
            # the step down. It is reaped in the background; srun's stderr so far is kept.
            threading.Thread(target=_reap, args=(proc,), daemon=True).start()
            _drain(self.errors, gathered, wait_s=0.0)
        else:
            _reap(proc)
            _drain(self.errors, gathered, wait_s=0.5)
            gathered.returncode = proc.returncode


def _reap(proc: subprocess.Popen[str]) -> None:
    """srun ends as its tasks exit; terminate, then kill, one that does not."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _drain(errors: Lines, gathered: Gathered, wait_s: float) -> None:
    """srun's own messages ("srun: error: node3: task 2: Exited with ..."): until its stderr
    ends, or none came for ``wait_s``."""
    while True:
        try:
            _, text = errors.get(timeout=wait_s) if wait_s > 0 else errors.get_nowait()
        except queue.Empty:
            break
        if text is None:
            break
        gathered.stderr.append(text.rstrip("\n"))
