"""What failed in diag during a watch, so that it never costs the job (issue #25).

A multi-day run must never die because its observer could not write: a checkpoint filling the
disk for a second, a directory remounted read-only or removed, an I/O error, a renderer that
crashes on an odd bundle. So in a watch every such failure is *recorded* here instead of
ending the watch (which, in launch mode, used to terminate the command):

* the user is told once, on stderr, what failed and that the job keeps running;
* the write is tried again after a backoff (``Backoff``: 1 s doubling to 5 min) - the
  journal keeps its lines queued meanwhile, the log tee its spool files;
* at the end, after the summary, the first failure becomes diag's exit: its documented code
  for a write (11 disk full, 6 any other output error) - also when a later retry succeeded,
  since the report stopped updating for a while and the user should know - or the one-line
  internal error for a bug. Only Ctrl-C, SIGTERM and ``--fail-on`` stop a launched job.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from diag.bundle.io import write_error
from diag.bundle.outdir import Backoff
from diag.errors import DiagError


def describe(exc: BaseException) -> str:
    """One line for a recorded failure: a DiagError's message and remedy, else a bug."""
    if isinstance(exc, DiagError):
        return exc.one_line()
    return f"internal error: {type(exc).__name__}: {exc}"


class WriteFaults:
    """The failures of one watch: the first is kept (it decides the exit), the user is told
    once, and each write point has its own backoff."""

    def __init__(self, echo: Callable[[str], None], launched: bool) -> None:
        self._echo = echo
        self._launched = launched
        self._backoff: Dict[str, Backoff] = {}
        self._seen: set[str] = set()
        self.first: Optional[BaseException] = None

    def record(self, exc: BaseException, key: Optional[str] = None) -> None:
        """Keep ``exc`` (the first one decides the exit code); tell the user about the first.
        ``key``: a failure that is reported by polling (the log tee's) is recorded once."""
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        if self.first is not None:
            return
        self.first = exc
        who = "the command keeps running" if self._launched else "the job keeps running"
        self._echo(
            f"diag: {describe(exc)} - {who}; diag goes on and retries its writes with backoff "
            "(up to every 5 min), and exits with this error at the end"
        )

    def attempt(self, point: str, write: Callable[[], None], force: bool = False) -> bool:
        """Run ``write`` unless ``point`` is backing off (``force``: try anyway, the last
        write); any exception is recorded, never raised. True when it ran and succeeded."""
        backoff = self._backoff.setdefault(point, Backoff())
        if not force and not backoff.ready():
            return False
        try:
            write()
        except Exception as exc:
            backoff.failed()
            self.record(exc)
            return False
        backoff.succeeded()
        return True

    def log_failed(self, log_path: str, error: Optional[OSError]) -> None:
        """The launch log tee's first failed write (it does not raise: it polls here)."""
        if error is not None:
            self.record(write_error(log_path, error), key="log")
