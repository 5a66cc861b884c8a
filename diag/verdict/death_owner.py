"""Whose thread died, when several processes write the log that says so.

CPython's ``threading.excepthook`` writes "Exception in thread loader:" and a traceback, and
names no process: in a log several processes share (``python job.py 2> job.log`` and its
children) the death may be any writer's. An idle service's main thread waits on its stop
Event beside a helper whose thread died in that log - the death is not the service's.

The traceback says which code the dead thread ran (``File "/srv/loader.py", line 12, in
load``). Threads run their own process's code: a writer whose stacks never run any of the
job's own files the traceback names (the standard library and installed packages are
everyone's) cannot be the one whose thread died. When exactly one writer runs them, the
death is that writer's. When several do (ranks of one script, a client and the server it
re-executes from its own file) or a writer's stacks were not read, it stays nobody's.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Optional, Sequence, Set, Tuple

from diag.frames import is_library
from diag.model import Bundle, Frame, LogSample
from diag.verdict.bundle_index import derived
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of

# '  File "/srv/loader.py", line 12, in load' - one frame of a traceback.
_TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+\.py)", line \d+, in ')
MAX_TRACEBACK_LINES = 64  # as the death line's quote reads it


def _job_files(frames: Sequence[Frame]) -> Set[str]:
    return {f.filename for f in frames if f.filename.endswith(".py") and not is_library(f)}


def traceback_files(after: Sequence[str]) -> FrozenSet[str]:
    """The job's own files in the traceback below a death line (``after``: the lines that
    follow it), up to its first unindented line that is no "Traceback" header (the
    exception)."""
    files: Set[str] = set()
    for line in after[:MAX_TRACEBACK_LINES]:
        m = _TRACEBACK_FRAME.match(line)
        if m is not None:
            files.update(_job_files([Frame(name="", filename=m.group("file"))]))
        elif line and not line[:1].isspace() and not line.startswith("Traceback"):
            break
    return frozenset(files)


def _runs(bundle: Bundle, host: str, pid: int) -> Optional[FrozenSet[str]]:
    """The job's own files on any of ``pid``'s stacks in any sample; None when no stack of
    it was read (it may have run them) - none when it is no Python process (a launcher's
    shell, an MPI daemon holding the log): it wrote no CPython traceback."""
    # Kept in the verdict's index: every rank of a host sharing one log asks about its writers.
    memo: Dict[Tuple[str, int], Optional[FrozenSet[str]]] = derived(
        "death_owner.runs", bundle.samples, dict
    )
    if (host, pid) not in memo:
        files: Set[str] = set()
        seen = process_samples(bundle, host, pid)
        read = bool(seen) and all(ps.py_status == "not-python" for ps in seen)
        for ps in seen:
            for t in ps.threads:
                if t.stack_id is not None:
                    read = True
                    files |= _job_files(frames_of(bundle, t.stack_id))
        memo[(host, pid)] = frozenset(files) if read else None
    return memo[(host, pid)]


def death_is_own(bundle: Bundle, host: str, pid: int, log: LogSample, after: Sequence[str]) -> bool:
    """The death whose traceback is ``after`` (in ``log``, which ``pid`` writes) is
    ``pid``'s: the log is its alone, or it is the only writer whose stacks run the job's own
    files that traceback names."""
    writers = set(log.pids)
    if writers == {pid}:
        return True
    files = traceback_files(after)
    if not files:
        return False  # only the standard library's frames: any Python process's
    mine = _runs(bundle, host, pid)
    if not (mine and mine & files):
        return False
    for other in sorted(writers - {pid}):
        runs = _runs(bundle, host, other)
        if runs is None or runs & files:
            return False  # it may be that one's thread
    return True
