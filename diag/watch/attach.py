"""Attach a watch to its target: the outputs' base path, and a PID or a command diag launches.

Launching learns the secrets of the command's environment and argv *before* it starts, so the
very first line its output tee writes to ``PATH.log`` is already scrubbed; from the first
sample on, the collector's redactor (which also learns every forked process's secrets) takes
over.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional, Sequence, Tuple

from diag.collect.collector import Collector
from diag.commands.capture import check_target, require_pyspy
from diag.commands.output_paths import Outputs
from diag.errors import EXIT_INTERRUPTED, DiagError
from diag.probes.procfs import ProcFS
from diag.redaction.redact import Redactor
from diag.watch.interrupts import SignalForwarding
from diag.watch.launch import LaunchedCommand, launch


class Attached(NamedTuple):
    collector: Collector
    launched: Optional[LaunchedCommand]
    command: Tuple[str, ...]  # redacted argv of a launched command


def launch_attached(
    argv: Sequence[str],
    outputs: Outputs,
    log_paths: Sequence[str],
    pyspy: str,
    forwarding: SignalForwarding,
) -> Attached:
    """Start ``argv`` and a Collector on it; secrets of its env and argv are known first."""
    env = dict(os.environ)
    redactor = Redactor()
    redactor.add_environ(env)
    command = redactor.scrub_argv(argv)
    scrubber = [redactor]  # the tee scrubs with the richest redactor known (see below)
    marks = [redactor.mark()]  # what it knew from the start: the log never held those
    log_path = outputs.with_ext(".log")
    launched = launch(
        argv,
        log_path,
        scrub=lambda text: scrubber[0].scrub(text),
        env=env,
        directory=outputs.directory,
        rescrub=lambda data: scrubber[0].rescrub_bytes(data, marks[0]),
    )
    forwarding.child = launched
    if forwarding.stop.requested and forwarding.stop.signum is not None:
        launched.forward(forwarding.stop.signum)  # Ctrl-C arrived while we were starting it
    collector = Collector(launched.pid, log_paths=(str(log_path), *log_paths), pyspy=pyspy)
    collector.redactor.add_environ(env)
    collector.redactor.scrub_argv(argv)
    # From now on the collector's redactor also learns the secrets of every process the
    # command forks (their environments), and the log tee uses it.
    marks[0] = collector.redactor.mark()
    scrubber[0] = collector.redactor
    return Attached(collector, launched, command)


def attach(
    pid: Optional[int],
    argv: Sequence[str],
    outputs: Outputs,
    log_paths: Sequence[str],
    forwarding: SignalForwarding,
) -> Attached:
    pyspy = require_pyspy()
    if forwarding.stop.requested:
        raise DiagError("interrupted before the target was attached", "", EXIT_INTERRUPTED)
    if argv:
        return launch_attached(argv, outputs, log_paths, pyspy, forwarding)
    assert pid is not None
    check_target(pid, ProcFS())
    return Attached(Collector(pid, log_paths=tuple(log_paths), pyspy=pyspy), None, ())
