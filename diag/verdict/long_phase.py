"""One rank's long phase while its peers wait: slow, never "progressing" (issue #37).

"Progressing" is the job's own unit of work moving - steps, requests, batches in its log, or
work spread over its ranks. A rank that downloads its weights from a slow mirror, compresses
a checkpoint in native code or saves a shard while every other rank waits for it in a barrier
or a collective writes bytes, and bytes written once read "progressing: rank 0 keeps writing
output". The job's steps have stopped for this phase: it is slow, and the useful answer is the
phase, its rate and, where the file tells how far it is, its ETA.

The phase is the start-up reader's (``diag.verdict.startup``: the file, the frame, the
child), else the first of ``PHASE_WORDS`` in the names of the rank's main-thread frames, else
"writing". Pure functions of the sample series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from diag.model import Bundle, RankPhase
from diag.text.units import size
from diag.verdict.features import ProcSignals
from diag.verdict.startup_signs import STARTUP_PHASES, eta_words
from diag.verdict.thread_wait import frames_of
from diag.verdict.wording import group_by_wait, verb, where, who

PEER = "peer"
# Words of a frame's function name -> the phase it names (first match, innermost frame first).
PHASE_WORDS: Tuple[Tuple[str, str], ...] = (
    ("compress", "compressing"),
    ("download", "downloading"),
    ("fetch", "downloading"),
    ("upload", "uploading"),
    ("save", "saving"),
    ("checkpoint", "saving"),
    ("compile", "compiling"),
    ("load", "loading"),
)


@dataclass(frozen=True)
class LonePhase:
    """The ranks in a phase of their own and the peers that wait for them."""

    movers: Tuple[ProcSignals, ...]
    waiters: Tuple[ProcSignals, ...]
    phases: Dict[int, RankPhase]  # by pid, where the start-up reader knows it
    frame_phase: Dict[int, str]  # by pid, named from its frames when it does not


def _frame_phase(bundle: Bundle, p: ProcSignals) -> str:
    """The phase its main thread's frames name at the last sample it was seen, or ""."""
    for sample in reversed(bundle.samples):
        for ps in sample.processes:
            if (ps.host, ps.pid) != p.key or not ps.threads:
                continue
            main = next((t for t in ps.threads if t.tid == ps.pid), ps.threads[0])
            for frame in frames_of(bundle, main.stack_id):
                name = frame.name.lower()
                for word, phase in PHASE_WORDS:
                    if word in name:
                        return phase
            return ""
    return ""


# What a peer waiting in a collective sends while its collectives complete (a gradient
# all_reduce of a small model sends tens of KiB a step; a barrier that never ends, nothing).
PEER_SENDS_MIN_BYTES = 4 << 10


def lone_phase(
    bundle: Bundle,
    alive: Sequence[ProcSignals],
    writers: Sequence[ProcSignals],
    progress_logs: int,
    job_phases: Sequence[RankPhase] = (),
) -> Optional[LonePhase]:
    """The ranks whose writes are the job's only motion while every other rank waits on its
    peers; None when the job's log moves, no peer waits, or the work is spread over its
    ranks (half of them or more move). ``job_phases``: the start-up phases of the job's
    processes, measured once (``Situation.startup``)."""
    if progress_logs:
        return None
    ranks = [p for p in alive if p.rank is not None] or list(alive)
    movers = [p for p in writers if p in ranks and p.main_family != PEER]
    if not movers or len(movers) * 2 > len(ranks):
        return None
    rest = [p for p in ranks if p not in movers]
    # Peers that move data themselves complete their collectives: work spread over ranks. So
    # do peers that send at all (wchar: the exchange with the job's own ranks is no output,
    # but it is a collective completed) or whose stack left their wait between samples - a
    # straggler's steps go on, slowly; a lone phase stops them (its peers sit in one barrier).
    if not rest or any(
        p.main_family != PEER
        or p in writers
        or p.write_delta_bytes >= PEER_SENDS_MIN_BYTES
        or p.main_moved
        for p in rest
    ):
        return None
    keys = {p.key for p in movers}
    mine = [ph for ph in job_phases if (ph.host, ph.pid) in keys]
    # Serving or waiting beside a phase is told only where a mover is in one.
    in_phase = any(ph.phase in STARTUP_PHASES for ph in mine)
    phases = {ph.pid: ph for ph in mine} if in_phase else {}
    named = {p.pid: _frame_phase(bundle, p) for p in movers if p.pid not in phases}
    return LonePhase(tuple(movers), tuple(rest), phases, named)


def _rate(p: ProcSignals) -> str:
    """ "writes 1.0 MiB/s (4.0 MiB in 4.0 s)", from wchar over its window."""
    if p.window_s <= 0:
        return f"wrote {size(p.write_delta_bytes)}"
    per_s = p.write_delta_bytes / p.window_s
    return f"writes {size(per_s)}/s ({size(p.write_delta_bytes)} in {p.window_s:.1f} s)"


def phase_text(lone: LonePhase, p: ProcSignals) -> str:
    """ "downloading (model.safetensors.incomplete grows (+4.0 MiB)), writes 1.0 MiB/s (...)",
    with how far and the ETA where the phase's file says."""
    ph = lone.phases.get(p.pid)
    if ph is None:
        name = lone.frame_phase.get(p.pid) or "writing"
        return f"{name}, {_rate(p)}"
    text = f"{ph.phase}"
    if ph.evidence:
        text += f" ({ph.evidence})"
    text += f", {_rate(p)}"
    if ph.progress_pct is not None:
        text += f", {ph.progress_pct:.0f} % done"
    if ph.eta_s is not None:
        text += f", ETA {eta_words(ph.eta_s)}"
    return text


def lone_sentence(lone: LonePhase) -> str:
    """ "slow: rank 0 is alone in a phase - downloading (...), writes 1.0 MiB/s (...); ranks
    1-2 wait for it in `barrier`: the job's steps have stopped for this phase - wait for it, or
    speed up its source; don't kill"."""
    movers = list(lone.movers)
    first = movers[0]
    it = "it" if len(movers) == 1 else "them"
    waits = "; ".join(
        f"{who(g)} {verb(g, 'waits', 'wait')} for {it} in {where(g[0])}"
        for g in group_by_wait(list(lone.waiters))[:2]
    )
    return (
        f"{who(movers)} {verb(movers, 'is', 'are')} alone in a phase - "
        f"{phase_text(lone, first)}; {waits}: the job's steps have stopped for this phase - "
        f"wait for it, or speed up what it reads or writes; don't kill"
    )


def mover_reason(lone: LonePhase, p: ProcSignals) -> str:
    return f"alone in a phase while its peers wait: {phase_text(lone, p)}"


__all__ = ["PHASE_WORDS", "LonePhase", "lone_phase", "lone_sentence", "mover_reason", "phase_text"]
