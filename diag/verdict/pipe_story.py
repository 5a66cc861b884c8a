"""The story of a job hung on a full pipe: writers block in ``write`` because the process
holding the read end stopped reading (a launcher in ``Popen.wait`` instead of
``communicate()``, a log collector that died or hung).

Kept apart from the generic "nothing can wake it" fallback so the summary names the pipe and
its likely reader: the writers are where the job stopped, but the fix is in the reader.
"""

from __future__ import annotations

from typing import Final, List, Optional, Sequence, Tuple

from diag.model import Suspect
from diag.verdict.features import ProcSignals
from diag.verdict.wording import verb, where, who

WRITE_FULL: Final = "write-full"


def writers_of(procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """Processes whose main thread blocks writing to a full pipe or socket."""
    return [p for p in procs if p.main_wait is not None and p.main_wait.kind == WRITE_FULL]


def likely_reader(
    writers: Sequence[ProcSignals], procs: Sequence[ProcSignals]
) -> Optional[ProcSignals]:
    """The writers' common parent, when it is in the capture and not a writer itself: whoever
    started them with ``stdout=PIPE`` usually holds the read end (a pipe's reader is not
    visible in our samples, so this is a likely reader, and the summary says so)."""
    parents = {(p.key[0], p.info.ppid) for p in writers}
    if len(parents) != 1:
        return None
    host, ppid = next(iter(parents))
    return next(
        (p for p in procs if p.key == (host, ppid) and not p.dead and p not in writers), None
    )


def pipe_story(
    writers: Sequence[ProcSignals], procs: Sequence[ProcSignals]
) -> Tuple[str, List[Suspect]]:
    """Summary and suspects: the writers (where the job stopped, and certain); the reader is
    only likely, so the summary names it rather than the suspect list."""
    reader = likely_reader(writers, procs)
    reader_text = (
        f"; the likely reader, their parent pid {reader.pid}, waits in {where(reader)} instead "
        "of reading it (use communicate(), a reader thread, or send output to a file)"
        if reader is not None
        else "; find who holds the read end (`ls -l /proc/<pid>/fd`) and why it stopped"
    )
    summary = (
        f"{who(writers)} {verb(writers, 'blocks', 'block')} writing to a full pipe "
        f"or socket in {where(writers[0])} - its reader stopped reading{reader_text}"
    )
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason="blocked writing to a full pipe")
        for p in writers[:4]
    ]
    return summary, suspects
