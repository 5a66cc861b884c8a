"""Uninterruptible I/O has an owner: a thread asleep in a wire filesystem (a FUSE mount, NFS)
waits on that filesystem, and for a FUSE mount served on this host, on the daemon holding
``/dev/fuse`` for it (``diag.probes.mounts``). Read as a rank "in a C call" while its peers
sit in a collective, it looked diverged - kill the job and look at the rank - when the rank
only waits on the daemon, and a restarted job would wait on it again.

Pure: reads the ``FsWait`` records of the samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from diag.frameworks import union
from diag.model import Bundle, FsWait, Suspect
from diag.verdict.features import ProcSignals
from diag.vocab import VerdictState


@dataclass(frozen=True)
class FsStall:
    """A participant's thread in the same filesystem wait in every sample it was seen in."""

    proc: ProcSignals
    wait: FsWait
    samples: int


def fs_stalls(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[FsStall]:
    """One stall per process: its thread waiting on the same file in every sample it was
    seen in (two at least), on a FUSE or network mount. Keyed by (host, pid): ``diag merge``
    labels each wait with its host."""
    if len(bundle.samples) < 2 or not bundle.samples[-1].fs_waits:
        return []
    seen: Dict[Tuple[str, int, int, str], int] = {}
    for sample in bundle.samples:
        for w in sample.fs_waits:
            key = (w.host, w.pid, w.tid, w.path)
            seen[key] = seen.get(key, 0) + 1
    alive = {p.key: p for p in procs if not p.dead}
    out: List[FsStall] = []
    for w in bundle.samples[-1].fs_waits:
        p = alive.get((w.host, w.pid))
        n = seen.get((w.host, w.pid, w.tid, w.path), 0)
        if p is None or any(s.proc.key == p.key for s in out):
            continue
        if n >= 2 and n >= len(p.samples):
            out.append(FsStall(p, w, n))
    return out


# Mounts a daemon process serves (its pack's ``serves_fs``: FUSE): the wait is on the daemon.
_DAEMON_SERVED = union.DAEMON_SERVED_FS

_STATE_WORDS = {"T": "stopped", "t": "stopped", "R": "running", "D": "in disk wait", "S": "asleep"}


def fs_story(
    stall: FsStall, waiting: str, waiters: str = ""
) -> Tuple[VerdictState, float, str, List[Suspect]]:
    """(state, confidence, sentence, suspects) for a thread stuck on a filesystem; ``waiters``
    names the ranks waiting on it ("ranks 0, 2"), for the daemon's chain."""
    p, w = stall.proc, stall.wait
    where = f"`{w.path}` on the {w.fstype} mount {w.mount_point} ({w.source})"
    others = f"; {waiting}" if waiting else ""
    if w.kind in _DAEMON_SERVED and w.daemon_pid is not None:
        daemon = f"pid {w.daemon_pid} {w.daemon_name}".rstrip()
        head = (
            f"{p.name} reads {where} and has waited on its FUSE daemon, {daemon}, in all "
            f"{stall.samples} samples{others}"
        )
        reason = f"serves the FUSE mount {w.mount_point} that {p.name} waits on ({w.path})"
        chain = (
            (f"{waiters} → (peer) → " if waiters else "")
            + f"{p.name} → (FUSE read of {w.path}) → {daemon}: "
            + _STATE_WORDS.get(w.daemon_state, w.daemon_state)
        )
        suspects = [Suspect(pid=w.daemon_pid, host=p.key[0], reason=reason, chain=chain)]
        if w.daemon_state in ("T", "t"):
            text = (
                f"{head} - the daemon is stopped: `kill -CONT {w.daemon_pid}`; killing the "
                "job does not help"
            )
            return "deadlocked", 0.85, text, suspects
        if w.daemon_state in ("R", "D"):
            text = (
                f"{head} - the daemon is working (state {w.daemon_state}): the filesystem is "
                "slow, not the job - wait, don't kill"
            )
            return "slow", 0.7, text, suspects
        text = (
            f"{head} - the daemon sleeps with the request unanswered: it stalled (its backend, "
            f"its log); restart it or `umount -l {w.mount_point}`. The rank only waits on it: "
            "killing the job does not help, a restart would wait on it again"
        )
        return "deadlocked", 0.8, text, suspects
    served = w.kind in _DAEMON_SERVED
    what = "its FUSE daemon (not on this host, or not found)" if served else "its server"
    text = (
        f"{p.name} reads {where} and has waited on {what} in all {stall.samples} samples"
        f"{others} - the filesystem does not answer (check the mount, `dmesg`, the server or "
        "the network); killing the job does not help until it does"
    )
    reason = f"waits on the {w.fstype} mount {w.mount_point} ({w.path})"
    return "deadlocked", 0.65, text, [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
