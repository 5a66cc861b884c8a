"""Ranks that reached the job's rendezvous during the capture: a start-up that advances.

Three ranks in ``init_process_group`` at the last sample, none burning CPU, no log line: the
picture of a rendezvous that will never complete - unless one of them *arrived* there during
the capture. A rank whose main thread was elsewhere at the first sample (its own slow start:
a download, a config service) and waits in the rendezvous at the last has moved forward; the
meeting it joins is minutes younger than the capture's evidence of "nothing moves" suggests,
and a late rank 0 (the store's host) coming up is the very thing the others waited for.
Killing the job then loses a start-up that was about to complete (a loaded CI host made this
window seconds wide: ``store_host_late``).

Only the rendezvous counts as an arrival: entering a collective during the capture is no
proof of progress (a rank that arrives at a mismatched collective hangs there). Pure
functions of the bundle and the processes' signals.
"""

from __future__ import annotations

from typing import FrozenSet, List, NamedTuple, Optional, Sequence

from diag.frameworks import union
from diag.model import Bundle
from diag.verdict.features import ProcSignals
from diag.verdict.thread_wait import frames_of

_RENDEZVOUS: FrozenSet[str] = union.RENDEZVOUS_FRAMES


class Arrival(NamedTuple):
    """A rank that entered the rendezvous during the capture, and from where."""

    proc: ProcSignals
    came_from: str  # the innermost frame of its own code at the first sample ("rank_main")
    at: str  # the rendezvous frame it waits in at the last sample ("init_process_group")


def _names(bundle: Bundle, stack_id: Optional[str]) -> List[str]:
    return [f.name for f in frames_of(bundle, stack_id)]


def _outermost_rendezvous(names: Sequence[str]) -> str:
    """The outermost rendezvous frame of a stack (innermost first): the call the job made."""
    return next((n for n in reversed(names) if n in _RENDEZVOUS), "")


def arrivals(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[Arrival]:
    """Ranks whose main thread was outside the rendezvous at its first readable sample and
    in it at every sample from some point on to the last - and only when every living rank
    waits in the rendezvous at the last sample (the meeting is what the job does now)."""
    ranks = [p for p in procs if not p.dead and p.rank is not None]
    last = {p.key: _names(bundle, p.main_stack_ids[-1] if p.main_stack_ids else None)
            for p in ranks}  # fmt: skip
    if not ranks or any(not _outermost_rendezvous(names) for names in last.values()):
        return []
    found: List[Arrival] = []
    for p in ranks:
        series = [_names(bundle, sid) for sid in p.main_stack_ids]
        first = series[0] if series else []
        if len(series) < 2 or not first or _outermost_rendezvous(first):
            continue
        found.append(Arrival(p, first[0], _outermost_rendezvous(last[p.key])))
    return found


__all__ = ["Arrival", "arrivals"]
