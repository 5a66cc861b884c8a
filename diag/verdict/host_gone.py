"""Whether the rank a rendezvous waits for is dead rather than late.

Ranks in ``init_process_group`` that connect to a c10d store nobody listens on wait for the
store's host - rank 0 - to come up (``rendezvous.store_joins``). Late and dead look alike on
the joiners' stacks; what tells them apart is evidence about the host itself:

- its traceback in a followed log: lines its launcher tagged with its rank (``[rank0]: ...``),
  ending in the exception that killed it;
- a line that gives its exit status (``rank 0 exited with code 1``, ``exitcode: 1``);
- on one host (a loopback MASTER_ADDR: the host rank belongs to this capture), no process
  being rank 0 while the joiners' launcher has reaped a child that ran (its children's CPU,
  cutime + cstime, is above zero): it started rank 0 with them, and rank 0 is gone.

With none of these and the host rank missing on a loopback address, it cannot be told within
one capture whether rank 0 was never started or died without a trace: ``HostGone.dead`` is
False and the verdict says which evidence would tell (``hedge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from diag.model import Bundle
from diag.verdict.features import ProcSignals
from diag.verdict.progress import LogGrowth
from diag.verdict.rendezvous import StoreJoin

HOST_RANK = 0  # env:// and tcp:// rendezvous: rank 0 hosts the TCPStore
# Who speaks: a launcher's tag of a rank's output line ("[rank0]: ", "rank 0: ").
_SPEAKER = re.compile(r"^\s*\[?rank\s?(\d{1,6})\]?\s*:\s?", re.IGNORECASE)
_TRACEBACK = "Traceback (most recent call last)"
# The exception line that ends a traceback: "FileNotFoundError: ...", "torch.OutOfMemoryError".
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]{0,80}(?:Error|Exception|Exit|Interrupt))\b(?::|$)")
# A launcher's line naming a rank and its exit status.
_RANK_NAMED = re.compile(r"\b(?:local_)?rank\s*[:=]?\s*(\d{1,6})\b", re.IGNORECASE)
_EXIT_STATUS = re.compile(
    r"\bexit(?:ed|code)?(?:\s+with)?(?:\s+(?:code|status))?\s*[:=]?\s*\(?(-?\d{1,3})\b",
    re.IGNORECASE,
)
_LOOPBACK = ("127.", "localhost", "::1", "0.0.0.0")
MAX_LINES = 2048  # tail lines looked through, over every log
CLK_TCK = 100


@dataclass(frozen=True)
class HostGone:
    """What the capture says of the store's host rank: ``dead`` with the evidence that says
    so, or only missing (``dead`` False) where a late start and a silent death look alike."""

    rank: int
    dead: bool
    evidence: Tuple[str, ...]
    missing_here: bool  # it belongs on this host (loopback) and no process is that rank


def _lines(logs: Sequence[LogGrowth]) -> Iterable[Tuple[str, str]]:
    n = 0
    for lg in logs:
        for line in lg.tail:
            n += 1
            if n > MAX_LINES:
                return
            yield lg.path, line


def _traceback_of(rank: int, logs: Sequence[LogGrowth]) -> Optional[str]:
    """The host rank's traceback in a followed log: its last exception line, quoted."""
    seen = False
    last: Optional[str] = None
    where = ""
    for path, line in _lines(logs):
        m = _SPEAKER.match(line)
        if not m or int(m.group(1)) != rank:
            continue
        body = line[m.end() :].strip()
        if _TRACEBACK in body:
            seen, where = True, path
        elif seen and _EXCEPTION.match(body):
            last = body
    if not seen:
        return None
    quoted = f": `{last[:140]}`" if last else ""
    return f"its traceback is in {where}{quoted}"


def _exit_of(rank: int, logs: Sequence[LogGrowth]) -> Optional[str]:
    """A line that gives the host rank's non-zero exit status."""
    for path, line in _lines(logs):
        status = _EXIT_STATUS.search(line)
        if status is None or int(status.group(1)) == 0:
            continue
        named = _RANK_NAMED.search(line)
        speaker = _SPEAKER.match(line)
        if (named and int(named.group(1)) == rank) or (speaker and int(speaker.group(1)) == rank):
            return f"{path} gives its exit status: `{' '.join(line.split())[:140]}`"
    return None


def _reaped_by_launcher(
    bundle: Bundle, joiners: Sequence[ProcSignals], procs: Sequence[ProcSignals]
) -> Optional[str]:
    """The joiners' one launcher, alive here, has reaped a child that ran."""
    parents = {p.info.ppid for p in joiners}
    if len(parents) != 1 or not bundle.samples:
        return None
    ppid = next(iter(parents))
    host = joiners[0].key[0]
    launcher = next((p for p in procs if p.key == (host, ppid) and not p.dead), None)
    if launcher is None or launcher.rank is not None:
        return None
    last = next((q for q in bundle.samples[-1].processes if q.pid == ppid), None)
    if last is None or last.children_ticks <= 0:
        return None
    return (
        f"its launcher, pid {ppid}, has reaped a child that ran "
        f"{last.children_ticks / CLK_TCK:.1f} s of CPU and no child of it is rank {HOST_RANK} now"
    )


def _local(join: StoreJoin) -> bool:
    env = join.joiners[0].info.env
    if join.addr.startswith(_LOOPBACK):
        return True
    local, world = env.get("LOCAL_WORLD_SIZE", ""), env.get("WORLD_SIZE", "")
    return bool(world) and local == world


def host_gone(bundle: Bundle, join: StoreJoin, procs: Sequence[ProcSignals],
              logs: Sequence[LogGrowth]) -> Optional[HostGone]:  # fmt: skip
    """The store host's fate as far as the capture shows it; None when that rank is alive
    here (late, or a peer wait of its own) or nothing at all is known of it."""
    if any(p.rank == HOST_RANK and not p.dead for p in procs):
        return None
    if any(p.rank == HOST_RANK for p in join.joiners):
        return None
    missing = _local(join)
    evidence: List[str] = [
        e for e in (_traceback_of(HOST_RANK, logs), _exit_of(HOST_RANK, logs)) if e is not None
    ]
    if missing:
        reaped = _reaped_by_launcher(bundle, join.joiners, procs)
        if reaped:
            evidence.append(reaped)
    if not evidence and not missing:
        return None
    return HostGone(HOST_RANK, bool(evidence), tuple(evidence), missing)
