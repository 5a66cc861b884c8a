"""The machine as the cause, disk I/O: a slow rank reading (or writing) a file on a device its
cgroup throttles is slow because of that limit (issue #37).

The verdict already gives such a rank's rate and, from the file's position, its ETA; this says
why - "its cgroup throttles reads from device 7:0 to 1.0 MiB/s" - from the file's device
(``OpenFile.device``, st_dev) and the group's throttles (``ProcessSample.io_limits``). One
phrase added to a slow verdict, nothing decided here. Pure functions of the sample series.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from diag.model import Bundle, OpenFile, ProcessSample, Suspect
from diag.text.units import size


def _first_last(
    bundle: Bundle, key: Tuple[str, int]
) -> Optional[Tuple[ProcessSample, ProcessSample]]:
    seen = [
        ps
        for sample in bundle.samples
        for ps in sample.processes
        if (ps.host, ps.pid) == key and ps.status == "alive"
    ]
    return (seen[0], seen[-1]) if len(seen) >= 2 else None


def _moved(first: ProcessSample, last: ProcessSample) -> Dict[Tuple[str, str], OpenFile]:
    """Its files whose position moved over the window, by (path, kind)."""
    before = {(f.path, f.kind): f.pos_bytes for f in first.open_files}
    return {
        (f.path, f.kind): f
        for f in last.open_files
        if f.kind in ("read", "write")
        and f.pos_bytes is not None
        and (before.get((f.path, f.kind)) or 0) != f.pos_bytes
    }


def throttle_phrase(bundle: Bundle, key: Tuple[str, int]) -> str:
    """ "its cgroup throttles reads from device 7:0 (shard.bin's) to 1.0 MiB/s", or ""."""
    pair = _first_last(bundle, key)
    if pair is None or not pair[1].io_limits:
        return ""
    limits = {x.device: x for x in pair[1].io_limits}
    for f in _moved(*pair).values():
        limit = limits.get(f.device or "")
        if limit is None:
            continue
        bps = limit.read_bps if f.kind == "read" else limit.write_bps
        if bps is None:
            continue
        what = "reads from" if f.kind == "read" else "writes to"
        name = f.path.rsplit("/", 1)[-1]
        return f"its cgroup throttles {what} device {f.device} ({name}'s) to {size(bps)}/s"
    return ""


def io_tail(state: str, bundle: Bundle, suspects: Sequence[Suspect]) -> str:
    """ "; rank 0: its cgroup throttles reads from device 7:0 ... - raise the limit" for a slow
    verdict whose suspect's file sits on a throttled device; "" otherwise."""
    if state != "slow":
        return ""
    for s in suspects[:8]:
        phrase = throttle_phrase(bundle, (s.host, s.pid))
        if phrase:
            who = f"rank {s.rank}" if s.rank is not None else f"pid {s.pid}"
            return f"; {who} is I/O-throttled: {phrase} - raise that limit"
    return ""


__all__ = ["io_tail", "throttle_phrase"]
