"""Work its framework's scheduler can never place: a waiter on its result waits for ever.

A driver in ``ray.get`` whose task asks for more than any node has (8 CPUs on a 2-CPU
cluster, a GPU on a CPU-only one) looks exactly like one whose task was lost: it waits for a
result and nothing computes it. The difference is a line the scheduler writes on the driver's
output - each framework's spelling is its pack's ``infeasible_lines`` (Ray's autoscaler:
"No available node types can fulfill resource request {'GPU': 1.0}"). Nothing was lost and
nothing will run: rerunning the same job waits again; the request or the cluster must change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from diag.frameworks import union
from diag.verdict.progress import LogGrowth

MAX_LINES = 4096  # tail lines looked through, over every log
_CONTROL = str.maketrans({c: None for c in map(chr, range(32)) if c != "\t"})


@dataclass(frozen=True)
class Infeasible:
    """The scheduler's line, quoted (whitespace folded), and the log it is in."""

    path: str
    line: str


def infeasible(logs: Sequence[LogGrowth]) -> Optional[Infeasible]:
    """The last line of the followed logs that says work can never be placed, or None."""
    found: Optional[Infeasible] = None
    seen = 0
    for lg in logs:
        for line in lg.tail:
            seen += 1
            if seen > MAX_LINES:
                return found
            m = union.INFEASIBLE_LINE.search(line)
            if m is not None:
                text = " ".join(line[m.start() :].translate(_CONTROL).split())
                found = Infeasible(lg.path, text[:200])
    return found
