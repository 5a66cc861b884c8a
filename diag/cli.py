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
