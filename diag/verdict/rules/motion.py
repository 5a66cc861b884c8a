"""Motion and output: the job's output moves, a server answers requests, processes compute or
read without a log line, children compute for a waiting parent."""

from __future__ import annotations

from typing import List, Optional

from diag.model import Suspect
from diag.verdict.features import ProcSignals
from diag.verdict.long_phase import lone_phase, lone_sentence, mover_reason
from diag.verdict.native_work import native_calls
from diag.verdict.output_kinds import capture_span_s, log_tally, merged
from diag.verdict.rhythm import hedge_text
from diag.verdict.rules import words, words_output
from diag.verdict.rules.base import Decision, decided
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.stories import (
    helper_work_story,
    progress_story,
    work_story,
)
from diag.verdict.work import computes, data_starved, reads_input


def answers_requests(s: Situation) -> Optional[Decision]:
    """A server answers its clients: bytes flow on connections to its listening ports. Socket
    traffic bypasses /proc/P/io (no wchar) and servers often log nothing per request, so this
    is the only sign of a busy server whose threads sit in epoll between requests."""
    if not s.answering or s.progress_logs or s.writers or s.intervals == 0:
        return None
    summary = words.answers_requests(s.answering)
    suspects: List[Suspect] = []
    stuck = _stuck_workers(s)
    if stuck:
        summary += words.stuck_worker(stuck)
        suspects = [
            Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason=words.stuck_worker_reason(q))
            for q in stuck[:4]
        ]
    return decided("progressing", 0.8, summary, suspects)


def _stuck_workers(s: Situation) -> List[ProcSignals]:
    """Processes holding requests unanswered through the capture on a port that another
    process of the job answers on: workers of one server, one of them stuck. A worker that
    computes or reads through the capture is busy with a long request, not stuck."""
    stuck = [
        q
        for q in s.ctx.procs
        if not q.dead and q.stale_requests and not (computes(q) or reads_input(q))
    ]
    out = []
    for q in stuck:
        ports = set(q.stale_ports or q.listen_ports)
        if any(a.key != q.key and ports & set(a.listen_ports) for a in s.answering):
            out.append(q)
    return out


def alone_in_phase(s: Situation) -> Optional[Decision]:
    """A minority of ranks write while every other rank waits on its peers and no log of the
    job moves: one rank's phase (a download, a save), slow - named with its rate and ETA."""
    if not (s.progressing and s.intervals > 0):
        return None
    lone = lone_phase(s.ctx.bundle, s.alive, s.writers, len(s.progress_logs), s.startup.phases)
    if lone is None:
        return None
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=mover_reason(lone, p))
        for p in lone.movers
    ]
    return decided("slow", 0.75, lone_sentence(lone), suspects)


def consumes_feed(s: Situation) -> Optional[Decision]:
    """A process blocks reading a TCP socket on which a feed's messages keep arriving - many
    wakes, a few hundred bytes each (``fed_socket.Fed.messages``) - and no rank waits on a
    peer: it consumes the feed as the publisher sends it. That is the job's work, whatever it
    writes: progressing, not "slow: a slow transfer" (a transfer's chunks are kilobytes)."""
    if s.progressing or s.peer_waiters or s.intervals == 0:
        return None
    feeds = [(p, f) for p in s.alive if (f := s.receivers.get(p.key)) and f.messages]
    if not feeds:
        return None
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=words_output.consumes_feed_reason(f))
        for p, f in feeds[:4]
    ]
    return decided("progressing", 0.7, words_output.consumes_feed(feeds), suspects)


def output_moves(s: Situation) -> Optional[Decision]:
    """The job's own output moves (a log that is not a heartbeat, bytes written, data sent)."""
    if not (s.progressing and s.intervals > 0):
        return None
    summary, confidence, suspects = progress_story(s.progress_logs, s.writers, s.workers, s.dead)
    reported = merged(log_tally(lg) for lg in s.progress_logs)
    if reported.failures:  # failures beside completions: progress, with its failure rate
        summary += words_output.failures_beside_progress(reported, capture_span_s(s.ctx.bundle))
    return decided("progressing", confidence, summary, suspects)


def output_reports_failure(s: Situation) -> Optional[Decision]:
    """The job's only moving output is failure (timeouts, cancellations, refused connections,
    5xx, tracebacks) and nothing else moves: with threads blocked on a lock in every sample
    and nothing working, deadlocked - stuck on what its failures name; with nothing blocked
    and no peer or lock wait (a retry loop backing off), slow - it goes on when what it calls
    answers. Output beside it that moves, or work, leaves the decision to the rows below."""
    if not s.failing_logs or s.progressing or s.working or s.intervals == 0:
        return None
    t = merged(log_tally(lg) for lg in s.failing_logs)
    span = capture_span_s(s.ctx.bundle)
    blocked = [p for p in s.alive if p.lock_waiters]
    if blocked:
        suspects = [
            Suspect(
                pid=p.pid,
                rank=p.rank,
                host=p.key[0],
                reason=f"its threads block on a lock "
                f"in `{p.lock_waiters[0][2]}` while its output reports only failures",
            )
            for p in blocked[:4]
        ]
        return decided(
            "deadlocked", 0.7, words_output.only_failures_blocked(t, span, blocked), suspects
        )
    if s.peer_waiters or s.waiting_on_others:
        return None  # a peer or a lock of the job: the rows below name it
    return decided("slow", 0.55, words_output.only_failures_retrying(t, span))


def silence_within_rhythm(s: Situation) -> Optional[Decision]:
    """The job's log beats slower than this capture is long and is not yet overdue: the
    capture cannot call a hang (``diag.verdict.rhythm``). Decides where no other row does;
    ``rules.apply`` lets it overrule a deadlocked decision drawn from waits alone."""
    r = s.rhythm
    if r is None or s.intervals == 0 or s.dead:
        return None
    return decided("unknown", 0.5, hedge_text(r, "nothing moved in it"))


# The families whose deadlocked decisions are drawn from waits alone - a silence the job's
# own rhythm may explain. Deaths and lock structure (a cycle, a lock held by its waiter) hold.
WAIT_FAMILIES = frozenset({"peers", "graph", "doors"})


def rhythm_hedge(s: Situation, decision: Decision, family: str) -> Optional[Decision]:
    """A deadlocked decision of ``WAIT_FAMILIES`` on a capture shorter than its job's log
    rhythm becomes ``silence_within_rhythm``'s, quoting it; None to keep it."""
    if decision.state != "deadlocked" or family not in WAIT_FAMILIES:
        return None
    r = s.rhythm
    if r is None or s.intervals == 0 or s.dead:
        return None
    return decided("unknown", 0.5, hedge_text(r, decision.summary), decision.suspects)


def works_silently(s: Situation) -> Optional[Decision]:
    """CPU outside known waits, reads rising, memory growing, a GPU at power: looks hung, isn't."""
    if not s.working:
        return None
    native = native_calls(s.ctx.bundle, s.workers[:3])  # "in `encode_batch`", not `python`
    summary, suspects = work_story(
        s.workers, s.readers, s.growers, s.alive, s.peer_waiters, native, s.receivers
    )
    return decided("slow", 0.8 if (s.workers or s.readers) else 0.6, summary, suspects)


def children_work(s: Situation) -> Optional[Decision]:
    """A process waits on child processes that compute (inductor's g++/cc1plus, nvcc): its own
    threads sleep in ``waitpid``/``Popen.wait`` and each compiler lives a second, so neither
    the parent's CPU nor any one sample shows the work - the reaped children's CPU does.

    A training loop waiting for batches whose DataLoader workers wait inside the dataset's
    own code (a sleep, a socket, a file read: a remote fetch, slow storage) works through
    them too, without CPU: the job is data-starved - slow, never idle (``work.data_starved``).
    Workers idle in their own loop (nobody asks) or on a lock in the dataset are not. A worker
    whose request has had no byte of answer for minutes (tcp_info) is no slow fetch but a
    hung one, and the loop waits for ever: deadlocked, the worker and the store named."""
    if not s.helped:
        starved = data_starved(s.ctx.bundle, s.alive)
        if starved is None:
            return None
        if starved.hung:  # a fetch with no byte of answer for minutes: it hangs
            blamed = [
                Suspect(pid=w.pid, host=w.key[0], reason=words.fetch_hung_reason(end))
                for w, end in starved.hung[:4]
            ]
            return decided("deadlocked", 0.7, words.fetch_hung(starved), blamed)
        suspects = [
            Suspect(pid=w.pid, host=w.key[0], reason=words.starved_reason(starved))
            for w in starved.workers[:4]
        ]
        return decided("slow", 0.65, words.data_starved(starved), suspects)
    summary, suspects = helper_work_story(s.helped, s.alive)
    return decided("slow", 0.7, summary, suspects)
