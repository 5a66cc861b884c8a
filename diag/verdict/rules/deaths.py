"""Deaths and stops: a rank that died or was stopped, a death the log reports. These come first
in the table: a dead or stopped process owes its peers what they wait for, whatever the others
print or burn."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect
from diag.verdict.dead_setter import block_on_dead, spin_on_dead
from diag.verdict.features import ProcSignals
from diag.verdict.gpu_health import failed_sentence, fatal_gpus
from diag.verdict.graph_nodes import node_key
from diag.verdict.participants import (
    framework_rank,
    is_helper,
    is_rank_helper,
    strong_rank,
)
from diag.verdict.rules import words, words_joins, words_spin
from diag.verdict.rules.base import Decision, decided
from diag.verdict.situation import (
    Situation,
    gone_ranks,
)
from diag.verdict.stories import (
    dead_story,
    stopped_story,
)
from diag.verdict.wait_age import stopped_age, stopped_words


def rank_died(s: Situation) -> Optional[Decision]:
    """A rank died, its peers are still there and nothing progresses: they wait for it."""
    if not s.dead:
        return None
    # A rank that died of a signal or an error outranks output from the others (their
    # "lost rank N" messages, a front end's stats); one that exited 0 only when nothing moves.
    crashed = [p for p in s.ranked_dead if p.exit_code is None or p.exit_code != 0]
    crashed.sort(key=lambda p: p.dead_since if p.dead_since is not None else 1 << 30)
    if not s.alive:
        # Every rank is gone but the job is not: a server's front end or engine outlived its
        # TP workers (one was killed, the rest shut down after it). The first crash is why.
        rest = [p for p in s.ctx.procs if not p.dead and not is_helper(p)]
        if not (crashed and rest):
            return None
        # First to die first; a known failure code before an exit diag saw no code for.
        dead = sorted(
            s.dead,
            key=lambda p: (
                p.dead_since if p.dead_since is not None else 1 << 30,
                p.exit_code in (None, 0),
            ),
        )
        summary, suspects = dead_story(dead, rest, s.ctx)
        return decided("deadlocked", 0.8, summary, suspects)
    if s.progressing and not crashed:
        return None
    if not (s.ranked_dead or s.waiting_on_others):
        return None
    if s.workers and not s.peer_waiters and not crashed:
        return None  # a finished rank (exit 0) while the others still compute
    summary, suspects = dead_story(s.dead, s.alive, s.ctx)
    return decided("deadlocked", 0.9 if s.peer_waiters else 0.75, summary, suspects)


def rank_stopped(s: Situation) -> Optional[Decision]:
    """A process stopped by a signal or a debugger (state T) ends no wait until SIGCONT."""
    # Any process of the job, not only the ranks: a stopped EngineCore feeds its TP ranks, a
    # stopped front end answers no request, a stopped compiler holds up its rank.
    stopped = [p for p in s.alive if p.stopped] or [
        p for p in s.ctx.procs if p.stopped and not p.dead
    ]
    if not stopped:
        return None
    # A stopped process nobody waits on (a sidecar, a monitor) owes the job nothing: while the
    # job's output moves or it computes, that decides - the graph's warning names the stopped
    # one ("part of the job can never wake ... kill -CONT").
    owed = [p for p in stopped if strong_rank(p) or framework_rank(p) or _waited_on(s, p)]
    if not owed and (s.progressing or s.workers):
        return None
    # Stopped in every sample outranks what the others show: whatever it owes them (a
    # collective, a reply on a queue, a health check's real work) will not come, and a
    # front end that keeps logging its stats or a peer spinning in a busy-wait collective
    # only looks alive.
    since = stopped_words(stopped_age(s.ctx.bundle, stopped))  # since when, from the kernel
    summary, suspects = stopped_story(stopped, s.alive, since)
    sure = 0.85 if not (s.progressing or s.workers) else 0.75
    return decided("deadlocked", sure, summary, suspects)


def _waited_on(s: Situation, p: ProcSignals) -> bool:
    """Another process's wait ends at ``p`` in the wait-for graph (a queue, a pipe, a peer, a
    waitpid); without a graph, assume so."""
    if s.graph is None:
        return True
    key = node_key(p)
    return any(e.dst == key and e.src != key for e in s.graph.edges)


def log_names_dead_rank(s: Situation) -> Optional[Decision]:
    """The job's log says rank N died and no live process of the job is rank N, while other
    ranks are there: they will wait for it (or are being shut down because of it) whatever
    CPU they burn - a TP peer spinning in its all-reduce, a worker tearing down. A rank that
    was restarted (a live rank N again) or a death line naming no rank does not count; nor
    does one in a job whose log reports new progress or that answers requests - a death line
    from before the capture (an elastic restart with fewer ranks, a log appended across runs)
    is history, not why it hangs."""
    gone = gone_ranks(s.ctx)
    if not gone or s.progress_logs or s.answering:
        return None
    d = gone[0]
    survivors = [p for p in s.ctx.procs if p.rank is not None and not is_rank_helper(p)]
    survivors = [p for p in survivors if not p.dead]
    summary = words.rank_gone_in_log(d, survivors)
    return decided("deadlocked", 0.75, summary, [])


def store_host_died(s: Situation) -> Optional[Decision]:
    """Ranks wait to join a c10d store nobody listens on, and the capture holds evidence that
    the store's host rank died (``host_gone``: its traceback, its exit status, its launcher
    having reaped it on this host): it will never come, whatever the wait looks like."""
    join, gone = s.store_join, s.store_host
    if join is None or gone is None or not gone.dead:
        return None
    host = join.joiners[0].key[0]
    reason = words_joins.host_died_reason(gone)
    suspect = Suspect(pid=0, rank=gone.rank, host=host, reason=reason)
    return decided("deadlocked", 0.8, words_joins.store_host_died(join, gone), [suspect])


def spins_for_dead_thread(s: Situation) -> Optional[Decision]:
    """A thread spins on one line of the job's code in every sample while its process's log
    says the thread that was to end the spin died (``dead_setter``): it never ends."""
    if s.progressing:
        return None
    for p in s.alive:
        found = spin_on_dead(s.ctx.bundle, p)
        if found is not None:
            reason = words_spin.spin_reason(found)
            suspect = Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)
            return decided("deadlocked", 0.6, words_spin.spins_for_dead(found), [suspect])
    return None


def waits_for_dead_thread(s: Situation) -> Optional[Decision]:
    """A thread waits untimed on an Event, Condition or lock in the job's code in every sample
    while its process's log says a thread of it died (``dead_setter.block_on_dead``): the one
    that was to set it is gone - whatever ports or timers the job keeps. Not while a process
    of the job works (computes, reads, grows): a live thread there may be the one that sets
    it."""
    if s.progressing or s.working:
        return None
    for p in s.alive:
        found = block_on_dead(s.ctx.bundle, p)
        if found is not None:
            reason = words_spin.block_reason(found)
            suspect = Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)
            return decided("deadlocked", 0.6, words_spin.blocks_for_dead(found), [suspect])
    return None


def log_reports_death(s: Situation) -> Optional[Decision]:
    """Nothing moves and the job's own log says one of its processes died (a worker killed
    and reaped before diag looked: no zombie is left to see, only its peers' ERROR lines)."""
    deaths = [(lg, line) for lg in s.ctx.logs for line in lg.deaths]
    if not deaths:
        return None
    # The first death is the cause; later lines (EngineDeadError in the front end) are its
    # consequences.
    log, line = deaths[0]
    summary = words.death_in_log(log.path, line, s.alive)
    return decided("deadlocked", 0.7, summary, [])


def gpu_failed(s: Situation) -> Optional[Decision]:
    """A process of the job whose GPU's work has ended (XID 79: it fell off the bus; XID 95:
    an uncontained ECC error; NVML reports it lost): it cannot go on and its peers wait for
    it - a death, whatever it still burns (a CUDA call spinning on a lost device)."""
    live = {p.key: p for p in s.ctx.participants if not p.dead}
    failed = [f for f in fatal_gpus(s.ctx.bundle) if (f[1].host, f[1].pid) in live]
    if not failed:
        return None
    gone = {(f[1].host, f[1].pid) for f in failed}
    others = [p.rank for k, p in live.items() if k not in gone]
    suspects = [
        Suspect(pid=info.pid, rank=info.rank, host=info.host, reason=f"its GPU {st.key[1]} {why}")
        for st, info, why in failed
    ]
    return decided("deadlocked", 0.85, failed_sentence(failed, others), suspects)
