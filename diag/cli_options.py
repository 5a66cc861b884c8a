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


# The longest any number of seconds may be: a sleep of 1e308 s overflows the clock (an
# internal error, issue #25); a week between samples is already more than anyone means.
MAX_SECONDS = 7 * 86400.0
NAME_MAX = 255  # bytes of one path component (Linux)
PATH_MAX = 4096  # bytes of a whole path (Linux)
# What diag appends to the last name of ``-o`` (``.NAME.log.stdout``, the longest spool name).
OUTPUT_NAME_EXTRA = len("..log.stdout")
_OUTPUT_SUFFIXES = (".html", ".json", ".jsonl", ".md", ".log")


class Seconds(click.FloatRange):
    """A finite number of seconds up to a week: ``inf``, ``nan`` and ``1e308`` are usage
    errors (``nan`` compares False with every bound, so a plain FloatRange would take it - as
    0, and 1e308 would overflow the first sleep)."""

    name = "seconds"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Any) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if number > MAX_SECONDS:
            self.fail(f"{value!r} is more than a week ({MAX_SECONDS:.0f} s)", param, ctx)
        return number


def _shown(path: str) -> str:
    """A path for a one-line message: escaped, and cut when it is long."""
    text = ascii(path)
    return text if len(text) <= 80 else f"{text[:60]}...({len(text)} characters)"


def path_problem(path: str, extra: int = 0) -> Optional[str]:
    """Why ``path`` cannot be used as given, or None: not UTF-8 (it would reach the JSON,
    the HTML and the terminal as undecodable bytes), a name longer than NAME_MAX or a path
    longer than PATH_MAX once diag adds ``extra`` bytes to its last name."""
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return f"{_shown(path)} is not valid UTF-8 - rename it, or name it another way"
    if len(encoded) + extra >= PATH_MAX:
        return f"{_shown(path)} is longer than the {PATH_MAX} bytes a path may be"
    parts = encoded.rstrip(b"/").split(b"/")
    for index, part in enumerate(parts):
        limit = NAME_MAX - (extra if index == len(parts) - 1 else 0)
        if len(part) > limit:
            return f"{_shown(part.decode())} is longer than the {limit} bytes a name may be here"
    return None


class CheckedPath(click.Path):
    """A ``click.Path`` whose text is a usable path (``path_problem``); ``output``: it is the
    base of diag's output files, whose longest name adds ``OUTPUT_NAME_EXTRA`` bytes."""

    def __init__(self, output: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._output = output

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Any) -> Any:
        if isinstance(value, str):
            text, extra = value, 0
            if self._output:
                stem, dot, suffix = value.rpartition(".")
                if dot and f".{suffix}" in _OUTPUT_SUFFIXES and "/" not in suffix:
                    text = stem
                extra = OUTPUT_NAME_EXTRA
            problem = path_problem(text, extra)
            if problem is not None:
                self.fail(problem, param, ctx)
        return super().convert(value, param, ctx)


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
                type=CheckedPath(),
                callback=_regular_logs,
                help="Extra log file to follow.",
            ),
            click.option(
                "--fr-dir",
                "fr_dirs",
                multiple=True,
                type=CheckedPath(file_okay=False),
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
        "-o",
        "--output",
        "out",
        type=CheckedPath(output=True, dir_okay=False),
        default=None,
        help=help_text,
    )


def slurm_job_option(help_text: str) -> Callable[[Command], Command]:
    return click.option(
        "--slurm-job", "slurm_job", type=click.IntRange(min=1), default=None, help=help_text
    )


def fail_on_option(help_text: str) -> Callable[[Command], Command]:
    return click.option("--fail-on", "fail_on", default=None, metavar="STATES", help=help_text)
