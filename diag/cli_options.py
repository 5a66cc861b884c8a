"""The flags ``diag capture`` and ``diag watch`` share, declared once.

Both commands find a job the same way (``--pid``, or ``-- CMD``) and read the same extra
evidence (``--log``, ``--fr-dir``); ``-o``, ``--slurm-job`` and ``--fail-on`` differ only in
their help text. Declaring them here keeps the two commands' flags from drifting apart and
``diag.cli`` down to the commands themselves.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple, TypeVar

import click

Command = TypeVar("Command", bound=Callable[..., Any])


class Seconds(click.FloatRange):
    """A finite number of seconds: ``inf`` and ``nan`` are usage errors (``nan`` compares
    False with every bound, so a plain FloatRange would take it - as 0)."""

    name = "seconds"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Any) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


def _regular_logs(
    _ctx: click.Context, _param: click.Parameter, paths: Tuple[str, ...]
) -> Tuple[str, ...]:
    """--log names a regular file (or one not created yet): a FIFO, device or directory is
    refused before any sampling (reading /dev/zero or a FIFO would never end)."""
    from diag.bundle.files import NotRegularFile, check_regular_path
    from diag.errors import EXIT_USAGE, DiagError

    for path in paths:
        try:
            check_regular_path(path)
        except NotRegularFile as exc:
            raise DiagError(
                f"--log: {exc}",
                "pass the log file itself (a regular file the job writes)",
                EXIT_USAGE,
            ) from None
        except OSError:
            pass  # not there yet: tracked until it appears
    return paths


def _no_boost(ctx: click.Context, _param: click.Parameter, off: bool) -> None:
    """--no-boost: every Collector of this run samples at the normal priority (see
    ``diag.collect.priority``). Passed as ``DIAG_NO_BOOST`` so it reaches them all - capture,
    watch, a launched command's, Slurm nodes (srun passes the environment) - and put back
    when the command ends."""
    import os

    if not off:
        return
    before = os.environ.get("DIAG_NO_BOOST")
    os.environ["DIAG_NO_BOOST"] = "1"

    def restore() -> None:
        if before is None:
            os.environ.pop("DIAG_NO_BOOST", None)
        else:
            os.environ["DIAG_NO_BOOST"] = before

    ctx.call_on_close(restore)


def job_options(command: Command) -> Command:
    """--pid, --log, --fr-dir and --no-boost: how capture and watch find a job and its
    evidence, and whether they may raise their priority while sampling."""
    for option in reversed(
        (
            click.option(
                "--pid", type=int, default=None, help="PID of the job (launcher or any rank)."
            ),
            click.option(
                "--log",
                "log_paths",
                multiple=True,
                type=click.Path(),
                callback=_regular_logs,
                help="Extra log file to follow.",
            ),
            click.option(
                "--fr-dir",
                "fr_dirs",
                multiple=True,
                type=click.Path(file_okay=False),
                help="Directory of PyTorch Flight Recorder dumps (<prefix><rank>) to read, "
                "besides the ranks' TORCH_FR_DUMP_TEMP_FILE prefixes.",
            ),
            click.option(
                "--no-boost",
                is_flag=True,
                expose_value=False,
                callback=_no_boost,
                help="Sample at the normal priority. By default, where it has the privilege, "
                "diag raises its priority for each sample's short burst only (its workers "
                "real-time, bounded; itself nice -10) to get a verdict on a busy host.",
            ),
        )
    ):
        command = option(command)
    return command


def output_option(help_text: str) -> Callable[[Command], Command]:
    return click.option(
        "-o", "--output", "out", type=click.Path(dir_okay=False), default=None, help=help_text
    )


def slurm_job_option(help_text: str) -> Callable[[Command], Command]:
    return click.option(
        "--slurm-job", "slurm_job", type=click.IntRange(min=1), default=None, help=help_text
    )


def fail_on_option(help_text: str) -> Callable[[Command], Command]:
    return click.option("--fail-on", "fail_on", default=None, metavar="STATES", help=help_text)
