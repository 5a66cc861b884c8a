"""Every error diag reports to a user, with its remedy and its documented exit code.

The CLI turns a ``DiagError`` into exactly one line on stderr (``diag: <message> - <remedy>``)
and exits with ``exit_code``; nothing else in diag prints tracebacks. The table below is the
one place exit codes are defined; the README copies it.
"""

from __future__ import annotations

from typing import Dict

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug in diag: the one-line message asks for a report
EXIT_USAGE = 2  # bad flags or arguments (click's own code)
EXIT_NO_TARGET = 3  # no such PID, PID <= 0, zombie target, command not found
EXIT_PERMISSION = 4  # cannot ptrace / read /proc of the target
EXIT_MISSING_TOOL = 5  # py-spy (or another required tool) not installed
EXIT_OUTPUT = 6  # cannot write an output: not writable, unsafe, read-only, I/O error, removed
EXIT_TARGET_GONE = 7  # the target exited before the first sample was taken
EXIT_BAD_BUNDLE = 8  # a bundle that is not JSON / not a diag bundle / a newer schema
EXIT_REMOTE = 9  # multi-node: no node could be captured
EXIT_FAIL_ON = 10  # the verdict matched --fail-on
EXIT_DISK_FULL = 11  # ENOSPC/EDQUOT writing an output (even if a retry later fit)
EXIT_INTERRUPTED = 130  # Ctrl-C before anything could be written

EXIT_CODES: Dict[int, str] = {
    EXIT_OK: "success",
    EXIT_INTERNAL: "internal error in diag (please report it with the message)",
    EXIT_USAGE: "bad command-line usage",
    EXIT_NO_TARGET: "target not found (no such PID, PID <= 0, zombie, command not found)",
    EXIT_PERMISSION: "no permission to inspect the target (need root or CAP_SYS_PTRACE)",
    EXIT_MISSING_TOOL: "a required tool is missing (py-spy)",
    EXIT_OUTPUT: "an output could not be written (path not writable or unsafe, read-only file "
    "system, I/O error, directory removed)",
    EXIT_TARGET_GONE: "target exited before the first sample",
    EXIT_BAD_BUNDLE: "input is not a readable diag bundle",
    EXIT_REMOTE: "no node of the multi-node job could be captured",
    EXIT_FAIL_ON: "the verdict matched --fail-on",
    EXIT_DISK_FULL: "the disk (or quota) was full: some outputs could not be written, or only "
    "after retries",
    EXIT_INTERRUPTED: "interrupted before any output was written",
}


class DiagError(Exception):
    """A failure the user can act on: what happened, what to do, and the exit code."""

    def __init__(self, message: str, remedy: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        self.exit_code = exit_code

    def one_line(self) -> str:
        text = f"{self.message} - {self.remedy}" if self.remedy else self.message
        return " ".join(text.split())


class OutputClosed(Exception):
    """The reader of diag's stdout (or stderr) went away: ``diag ps | head -1``, a closed
    terminal. Not an error of the user's, nor of diag's: like ``ls | head``, diag ends at once
    with exit 0 for the part it could write (``diag.cli`` turns this into that exit)."""
