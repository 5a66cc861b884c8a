"""The rules' words for output that reports failure (``output_kinds``), for a request
pile-up (``pileup``): a failure rate, a job whose only news is failure, a wedged server; and
for a feed consumed message by message (``fed_socket``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence, Tuple

from diag.text.units import size
from diag.verdict.features import ProcSignals
from diag.verdict.fed_socket import Fed
from diag.verdict.output_kinds import OutputTally
from diag.verdict.pileup import PileUp
from diag.verdict.wording import where, who

PILE_UP_OUTRANKS = (
    "threads piling up on a lock whose holder waits for what no live thread sets is a wedge, "
    "whatever its event loop, health endpoint, log or clients' traffic still show"
)
FAILURES_OUTRANK = (
    "output that reports only failures (timeouts, cancellations, refused connections, 5xx) "
    "is evidence of a stall, not progress; it outranks what the rest of the job's motion says"
)


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"1 {word}"
    return f"{n} {word[:-1] + 'ies' if word.endswith('y') else word + 's'}"


def failure_rate(t: OutputTally, span_s: float) -> str:
    """ "12 failures in 6 s (6 timeouts, 6 cancellations), none completed", or beside
    completions: "3 of 12 outcomes failed in 6 s (25 %: 3 timeouts)"."""
    kinds = ", ".join(_plural(n, kind) for kind, n in t.kinds[:3])
    span = f" in {span_s:.0f} s" if span_s > 0 else ""
    if t.completions == 0:
        return f"{_plural(t.failures, 'failure')}{span} ({kinds}), none completed"
    total = t.failures + t.completions
    return f"{t.failures} of {total} outcomes failed{span} ({100 * t.failures // total} %: {kinds})"


def _quote(t: OutputTally) -> str:
    return f' - last: "{t.last_failure}"' if t.last_failure else ""


def only_failures_blocked(t: OutputTally, span_s: float, blocked: Sequence[ProcSignals]) -> str:
    """``output_reports_failure``, deadlocked: failure is all that moves and threads block."""
    who = ", ".join(
        f"pid {p.pid}: {_plural(len(p.lock_waiters), 'thread')} in `{p.lock_waiters[0][2]}`"
        for p in blocked[:3]
    )
    return (
        f"its only moving output is failure - {failure_rate(t, span_s)}{_quote(t)}"
        f"; threads block on a lock in every sample ({who}): it is stuck on what its "
        f"failures name, not progressing"
    )


def only_failures_retrying(t: OutputTally, span_s: float) -> str:
    """``output_reports_failure``, slow: failure is all that moves and nothing is blocked. A
    write the kernel refuses (a full disk) ends when someone frees space: the job keeps what
    it has in memory only while it lives."""
    if t.kinds and t.kinds[0][0] == "refused write":
        return (
            f"its only moving output is failure - {failure_rate(t, span_s)}{_quote(t)}; "
            "the kernel refuses its writes (a full filesystem, a quota or a read-only mount): "
            "free space where it writes (`df -h` that path) and it goes on at its next retry. "
            "Don't kill it: what it tries to save may exist only in its memory"
        )
    return (
        f"its only moving output is failure - {failure_rate(t, span_s)}{_quote(t)}"
        f"; nothing of it is blocked: it keeps trying what its failures name and goes on when "
        f"that answers - look there, not at the job"
    )


def failures_beside_progress(t: OutputTally, span_s: float) -> str:
    """What ``output_moves`` adds when its logs report failures beside completions."""
    return f"; {failure_rate(t, span_s)}"


def _what(pu: PileUp) -> str:
    return {
        "event": "an event",
        "queue": "a queue item",
        "condition": "a condition",
        "lock": "another lock",
    }[pu.waits_for]


def pile_up(pu: PileUp) -> str:
    """``requests_pile_up``: the count, the chain, the dead thread, the remedy."""
    kind = "request threads" if pu.serves else "threads"
    counts = (
        f"{' → '.join(str(n) for n in pu.counts)} over the samples"
        if pu.counts[-1] > pu.counts[0]
        else "in every sample: its pool is full"
    )
    dead = f' (thread `{pu.dead_thread}` died: "{pu.dead_line}")' if pu.dead_thread else ""
    return (
        f"{pu.counts[-1]} {kind} of pid {pu.key[1]} queue on a lock in "
        f"`{pu.frame}` ({counts}), held by thread {pu.holder_tid} "
        f"(`{pu.holder_name}`) waiting in `{pu.holder_wait}` for {_what(pu)} that no live "
        f"thread sets{dead} - the server is wedged whatever its health endpoint answers: "
        f"restart it, and fix what was to set it"
    )


def pile_up_reason(pu: PileUp) -> str:
    """The suspect's reason: the holder."""
    return (
        f"thread {pu.holder_tid} holds the lock in `{pu.frame}` while it waits in "
        f"`{pu.holder_wait}` for {_what(pu)} no live thread sets"
    )


def pile_up_chain(pu: PileUp) -> str:
    """The suspect's chain: the pile, the holder, and who was to set what it waits for."""
    setter = f"thread `{pu.dead_thread}`: dead" if pu.dead_thread else "no live thread sets it"
    return (
        f"{pu.counts[-1]} threads of pid {pu.key[1]} → (lock) → thread {pu.holder_tid} in "
        f"`{pu.holder_wait}` → ({pu.waits_for}) → {setter}"
    )


def diverged_rank_fails(t: OutputTally) -> str:
    """What ``peers_wait`` adds when the rank it blames logs only failure: why it left."""
    return f"; its log reports only failure{_quote(t)}"


CONSUMES_FEED_OUTRANKS = (
    "a feed consumed message by message is the job's work: progress, not a slow transfer"
)


def consumes_feed(feeds: Sequence[Tuple[ProcSignals, Fed]]) -> str:
    """``consumes_feed``: who consumes which feed, at what pace, in what size of message."""
    parts = []
    for p, f in feeds[:3]:
        each = f.got_bytes / max(1, f.wakes or 1)
        parts.append(
            f"{who([p])} consumes a feed from {f.end.remote} in {where(p)}: woken {f.wakes} "
            f"times in {f.window_s:.1f} s for {size(f.got_bytes)} (~{each:.0f} B a wake, the "
            f"last {f.end.last_recv_s or 0:.1f} s ago)"
        )
    return (
        "; ".join(parts)
        + " - messages read as they arrive, each one woken for and handled before the next "
        "(it blocks for the next one: nothing waits unread), not a transfer held up by the "
        "network. The feed's pace is the publisher's"
    )


def consumes_feed_reason(f: Fed) -> str:
    """A consumer's reason: the feed it keeps up with."""
    return f"consumes a feed from {f.end.remote} ({size(f.got_bytes / f.window_s)}/s)"
