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


@cli.command()
@click.option("--pid", type=int, required=True, help="PID of the job (launcher or any rank).")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.0),
    default=2.0,
    show_default=True,
    help="Seconds between samples.",
)
@click.option(
    "--count", type=click.IntRange(min=1), default=3, show_default=True, help="Samples."
)
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
def capture(
    pid: int, interval_s: float, count: int, out: Optional[str], log_paths: List[str]
) -> None:
    """Snapshot every process of a job N times and write a JSON bundle."""
    from diag.capture import run_capture

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
