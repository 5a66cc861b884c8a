"""A framework's own flow control or admission pause: a wait with a party that can end it.

A stream writer that waits for its peer to read (gRPC's HTTP/2 flow control) and a worker that
paused itself under memory pressure (Dask's memory monitor) look, by CPU and stacks alone,
like a healthy server waiting for work: a thread parked untimed on a condition, an event loop
in epoll, a client waiting for results. They are not idle: the job asked for work that will
not come until the party ends the pause - the peer reads, the memory falls. The frameworks'
packs (``diag.frameworks``, ``FlowPause``) say how each pause shows; this module finds them
in a capture (``flow_stalls``) for the wait-for graph (``graph_flow_edges``) and the rule
that names the party (``rules.flow``).

Shown by a thread: the same thread of a live process in one of the pause's frames in every
sample it was seen in (two at least - one sample of a writer waiting for each send is how a
steady stream looks too; a stream that moves is decided by the motion rules first). Shown by
a log line: the framework's pause line in a log the job writes, with no resume line after it,
and a process of the framework whose resident memory still holds what the line reported.
Where no log shows it (output to a pipe or /dev/null), a process of the framework holding
more than the pause threshold of the limit its command line gives is most likely paused
(``inferred``: the threshold may be changed in a config file diag cannot read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Pattern, Sequence, Tuple

from diag.frameworks import PACKS
from diag.frameworks.base import FlowPause
from diag.model import Bundle, FdEnd, ProcessSample
from diag.verdict.features import ProcSignals
from diag.verdict.thread_wait import frames_of

# The compiled lines of every pack's pauses, once.
_PAUSES: Tuple[Tuple[str, FlowPause, Optional[Pattern[str]], Optional[Pattern[str]]], ...] = tuple(
    (
        pack.name,
        fp,
        re.compile(fp.pause_line) if fp.pause_line else None,
        re.compile(fp.resume_line) if fp.resume_line else None,
    )
    for pack in PACKS
    for fp in pack.flow_pauses
)
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_UNITS.update({"kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12})
_UNITS_ANY_CASE = {unit.lower(): size for unit, size in _UNITS.items()}  # "8gb", "600mib"
# A paused process still holds at least this share of the memory its pause line reported.
_HELD_SHARE = 0.8
# How many peers of one paused writer are named.
_MAX_PEERS = 4


@dataclass(frozen=True)
class FlowStall:
    """One process paused by its framework until ``pause.party`` ends it.

    ``peers``: the processes of the capture at the other end of its connections (a peer
    reader's pause); ``outside``: remote addresses of such peers not in the capture.
    ``line``: the pause line (a log-shown pause), with ``pct``/``used``/``limit`` from it."""

    proc: ProcSignals
    framework: str
    pause: FlowPause
    where: str  # the frame the thread waits in, or "" for a log-shown pause
    tid: Optional[int] = None
    peers: Tuple[ProcSignals, ...] = ()
    outside: Tuple[str, ...] = ()
    line: str = ""
    pct: Optional[int] = None
    used: str = ""
    limit: str = ""
    inferred: bool = False  # from memory against the limit, no pause line seen
    # A peer reader's pause where the writer holds no connection at all - its every socket a
    # listener (these ports): no process reads from it, now. Its reader died (killed and
    # reaped leaves nothing to see) or never connected: the capture cannot tell which.
    unconnected: Tuple[int, ...] = ()
    reaped_children_s: float = 0.0  # CPU of the children it reaped (one may have been its reader)


def _sample_of(bundle: Bundle, index: int, key: Tuple[str, int]) -> Optional[ProcessSample]:
    if index >= len(bundle.samples):
        return None
    for ps in bundle.samples[index].processes:
        if (ps.host, ps.pid) == key and ps.status == "alive":
            return ps
    return None


def _paused_frame(bundle: Bundle, ps: ProcessSample, fp: FlowPause) -> Dict[int, str]:
    """The threads of ``ps`` in one of ``fp``'s frames: tid -> the frame's name."""
    found: Dict[int, str] = {}
    for t in ps.threads:
        for f in frames_of(bundle, t.stack_id)[: fp.depth]:
            name = f.name.rsplit(".", 1)[-1]
            if name in fp.frames and any(x in f.filename for x in fp.files):
                found[t.tid] = name
                break
            if not any(x in f.filename for x in fp.via):
                break  # other code above the pause frame: a wait of its own
    return found


def _thread_pause(bundle: Bundle, p: ProcSignals, fp: FlowPause) -> Optional[Tuple[int, str]]:
    """A thread of ``p`` in one of ``fp``'s frames in every sample it was seen in."""
    if not fp.frames or p.dead or p.stopped:
        return None
    seen = [ps for ps in (_sample_of(bundle, i, p.key) for i in p.samples) if ps is not None]
    if len(seen) < 2:
        return None
    common: Optional[Dict[int, str]] = None
    for ps in seen:
        here = _paused_frame(bundle, ps, fp)
        common = here if common is None else {t: n for t, n in here.items() if t in common}
        if not common:
            return None
    assert common is not None
    tid = min(common)
    return tid, common[tid]


def _unconnected(bundle: Bundle, st: FlowStall) -> FlowStall:
    """``st`` with the ports it listens on when every socket it holds is a listener at the
    last sample (``socket_fds`` counts them all: a socket whose end was not resolved makes it
    no case), and the CPU of the children it reaped by then."""
    p = st.proc
    last = _sample_of(bundle, p.samples[-1], p.key) if p.samples else None
    if last is None or not last.listen_ports:
        return st
    listeners = [e for e in last.fd_ends if e.kind == "tcp" and not e.remote]
    if not listeners or last.fd_ends_more or last.socket_fds != len(listeners):
        return st
    clk = bundle.host.clk_tck or 100
    return replace(
        st,
        unconnected=tuple(sorted(set(last.listen_ports))),
        reaped_children_s=last.children_ticks / clk,
    )


def _port(address: str) -> Optional[int]:
    _, _, port = address.rpartition(":")
    return int(port) if port.isdigit() else None


def _connections(ps: ProcessSample, p: ProcSignals) -> List[FdEnd]:
    """Its established TCP connections, those accepted on its own listening ports first (a
    server's clients), and its unix socket pairs."""
    own = set(p.listen_ports) | set(ps.listen_ports)
    tcp = [e for e in ps.fd_ends if e.kind == "tcp" and e.remote and e.local]
    tcp.sort(key=lambda e: 0 if _port(e.local) in own else 1)
    return tcp + [e for e in ps.fd_ends if e.kind == "unix" and e.peer_inode]


def _peers(
    bundle: Bundle, p: ProcSignals, procs: Sequence[ProcSignals]
) -> Tuple[Tuple[ProcSignals, ...], Tuple[str, ...]]:
    """Who can read what ``p`` writes: the processes of the capture holding the other end of
    its connections (by inode, or a TCP 4-tuple), and the remote addresses held by none."""
    last = _sample_of(bundle, p.samples[-1], p.key) if p.samples else None
    if last is None:
        return (), ()
    ends: Dict[Tuple[str, int], ProcSignals] = {}
    locals_: Dict[str, ProcSignals] = {}
    for q in procs:
        if q is p or not q.samples:
            continue
        qs = _sample_of(bundle, q.samples[-1], q.key)
        for e in qs.fd_ends if qs is not None else ():
            ends[(q.key[0], e.inode)] = q
            if e.kind == "tcp" and e.local:
                locals_[f"{e.local}>{e.remote}"] = q
    peers: List[ProcSignals] = []
    outside: List[str] = []
    for e in _connections(last, p):
        held = ends.get((p.key[0], e.peer_inode or -1)) or locals_.get(f"{e.remote}>{e.local}")
        if held is not None and held not in peers:
            peers.append(held)
        elif held is None and e.kind == "tcp" and e.remote not in outside:
            outside.append(e.remote)
    # Addresses outside the capture are named only when no peer of the capture was found.
    return tuple(peers[:_MAX_PEERS]), (() if peers else tuple(outside[:_MAX_PEERS]))


def _bytes(text: str) -> Optional[int]:
    """``522.09 MiB``, ``600MiB``, ``8GB`` or a plain count of bytes (above 1: a fraction of
    the host's memory, or ``auto``, is no size); None when it is none of these."""
    m = re.fullmatch(r"\s*([\d.]+(?:e\d+)?)\s*([A-Za-z]*)\s*", text)
    if m is None:
        return None
    try:
        number = float(m.group(1))
        size = number * (_UNITS_ANY_CASE[m.group(2).lower()] if m.group(2) else 1)
    except (KeyError, ValueError):
        return None
    return int(size) if size > 1 else None


def _shown(n: int) -> str:
    """Bytes as the pause lines write them: ``522.09 MiB``."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if n >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:.2f} {unit}"
    return f"{n} B"


def _flag(argv: Sequence[str], flag: str) -> Optional[str]:
    for i, arg in enumerate(argv[:64]):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None


def _limit_of(p: ProcSignals, procs: Sequence[ProcSignals], flag: str) -> Optional[int]:
    """The limit ``flag`` gives on the command line of ``p`` or of its parent (a nanny that
    spawned it)."""
    parent = [q for q in procs if q.key == (p.key[0], p.info.ppid or -1)]
    for q in (p, *parent):
        value = _flag(q.info.cmdline, flag)
        if value is not None:
            return _bytes(value)
    return None


def _rss_pause(
    bundle: Bundle, procs: Sequence[ProcSignals], name: str, fp: FlowPause
) -> Optional[FlowStall]:
    """The process of the framework furthest past its pause threshold of the limit its
    command line gives, when no pause line was seen."""
    best: Optional[Tuple[float, ProcSignals, int, int]] = None
    for p in procs:
        ps = _sample_of(bundle, p.samples[-1], p.key) if p.samples and not p.dead else None
        if ps is None or not _is_framework(bundle, ps, fp):
            continue
        limit = _limit_of(p, procs, fp.limit_flag)
        if not limit:
            continue
        share = 100.0 * ps.rss_bytes / limit
        if share > fp.default_threshold_pct and (best is None or share > best[0]):
            best = (share, p, ps.rss_bytes, limit)
    if best is None:
        return None
    share, p, used, limit = best
    return FlowStall(
        proc=p,
        framework=name,
        pause=fp,
        where="",
        pct=int(share),
        used=_shown(used),
        limit=_shown(limit),
        inferred=True,
    )


def _log_pause(
    bundle: Bundle, procs: Sequence[ProcSignals], name: str, fp: FlowPause, pause: Pattern[str]
) -> Optional[FlowStall]:
    """The last pause line of the job's logs with no resume after it, and the process of the
    framework that holds the memory it reported (nearest RSS)."""
    if not bundle.samples:
        return None
    resume = re.compile(fp.resume_line) if fp.resume_line else None
    hit: Optional[Tuple[re.Match[str], str]] = None
    for log in bundle.samples[-1].logs:
        for line in log.tail:
            m = pause.search(line)
            if m:
                hit = (m, line)
            elif hit is not None and resume is not None and resume.search(line):
                hit = None
    if hit is None:
        return None
    m, line = hit
    groups = m.groupdict()
    used = groups.get("used") or ""
    want = _bytes(used) if used else None
    best: Optional[Tuple[int, ProcSignals]] = None
    for p in procs:
        ps = _sample_of(bundle, p.samples[-1], p.key) if p.samples and not p.dead else None
        if ps is None or not _is_framework(bundle, ps, fp):
            continue
        if want is not None and ps.rss_bytes < _HELD_SHARE * want:
            continue  # no longer holds what it paused for
        distance = abs(ps.rss_bytes - want) if want is not None else -ps.rss_bytes
        if best is None or distance < best[0]:
            best = (distance, p)
    if best is None:
        return None
    pct = groups.get("pct")
    return FlowStall(
        proc=best[1],
        framework=name,
        pause=fp,
        where="",
        line=line.strip()[:300],
        pct=int(pct) if pct else None,
        used=used,
        limit=groups.get("limit") or "",
    )


def _any_log_line(bundle: Bundle, pause: Pattern[str]) -> bool:
    """Whether a log of the job shows the pause line at all (then it decides, resumed or not)."""
    last = bundle.samples[-1] if bundle.samples else None
    return last is not None and any(pause.search(x) for log in last.logs for x in log.tail)


def _is_framework(bundle: Bundle, ps: ProcessSample, fp: FlowPause) -> bool:
    for t in ps.threads:
        if any(x in f.filename for f in frames_of(bundle, t.stack_id) for x in fp.files):
            return True
    return False


def _present(bundle: Bundle) -> List[bool]:
    """Per entry of ``_PAUSES``: whether any frame of the capture is in its framework's files.

    Every way a pause shows needs a process of the framework (a thread in its pause frame, or
    ``_is_framework`` for a log- or memory-shown pause), so a capture with none of its files is
    skipped whole: one pass over the interned stacks instead of every thread of every process
    of every sample - at 1,024 ranks x 300 threads that was 3 s of a 3.4 s verdict, twice."""
    files = {f.filename for stack in bundle.stacks.values() for f in stack.frames}
    return [any(x in name for name in files for x in fp.files) for _, fp, _, _ in _PAUSES]


def flow_stalls(bundle: Bundle, procs: Sequence[ProcSignals]) -> Tuple[FlowStall, ...]:
    """Every process of the capture its framework paused, with the party that can end it."""
    out: List[FlowStall] = []
    present = _present(bundle)
    for (name, fp, pause, _), here in zip(_PAUSES, present):
        if not here:
            continue
        if pause is not None:
            found = _log_pause(bundle, procs, name, fp, pause)
            if found is None and fp.limit_flag and not _any_log_line(bundle, pause):
                found = _rss_pause(bundle, procs, name, fp)
            if found is not None:
                out.append(found)
            continue
        for p in procs:
            hit = _thread_pause(bundle, p, fp)
            if hit is None:
                continue
            peers, outside = _peers(bundle, p, procs) if fp.party == "peer reader" else ((), ())
            stall = FlowStall(p, name, fp, hit[1], hit[0], peers, outside)
            if fp.party == "peer reader" and not peers and not outside:
                stall = _unconnected(bundle, stall)
            out.append(stall)
    return tuple(out)


__all__ = ["FlowStall", "flow_stalls"]
