"""The thin click layer: parse flags, call the module that does the work, map errors to exits.

This is the only place that turns exceptions into output: a ``DiagError`` becomes one line on
stderr and its documented exit code (see ``diag.errors``); anything unexpected becomes one line
asking for a bug report (set ``DIAG_DEBUG=1`` for the traceback).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import traceback
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, TypeVar

import click

from diag import __version__
from diag.cli_options import (
    Seconds,
    fail_on_option,
    job_options,
    output_option,
    slurm_job_option,
)
from diag.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, DiagError, OutputClosed

F = TypeVar("F", bound=Callable[..., Any])


def _echo(line: str) -> None:
    """Print one line on stdout: scrubbed (every secret this process learned) and terminal-safe,
    because lines carry names the target chose (see ``diag.redaction.redact.printable``)."""
    from diag.redaction.redact import printable

    click.echo(printable(line))


def _echo_err(line: str) -> None:
    """``_echo`` for stderr: notes, status lines, errors."""
    from diag.redaction.redact import printable

    click.echo(printable(line), err=True)


def json_option(help_text: str) -> Callable[[F], F]:
    """--json: one JSON document on stdout (``diag.commands.machine_json``), nothing else."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def _require_no_target(pid: Optional[int], command: Sequence[str]) -> None:
    if pid is not None or command:
        raise click.UsageError("--slurm-job takes neither --pid nor a command")


def _closed(fd: int) -> bool:
    """Whether ``fd`` (stdout, stderr) is a pipe or socket whose reader went away, or a terminal
    that hung up: poll reports POLLERR/POLLHUP on such a write end at once."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _fd, ev in events)


@contextlib.contextmanager
def _output_may_close() -> Iterator[None]:
    """A write to a stdout (or stderr) whose reader left (``diag ps | head -1``) ends the
    command as ``OutputClosed``, which ``main`` turns into a quiet exit 0 - before click's own
    handler, which would exit 1. An EPIPE from anything else (a pipe to a helper) is left as
    it is: that is a fault of diag's, not the reader's choice."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE and (_closed(1) or _closed(2)):
            raise OutputClosed() from None
        raise


class _Group(click.Group):
    """The top-level group: parsing (``--help`` output) and every subcommand run under
    ``_output_may_close``."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _output_may_close():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _output_may_close():
            return super().invoke(ctx)


def _closed_to_devnull() -> None:
    """Point a stdout/stderr whose reader left at /dev/null, so the interpreter's last flush of
    what is still buffered neither fails nor prints "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        if _closed(fd):
            os.dup2(devnull, fd)
    os.close(devnull)


def _tell_error(line: str) -> None:
    """An error's one line on stderr; a stderr nobody reads any more takes nothing, and the
    error's exit code still stands (a script reads that, not the lost line)."""
    try:
        with _output_may_close():
            _echo_err(line)
    except OutputClosed:
        _closed_to_devnull()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="diag")
def cli() -> None:
    """Is this ML run progressing, slow, idle, or deadlocked - and why?

    \b
    diag capture --pid 1234            snapshot every rank a few times, give a verdict
    diag watch --interval 30 --pid 1234
    diag watch -- python -m sglang.launch_server ...
    diag report bundle.json            re-render a bundle offline
    diag demo                          see it on a built-in job first
    """


@cli.command(context_settings={"allow_interspersed_args": False})
@job_options
@click.option(
    "--interval",
    "interval_s",
    type=Seconds(min=0.0),
    default=2.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option("--count", type=click.IntRange(min=1), default=3, show_default=True, help="Samples.")
@output_option("Output path; written as PATH.json (default diag-<pid>-<time>.json here).")
@slurm_job_option("Capture every node of this running Slurm job (srun --overlap) and merge.")
@fail_on_option(
    "Comma-separated verdicts (e.g. deadlocked,slow) that make capture exit with code 10 "
    "(after writing its outputs)."
)
@json_option("Print one JSON document (verdict, suspects, rule, ETA, report paths) on stdout.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def capture(
    pid: Optional[int],
    interval_s: float,
    count: int,
    out: Optional[str],
    log_paths: List[str],
    command: List[str],
    slurm_job: Optional[int] = None,
    fail_on: Optional[str] = None,
    fr_dirs: Tuple[str, ...] = (),
    as_json: bool = False,
) -> None:
    """Snapshot every process of a job N times and write a JSON bundle.

    With `-- CMD ARGS...` diag launches the command, captures it from its first second, and
    records its exit code (its output is teed to PATH.log). With neither, the one ML job on
    this host is taken (see `diag ps`).
    """
    from diag.commands.machine_json import report_outcome_json
    from diag.commands.outcome import report_outcome
    from diag.watch.session import parse_states

    fail_states = parse_states(fail_on)
    if as_json and command:
        raise click.UsageError(
            "--json takes --pid (or no target); after a launched capture, "
            "diag summary --json PATH.json"
        )
    finish = report_outcome_json if as_json else report_outcome
    if pid is None and not command and slurm_job is None:
        from diag.commands.ps import only_job

        pid = only_job(_echo_err)
    if slurm_job is not None:
        _require_no_target(pid, command)
        from diag.slurm.commands import run_slurm_capture

        merged = run_slurm_capture(
            slurm_job, count=count, interval_s=interval_s, out=out, fr_dirs=fr_dirs
        )
        finish(merged, merged=True, fail_states=fail_states, out=_echo, err=_echo_err)
        return
    if command or pid is None:
        from diag.watch.session import capture_launched, require_one_target

        require_one_target(pid, command, "capture")
        capture_launched(
            argv=command,
            interval_s=interval_s,
            count=count,
            out=out,
            log_paths=log_paths,
            echo=_echo_err,
            fr_dirs=fr_dirs,
            fail_on=fail_states,
        )
        return
    from diag.commands.capture import run_capture

    result = run_capture(
        pid,
        interval_s=interval_s,
        count=count,
        out=out,
        log_paths=tuple(log_paths),
        fr_dirs=tuple(fr_dirs),
        extend_to_rhythm=_length_not_fixed(),
    )
    finish(result, merged=False, fail_states=fail_states, out=_echo, err=_echo_err)


def _length_not_fixed() -> bool:
    """Neither --count nor --interval given: the capture may extend itself to cover the
    job's log rhythm (``diag.verdict.rhythm``)."""
    ctx = click.get_current_context()
    return all(
        ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT
        for name in ("count", "interval_s")
    )


@cli.command(context_settings={"allow_interspersed_args": False})
@job_options
@click.option(
    "--interval",
    "interval_s",
    type=Seconds(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after N samples.")
@click.option("--duration", default=None, help="Stop after this long: 90s, 15m, 2h, 1d.")
@output_option("Report path PATH.html; PATH.jsonl (journal), .json, .md, .log go beside it.")
@fail_on_option(
    "Comma-separated verdicts (e.g. deadlocked,idle) that end the watch with exit code 10."
)
@click.option(
    "--fail-after",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Consecutive samples a --fail-on verdict must hold.",
)
@slurm_job_option(
    "Watch every node of this running Slurm job (until --count/--duration/Ctrl-C), then "
    "merge into one report."
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def watch(
    pid: Optional[int],
    interval_s: float,
    count: Optional[int],
    duration: Optional[str],
    out: Optional[str],
    fail_on: Optional[str],
    fail_after: int,
    log_paths: List[str],
    command: List[str],
    fr_dirs: Tuple[str, ...] = (),
    slurm_job: Optional[int] = None,
) -> None:
    """Sample a job (--pid P, or launch `-- CMD ARGS...`) until stopped, keeping the report current.

    One status line per sample on stderr; the HTML report is rewritten atomically after every
    sample and a crash-safe journal PATH.jsonl grows by one line per sample. Ctrl-C / SIGTERM
    (forwarded to a launched command first) end it with a final report.
    """
    if slurm_job is not None:
        _require_no_target(pid, command)
        from diag.commands.outcome import report_outcome
        from diag.slurm.commands import run_slurm_watch
        from diag.watch.session import parse_states

        fail_states = parse_states(fail_on)
        result = run_slurm_watch(
            slurm_job,
            interval_s=interval_s,
            count=count,
            duration=duration,
            out=out,
            fr_dirs=fr_dirs,
            echo=_echo_err,
        )
        report_outcome(result, merged=True, fail_states=fail_states, out=_echo, err=_echo_err)
        return
    from diag.watch.session import watch_command

    watch_command(
        pid=pid,
        argv=command,
        interval_s=interval_s,
        count=count,
        duration=duration,
        out=out,
        fail_on=fail_on,
        fail_after=fail_after,
        log_paths=log_paths,
        echo=_echo_err,
        fr_dirs=fr_dirs,
    )


@cli.command()
@click.argument("bundles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_option("Output path; written as PATH.json (default diag-merged-<time>.json here).")
def merge(bundles: List[str], out: Optional[str]) -> None:
    """Merge bundles captured on several hosts into one verdict and report.

    For bundles collected any way (kubectl exec, pdsh); hosts are labelled by hostname, and
    how far apart their clocks/samples were is shown. An unreadable bundle is recorded and the
    merge is made from the rest.
    """
    from diag.commands.merge import run_merge
    from diag.commands.outcome import report_outcome

    merged = run_merge(bundles, out)
    report_outcome(merged, merged=True, fail_states=frozenset(), out=_echo, err=_echo_err)


@cli.command()
@click.argument("bundle", type=click.Path(dir_okay=False))
@output_option("HTML path (default: beside the bundle); the Markdown goes beside it as .md.")
def report(bundle: str, out: Optional[str]) -> None:
    """Re-render a bundle (.json, or a .jsonl journal, even cut short) as HTML + Markdown."""
    from diag.commands.report import run_report
    from diag.text.terminal import safe_line

    for path in run_report(bundle, out):
        _echo(safe_line(f"wrote {path}"))  # a newline in the path must not forge a line


@cli.command()
@click.argument("bundle", type=click.Path(dir_okay=False))
@json_option("Print one JSON document (verdict, suspects, rule, ETA, report paths) instead.")
def summary(bundle: str, as_json: bool = False) -> None:
    """Print a bundle's verdict and per-rank table."""
    if as_json:
        from diag.commands.machine_json import summary_json

        click.echo(summary_json(bundle))
        return
    from diag.commands.report import summary_text
    from diag.redaction.redact import printable

    click.echo(printable(summary_text(bundle)), nl=False)


@cli.command()
@json_option("Print one JSON document (the jobs, their ranks, ports, GPUs) on stdout.")
@click.option("--no-gpu", is_flag=True, help="Do not ask NVML which processes hold a GPU.")
def ps(as_json: bool, no_gpu: bool) -> None:
    """List the ML jobs on this host (no PID needed), one line each, with the capture command.

    Jobs are process trees with ranks (RANK/LOCAL_RANK), launchers (torchrun, mpirun, vllm
    serve, sglang.launch_server), framework titles (sglang::, VLLM::, ray::), serving stacks
    (uvicorn, gunicorn) or GPU processes. Reads /proc only: no stacks, nothing paused.
    """
    if as_json:
        from diag.commands.machine_json import encode
        from diag.commands.ps import ps_doc, scan

        click.echo(encode(ps_doc(scan(gpu=not no_gpu))))
        return
    from diag.commands.ps import run_ps

    run_ps(_echo, _echo_err, gpu=not no_gpu)


@cli.command()
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default=None,
    help=(
        "Where captures write their reports (default: a fresh private directory, mode 0700, "
        "made per server under $XDG_RUNTIME_DIR or $TMPDIR)."
    ),
)
def mcp(out_dir: Optional[str]) -> None:
    """Serve diag's tools to a coding agent: a Model Context Protocol server over stdio.

    Tools: list_jobs, capture, summary, watch_status (README: registering it with a client).
    """
    from pathlib import Path

    from diag.mcp.server import run_mcp

    run_mcp(Path(out_dir) if out_dir else None)


@cli.command()
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the demos and their verdicts.")
@click.option(
    "--watch",
    is_flag=True,
    help="Watch it (`diag watch`, 6 samples 2 s apart) instead of one capture.",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default="diag-demo",
    show_default=True,
    help="Where the reports (NAME.json, .html, .md) and the job's NAME.log go.",
)
def demo(name: Optional[str], list_only: bool, watch: bool, out_dir: str) -> None:
    """Run a small built-in job in a known state and diagnose it (default: load).

    No GPU or torch needed; the job is killed when the demo ends.
    """
    from pathlib import Path

    from diag.demo.runner import list_lines, run_demo

    if list_only:
        for line in list_lines():
            click.echo(line)
        return
    run_demo(name, out_dir=Path(out_dir), watch=watch, out=_echo, err=_echo_err)


@cli.command("slurm-node", hidden=True)
@click.argument("job_id", type=int)
@click.option("--count", type=click.IntRange(min=0), default=3)
@click.option("--interval", "interval_s", type=Seconds(min=0.0), default=2.0)
@click.option("--fr-dir", "fr_dirs", multiple=True)
@click.option("--duration-s", type=Seconds(min=0.0), default=None)
@click.option("--stop-on-eof", is_flag=True)
def slurm_node(
    job_id: int,
    count: int,
    interval_s: float,
    fr_dirs: Tuple[str, ...],
    duration_s: Optional[float],
    stop_on_eof: bool,
) -> None:
    """Per-node half of --slurm-job (started by srun): bundle to stdout, line protocol."""
    from diag.slurm.node import run_node

    sys.exit(
        run_node(
            job_id,
            count=count,
            interval_s=interval_s,
            fr_dirs=fr_dirs,
            duration_s=duration_s,
            stop_on_eof=stop_on_eof,
        )
    )


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: run click, then map any failure to one line and an exit code. A
    stdout or stderr whose reader left ends the command quietly with 0 for what it wrote."""
    try:
        with _output_may_close():
            _main(argv)
    except OutputClosed:
        _closed_to_devnull()
        sys.exit(EXIT_OK)


def _main(argv: Optional[List[str]]) -> None:
    try:
        cli.main(args=argv, prog_name="diag", standalone_mode=False)
    except click.exceptions.Abort:
        _tell_error("diag: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as exc:
        # One line, like every other error: what was wrong and where the help is.
        name = exc.ctx.command_path if exc.ctx is not None else "diag"
        _tell_error(f"diag: {' '.join(exc.format_message().split())} - see {name} --help")
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except DiagError as exc:
        _tell_error(f"diag: {exc.one_line()}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _tell_error("diag: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except (SystemExit, OutputClosed):
        raise
    except Exception as exc:
        if os.environ.get("DIAG_DEBUG"):
            traceback.print_exc()
        _tell_error(
            f"diag: internal error: {type(exc).__name__}: {exc} - please report it "
            "(rerun with DIAG_DEBUG=1 for the traceback)"
        )
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
