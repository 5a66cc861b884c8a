"""The thin click layer: parse flags, call the module that does the work, map errors to exits.

This is the only place that turns exceptions into output: a ``DiagError`` becomes one line on
stderr and its documented exit code (see ``diag.errors``); anything unexpected becomes one line
asking for a bug report (set ``DIAG_DEBUG=1`` for the traceback).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, List, Optional

import click

from diag import __version__
from diag.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, DiagError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="diag")
def cli() -> None:
    """Is this ML run progressing, slow, idle, or deadlocked - and why?

    \b
    diag capture --pid 1234            snapshot every rank a few times, give a verdict
    diag watch --interval 30 --pid 1234
    diag watch -- python -m sglang.launch_server ...
    diag report bundle.json            re-render a bundle offline
    """


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--pid", type=int, default=None, help="PID of the job (launcher or any rank).")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.0),
    default=2.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option("--count", type=click.IntRange(min=1), default=3, show_default=True, help="Samples.")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Output path; written as PATH.json (default diag-<pid>-<time>.json here).",
)
@click.option(
    "--log", "log_paths", multiple=True, type=click.Path(), help="Extra log file to follow."
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def capture(
    pid: Optional[int],
    interval_s: float,
    count: int,
    out: Optional[str],
    log_paths: List[str],
    command: List[str],
) -> None:
    """Snapshot every process of a job N times and write a JSON bundle.

    With `-- CMD ARGS...` diag launches the command, captures it from its first second, and
    records its exit code (its output is teed to PATH.log).
    """
    from diag.capture import run_capture

    if command or pid is None:
        from diag.watch_session import capture_launched, require_one_target

        require_one_target(pid, command, "capture")
        capture_launched(
            argv=command,
            interval_s=interval_s,
            count=count,
            out=out,
            log_paths=log_paths,
            echo=lambda line: click.echo(line, err=True),
        )
        return

    result = run_capture(
        pid, interval_s=interval_s, count=count, out=out, log_paths=tuple(log_paths)
    )
    for note in result.notes:
        click.echo(f"diag: note: {note}", err=True)
    processes = result.bundle.processes
    ranks = sorted({p.rank for p in processes if p.rank is not None})
    click.echo(
        f"captured {len(result.bundle.samples)} sample(s) of {len(processes)} process(es)"
        + (f", ranks {','.join(map(str, ranks))}" if ranks else "")
    )
    for path in result.written:
        click.echo(f"wrote {path}")


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--pid", type=int, default=None, help="PID of the job (launcher or any rank).")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after N samples.")
@click.option("--duration", default=None, help="Stop after this long: 90s, 15m, 2h, 1d.")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Report path PATH.html; PATH.jsonl (journal), .json, .md, .log go beside it.",
)
@click.option(
    "--fail-on",
    default=None,
    metavar="STATES",
    help="Comma-separated verdicts (e.g. deadlocked,idle) that end the watch with exit code 10.",
)
@click.option(
    "--fail-after",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Consecutive samples a --fail-on verdict must hold.",
)
@click.option(
    "--log", "log_paths", multiple=True, type=click.Path(), help="Extra log file to follow."
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
) -> None:
    """Sample a job (--pid P, or launch `-- CMD ARGS...`) until stopped, keeping the report current.

    One status line per sample on stderr; the HTML report is rewritten atomically after every
    sample and a crash-safe journal PATH.jsonl grows by one line per sample. Ctrl-C / SIGTERM
    (forwarded to a launched command first) end it with a final report.
    """
    from diag.watch_session import watch_command

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
        echo=lambda line: click.echo(line, err=True),
    )


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: run click, then map any failure to one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="diag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("diag: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except DiagError as exc:
        click.echo(f"diag: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("diag: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as exc:
        if os.environ.get("DIAG_DEBUG"):
            traceback.print_exc()
        click.echo(
            f"diag: internal error: {type(exc).__name__}: {exc} - please report it "
            "(rerun with DIAG_DEBUG=1 for the traceback)",
            err=True,
        )
        sys.exit(EXIT_INTERNAL)


def _unused(*_: Any) -> None:  # keeps Any imported for the commands added below
    pass


if __name__ == "__main__":
    main()
