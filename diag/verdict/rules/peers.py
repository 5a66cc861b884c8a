"""Peers and collectives: torchrun waiting for its other nodes, a collective record naming the
rank behind, ranks waiting on a peer, a native spin-wait no peer of the job can end, results
no worker computes, a GPU spinning at idle power."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect
from diag.verdict.backoff import backoff_sentence, backoffs, pool_task_backoffs
from diag.verdict.equivalence import odd_classes
from diag.verdict.graph_nodes import node_key
from diag.verdict.infeasible import infeasible
from diag.verdict.loop_self_wait import loop_waits_on_itself
from diag.verdict.output_kinds import log_tally, merged
from diag.verdict.rendezvous import mismatch, waiting_agents
from diag.verdict.rules import (
    words,
    words_infeasible,
    words_joins,
    words_output,
    words_results,
    words_spin,
)
from diag.verdict.rules.base import Decision, decided
from diag.verdict.signals import COMPUTE_PCT, ProcSignals
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.sources import (
    STUCK,
)
from diag.verdict.stories import (
    peer_story,
    pool_story,
)
from diag.verdict.waits import PEER, RESULT


def waits_for_nodes_to_join(s: Situation) -> Optional[Decision]:
    """torchrun's agent waits in its rendezvous and no rank of it has started: the other
    nodes' agents end that wait, and a capture of this host holds none of them - nothing
    here is stuck, the missing nodes are (not started, failed, or told another endpoint or
    id). It gives up by itself at the join timeout. Across the hosts of a merged bundle,
    agents that all wait with different settings will never meet.

    A rank in ``init_process_group`` that still connects to its TCPStore, with no process of
    the capture listening on the store's port, waits the same way: for the store's host (rank
    0, or the agent) to come up - idle, not a deadlock: no collective has begun, and a late
    rank 0 ends it. Idle rather than slow: nothing works, and it waits on something outside
    the capture, as the agent does."""
    agents = waiting_agents(s.ctx.procs)
    if not agents or any(p.rank is not None and not p.dead for p in s.ctx.procs):
        join, gone = s.store_join, s.store_host
        if join is None:
            return None
        hedge = words_joins.host_missing_hedge(gone) if gone and gone.missing_here else ""
        return decided("idle", 0.7, words.rank_joins_store(join) + hedge, [])
    p, settings = agents[0]
    hosts = {q.key[0] for q, _ in agents}
    differ = mismatch(agents) if len(hosts) > 1 else None
    if differ:
        summary = words.agents_never_meet(p, len(hosts), differ)
        suspects = [
            Suspect(pid=q.pid, host=q.key[0], reason=words.rendezvous_reason(st))
            for q, st in agents[:4]
        ]
        return decided("deadlocked", 0.75, summary, suspects)
    summary = words.nodes_to_join(p, settings, len(hosts))
    return decided("idle", 0.7, summary, [])


def rendezvous_forming(s: Situation) -> Optional[Decision]:
    """Every rank waits in the rendezvous and one of them arrived there during the capture
    (``diag.verdict.arrivals``): the meeting is forming, the start-up advances - no rank
    diverged, and the late one was what the others waited for."""
    if not s.arrivals:
        return None
    ranks = [p for p in s.alive if p.rank is not None]
    return decided("progressing", 0.6, words_joins.rendezvous_forming(s.arrivals, ranks), [])


def collective_laggard(s: Situation) -> Optional[Decision]:
    """Collective records (Flight Recorder) that show one rank behind name the culprit whatever
    the stacks show: a wait inside C++ (``work.wait()``) shows only its caller."""
    culprits = [f for f in s.findings if f.lean == STUCK and f.suspects]
    if not culprits:
        return None
    first = culprits[0]
    summary = words.collective_laggard(first.evidence.detail, first.suspects[0].pid)
    return decided("deadlocked", 0.85, summary, [x for f in culprits for x in f.suspects])


def peer_backs_off(s: Situation) -> Optional[Decision]:
    """Ranks wait on a peer, and every rank outside the collective sleeps in a timed wait that
    ends by itself within a sane back-off (``diag.verdict.backoff``): it resumes, the job is
    slow. A sleep of 10 min or more, one slept again and again, or the same retry logged again
    and again is no back-off, and ``peers_wait`` names the rank."""
    if not s.peer_waiters:
        return None
    others = [p for p in s.alive if p.main_family != PEER]
    backs = backoffs(s.ctx.bundle, others)
    if not backs:
        return None
    summary = backoff_sentence(backs, s.peer_waiters)
    suspects = [
        Suspect(
            pid=b.proc.pid, rank=b.proc.rank, host=b.proc.key[0], reason=words.backoff_reason(b)
        )
        for b in backs
    ]
    return decided("slow", 0.75 if backs[0].line else 0.6, summary, suspects)


def peers_wait(s: Situation) -> Optional[Decision]:
    """Ranks wait on a peer and nothing moves: the odd rank (or the missing one) is why."""
    if not s.peer_waiters:
        return None
    odd = odd_classes(s.classes)
    summary, suspects, confidence = peer_story(s.peer_waiters, s.alive, odd, s.classes, s.ctx)
    # A blamed rank whose log reports only failure (a save retried on a full disk, a service
    # that answers 503 for good) says why it left the group: quoted, the cause to fix.
    blamed = {(sp.host, sp.pid) for sp in suspects}
    failing = [lg for lg in s.failing_logs if lg.writers & blamed]
    if failing:
        summary += words_output.diverged_rank_fails(merged(log_tally(lg) for lg in failing))
    return decided("deadlocked", confidence, summary, suspects)


def results_never_come(s: Situation) -> Optional[Decision]:
    """A process waits for pool results that no worker computes."""
    result_waiters = [p for p in s.alive if p.main_family == RESULT]
    if not result_waiters:
        return None
    found = infeasible(s.ctx.logs)
    if found is not None:  # its scheduler says the work can never be placed: nothing was lost
        reason = words_infeasible.never_placed_reason(found)
        blamed = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)
                  for p in result_waiters[:4]]  # fmt: skip
        summary = words_infeasible.never_placed(result_waiters, found)
        return decided("deadlocked", 0.8, summary, blamed)
    for p in result_waiters:
        coroutine = loop_waits_on_itself(s.ctx.bundle, p)
        if coroutine is not None:  # the loop's thread waits on a result of its own loop
            reason = words_results.loop_waits_on_itself_reason(coroutine)
            blamed = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
            return decided(
                "deadlocked", 0.8, words_results.loop_waits_on_itself(p, coroutine), blamed
            )
    # The pool's workers that run a task all sleep in a timed wait that ends by itself within
    # a sane back-off - a rate limit, a Retry-After: the results come when they wake
    # (``diag.verdict.backoff``: not a sleep slept again and again, nor the same retry logged
    # again and again).
    backs = pool_task_backoffs(s.ctx.bundle, [p for p in s.alive if p not in result_waiters])
    if backs:
        summary = words_results.pool_backs_off(result_waiters, backs)
        blamed = [
            Suspect(pid=b.proc.pid, rank=b.proc.rank, host=b.proc.key[0],
                    reason=words_results.pool_backoff_reason(b))
            for b in backs[:4]
        ]  # fmt: skip
        return decided("slow", 0.7, summary, blamed)
    summary, suspects = pool_story(result_waiters, s.alive)
    return decided("deadlocked", 0.7, summary, suspects)


def gpu_spins(s: Situation) -> Optional[Decision]:
    """A GPU reads busy at idle power and nothing else moves: a kernel waits on a peer."""
    if STUCK not in s.leans:
        return None
    summary = words.gpu_spins(s.alive)
    return decided("deadlocked", 0.65, summary, [])


SPIN_ALONE_PCT = 30.0  # a core's share a spin-wait burns to count (evidence's SPIN_PCT)


def _alone(s: Situation, p: ProcSignals) -> bool:
    """Nothing of the job but ``p``'s spin runs or can wake: no other process of the job
    (its helpers included: any may write the word) burns CPU or is stopped (a stopped one
    may be resumed: ``rank_stopped``'s), ``p`` computes nowhere else, and the wait-for graph
    ends ``p``'s chain at itself, stuck - no thread of it waits on a socket, a port, a pipe
    from outside or a timer that could set what it polls. A process that listens or serves
    clients is never alone: a busy-polling server (RDMA, a shared-memory ring it set up for a
    client) spins for what a party outside the job writes."""
    if p.compute_pct >= COMPUTE_PCT:
        return False
    if p.listen_ports or p.served_conns:
        return False  # a server: what it polls may be written for a client (RDMA, shm)
    others = [q for q in s.ctx.procs if q.key != p.key and not q.dead]  # helpers too
    if any(q.cpu_pct >= COMPUTE_PCT or q.stopped for q in others):
        return False
    g, key = s.graph, node_key(p)
    if g is None:
        return False
    return any(r == "stuck" and key in ends for r, ends in zip(g.reasons, g.line_ends))


def spins_with_no_party(s: Situation) -> Optional[Decision]:
    """A thread spins in a native spin-wait loop - told by its code (a PAUSE in a loop a
    few bytes long), not by a library a pack knows - at every sample, and nothing else of
    the job runs or moves: the party that was to write the word it polls can be no live
    process of the job (a peer that crashed and was reaped leaves no zombie). A declared
    rank of a multi-rank job is left to ``peers_wait`` (its peers may be on hosts outside
    the capture, the spin an RDMA poll); a pack's engine (a CUDA synchronize: the device may
    still compute) is left to the rows that know it."""
    if s.progressing or s.working:
        return None
    for p in s.alive:
        spin = p.native_spin
        if spin is None or spin.hint is None or spin.framework or p.spin_pct < SPIN_ALONE_PCT:
            continue
        if p.rank is not None and (p.info.world_size or 0) > 1:
            continue
        if not _alone(s, p):
            continue
        caller = p.main_wait.caller if p.main_wait and p.main_wait.native else ""
        reason = words_spin.spin_alone_reason(spin, p.window_s)
        suspect = Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)
        summary = words_spin.spins_with_no_party(p, spin, caller)
        return decided("deadlocked", 0.7, summary, [suspect])
    return None
