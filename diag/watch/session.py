"""Wire a watch (or a launched capture) together: target, outputs, signals, the loop.

Outputs sit side by side under one base path (``-o PATH.html`` -> base ``PATH``):

* ``PATH.html`` / ``PATH.md`` / ``PATH.json`` - the report of the current window, rewritten
  atomically after every sample through ``render.outputs.write_outputs`` (the same seam capture
  uses, so both commands write the same kinds of file, scrubbed the same way);
* ``PATH.jsonl`` - the journal of every sample (``diag report PATH.jsonl`` renders all);
* ``PATH.log`` - a launched command's stdout/stderr, secrets scrubbed.

A launched command is never killed behind the user's back: when sampling ends by
``--count``/``--duration`` diag stays attached (tee, signal forwarding) until the command
exits, then records the exit code. The exception is ``--fail-on``: a watchdog that fired
terminates the job it launched (SIGTERM to its group, SIGKILL after a grace period), because a
CI step must not hang on the deadlock it just reported. diag failing (a full disk, a bug) is
never a reason: the failure is recorded and told, the watch goes on (``diag.watch.faults``),
and diag exits with it only after the command ended on its own.

Every file is created relative to one handle of the output directory, opened and checked once
(``Outputs.directory``, see ``diag.bundle.outdir``), for the life of the watch.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Callable, FrozenSet, List, Optional, Sequence, Tuple

import msgspec

from diag.bundle.io import write_error
from diag.collect.enrich import with_log_summary
from diag.commands.judge import judge
from diag.commands.output_paths import Outputs, output_base
from diag.errors import EXIT_FAIL_ON, EXIT_USAGE, DiagError
from diag.model import STATES, Bundle
from diag.probes.nccl.flight_recorder import FrTracker
from diag.render.outputs import write_outputs
from diag.text.terminal import safe_line
from diag.watch.attach import attach
from diag.watch.interrupts import SignalForwarding, StopRequest
from diag.watch.launch import LaunchedCommand, describe_exit
from diag.watch.loop import WatchOptions, WatchResult, run_watch


def run_session(
    *,
    pid: Optional[int],
    argv: Sequence[str],
    out: Optional[str],
    options: WatchOptions,
    log_paths: Sequence[str] = (),
    echo: Callable[[str], None],
    journal: bool = True,
    fr_dirs: Sequence[str] = (),
) -> Tuple[WatchResult, Outputs]:
    """Attach (or launch), watch until a stop condition, write the final outputs, and print
    the summary (verdict, command exit, files) through ``echo``, which may fail harmlessly."""
    echo = _tolerant(echo)
    outputs = output_base(out, Path(argv[0]).name if argv else str(pid))
    try:
        result, launched = _watch(pid, argv, outputs, options, log_paths, echo, journal, fr_dirs)
        summary = _summary(result, outputs, journal, launched)  # looked up through the handle
    finally:
        if outputs.directory is not None:
            outputs.directory.close()
    for line in summary:
        echo(line)
    if result.failure is not None:
        raise result.failure
    return result, outputs


def _watch(
    pid: Optional[int],
    argv: Sequence[str],
    outputs: Outputs,
    options: WatchOptions,
    log_paths: Sequence[str],
    echo: Callable[[str], None],
    journal: bool,
    fr_dirs: Sequence[str],
) -> Tuple[WatchResult, Optional[LaunchedCommand]]:
    """``run_session`` between opening the outputs and the summary: attach, watch, detach."""
    dumps = FrTracker(fr_dirs)  # Flight Recorder dumps appear when a watchdog fires
    stop = StopRequest()
    forwarding = SignalForwarding(stop)
    with forwarding:
        try:
            attached = attach(pid, argv, outputs, log_paths, forwarding)
        except BaseException:
            _stay_attached(forwarding.child, echo)
            raise
        redactor = attached.collector.redactor
        json_path = outputs.with_ext(".json")

        def writer(bundle: Bundle, final: bool) -> None:
            write_outputs(bundle, json_path, redactor, outputs.directory)

        opts = msgspec.structs.replace(
            options, journal_path=outputs.with_ext(".jsonl") if journal else None
        )
        try:
            result = run_watch(
                attached.collector,
                opts,
                writer=writer,
                classify=judge,
                enrich=lambda bundle: with_log_summary(dumps.attach(bundle)),
                echo=echo,
                stop=stop,
                launched=attached.launched,
                command=attached.command,
                journal_scrub=redactor.scrub_bytes,
                on_waiting=lambda: echo(
                    safe_line(
                        f"diag: sampling done, report in {outputs.with_ext('.html')}; "
                        "waiting for the command to exit (Ctrl-C is forwarded to it)"
                    )
                ),
                directory=outputs.directory,
            )
        except BaseException:
            # Only a bug run_watch did not contain: the command is not diag's to end.
            _stay_attached(attached.launched, echo)
            raise
        finally:
            attached.collector.close()  # the NVML worker must not outlive the watch
            if attached.launched is not None:
                attached.launched.close()
    launched = attached.launched
    if launched is not None and launched.log.error is not None and result.failure is None:
        # The log's last lines (drained at close) or its close itself failed.
        result.failure = write_error(launched.log_path, launched.log.error)
    return result, launched


def _stay_attached(launched: Optional[LaunchedCommand], echo: Callable[[str], None]) -> None:
    """diag failed with a launched command still running: it is never killed for that. diag
    stays attached (its output tee, Ctrl-C forwarded) until it exits, then reports the error."""
    if launched is None or launched.poll() is not None:
        return
    echo(
        f"diag: stopped watching after an error; the command (PID {launched.pid}) keeps "
        "running - diag waits for it to exit (Ctrl-C is forwarded to it)"
    )
    while launched.wait(1.0) is None:
        pass


def fail_on_error(result: WatchResult, fail_on: FrozenSet[str], outputs: Outputs) -> DiagError:
    state = result.verdict.state if result.verdict is not None else "unknown"
    held = f"for {result.consecutive} consecutive samples" if result.consecutive > 1 else "at exit"
    return DiagError(
        f"verdict {state} (--fail-on {','.join(sorted(fail_on))}) held {held}",
        f"evidence in {outputs.with_ext('.html')} and {outputs.with_ext('.jsonl')}",
        EXIT_FAIL_ON,
    )


_DURATION_UNITS_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise DiagError(
            f"invalid duration {text!r}", "write e.g. --duration 90s, 15m, 2h", EXIT_USAGE
        )
    return float(match.group(1)) * _DURATION_UNITS_S[match.group(2)]


def stop_duration_s(count: Optional[int], duration: Optional[str]) -> Optional[float]:
    """``--duration`` in seconds (None: none given); it and ``--count`` exclude each other."""
    if count is not None and duration is not None:
        raise DiagError("--count and --duration exclude each other", "pick one", EXIT_USAGE)
    return parse_duration_s(duration) if duration is not None else None


def parse_states(text: Optional[str]) -> FrozenSet[str]:
    """``deadlocked,idle`` -> the set of verdict states, each checked against ``STATES``."""
    if not text:
        return frozenset()
    states = frozenset(s.strip().lower() for s in text.split(",") if s.strip())
    unknown = sorted(states - set(STATES))
    if unknown:
        raise DiagError(
            f"unknown verdict state(s) for --fail-on: {', '.join(unknown)}",
            f"choose from {', '.join(STATES)}",
            EXIT_USAGE,
        )
    return states


def _summary(
    result: WatchResult, outputs: Outputs, journal: bool, launched: Optional[LaunchedCommand]
) -> List[str]:
    verdict = result.verdict
    lines = [
        f"verdict: {verdict.state}" + (f" - {verdict.summary}" if verdict.summary else "")
        if verdict is not None
        else "verdict: none (no sample taken)"
    ]
    if result.target.launched:
        lines.append(f"command: {describe_exit(result.child_exit_code)}")
    exts = [".html", ".md", ".json"] + ([".jsonl"] if journal else [])
    if result.target.launched:
        exts.append(".log")
    lines += [f"wrote {outputs.with_ext(ext)}" for ext in exts if _written(outputs, ext)]
    if launched is not None and launched.log.lost:
        kept = ", ".join(str(p) for p in launched.spool_paths)
        lines.append(
            f"{outputs.with_ext('.log')} lost lines; the command's whole output is in {kept}"
        )
    return [safe_line(line) for line in lines]


def _written(outputs: Outputs, ext: str) -> bool:
    """Whether the file exists in the directory diag wrote (its handle), not at the path."""
    if outputs.directory is None:
        return outputs.with_ext(ext).exists()
    st = outputs.directory.lstat(outputs.name(ext))
    return st is not None and stat.S_ISREG(st.st_mode)


def _tolerant(echo: Callable[[str], None]) -> Callable[[str], None]:
    """Status output must never cost the report: a hung-up terminal or closed pipe is ignored."""

    def write(line: str) -> None:
        try:
            echo(line)
        except OSError:
            pass

    return write


def require_one_target(pid: Optional[int], argv: Sequence[str], verb: str) -> None:
    if (pid is None) == (not argv):
        raise DiagError(
            "give either --pid P or a command after --",
            f"diag {verb} --pid 1234  or  diag {verb} -- python train.py",
            EXIT_USAGE,
        )


def watch_command(
    *,
    pid: Optional[int],
    argv: Sequence[str],
    interval_s: float,
    count: Optional[int],
    duration: Optional[str],
    out: Optional[str],
    fail_on: Optional[str],
    fail_after: int,
    log_paths: Sequence[str],
    echo: Callable[[str], None],
    fr_dirs: Sequence[str] = (),
) -> None:
    """``diag watch``: status lines and the summary go to ``echo`` (stderr); raises
    ``DiagError(EXIT_FAIL_ON)`` once the evidence is written if ``--fail-on`` fired."""
    require_one_target(pid, argv, "watch")
    duration_s = stop_duration_s(count, duration)
    states = parse_states(fail_on)
    options = WatchOptions(
        interval_s=interval_s,
        count=count,
        duration_s=duration_s,
        fail_on=states,
        fail_after=fail_after,
    )
    result, outputs = run_session(
        pid=pid,
        argv=argv,
        out=out,
        options=options,
        log_paths=log_paths,
        echo=echo,
        fr_dirs=fr_dirs,
    )
    if result.fail_on_hit:
        raise fail_on_error(result, states, outputs)


def capture_launched(
    *,
    argv: Sequence[str],
    interval_s: float,
    count: int,
    out: Optional[str],
    log_paths: Sequence[str],
    echo: Callable[[str], None],
    fr_dirs: Sequence[str] = (),
    fail_on: FrozenSet[str] = frozenset(),
) -> None:
    """``diag capture -- CMD``: ``count`` samples from the command's first second, then (if it
    still runs) stay attached until it exits and record its exit code; no journal. A final
    verdict in ``fail_on`` raises the --fail-on error (exit 10) after the outputs are written."""
    options = WatchOptions(interval_s=interval_s, count=count, window_samples=count + 1)
    result, outputs = run_session(
        pid=None,
        argv=argv,
        out=out,
        options=options,
        log_paths=log_paths,
        echo=echo,
        journal=False,
        fr_dirs=fr_dirs,
    )
    if result.verdict is not None and result.verdict.state in fail_on:
        raise fail_on_error(result, fail_on, outputs)
