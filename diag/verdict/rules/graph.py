"""Rules read off the wait-for graph: a process calling its own server, a pipe a background
process outlives its child with, a chain ending at a stopped outsider, chains that never end, a
writer on a full pipe, and the table's last rule (nothing can wake it)."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect, VerdictState, WaitGraph
from diag.verdict.chains import DEAD_ENDS, graph_state
from diag.verdict.dead_link import dead_links
from diag.verdict.features import COMPUTE_PCT
from diag.verdict.futile_poll import lock_polled, pipe_polled, stuck_by_age
from diag.verdict.graph_nodes import (
    OUTSIDE_JOB,
    node_key,
)
from diag.verdict.participants import (
    door_ports,
)
from diag.verdict.pipe_story import pipe_story, writers_of
from diag.verdict.quiet_peer import owing_peers, quiet_peers
from diag.verdict.rules import words, words_polls, words_quiet
from diag.verdict.rules.base import Decision, decided
from diag.verdict.self_wake import self_wake
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.waits import CHILD


def calls_itself(s: Situation) -> Optional[Decision]:
    """A process waits for the answer of its own server: its thread reads a TCP connection
    whose other end still sits in its *own* listener's queue, and no other thread of it
    accepts (the graph's tcp self-edge). The thread that would answer is the one waiting - a
    synchronous HTTP call from an async handler to its own port. No client, timer or peer
    ends it: 'idle, waiting for work' would be wrong, and so would waiting."""
    g = s.graph
    if g is None:
        return None
    by_node = {node_key(p): p for p in s.ctx.procs if not p.dead}
    for e in g.edges:
        if e.src != e.dst or e.kind != "tcp":
            continue
        p = by_node.get(e.src)
        if p is None:
            continue
        summary = words.calls_itself(p, e.evidence)
        blame = Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=words.OWN_SERVER_REASON)
        return decided("deadlocked", 0.75, summary, [blame])
    return None


def pipe_outlives_child(s: Situation) -> Optional[Decision]:
    """A process waits in ``Popen.communicate`` (``run(capture_output=True)``) for EOF on its
    child's pipes, the child has exited, and a live process still holds a write end - one the
    child started in the background (``sh -c "server &"``) inherited it. The child is not what
    it waits for any more: that process is, and it may never exit (the graph's pipe edges
    from a child-waiter whose children are all dead)."""
    g = s.graph
    if g is None:
        return None
    nodes = {n.key: n for n in g.nodes}
    by_node = {node_key(p): p for p in s.ctx.procs if not p.dead and p.main_family == CHILD}
    for key, p in by_node.items():
        out = [e for e in g.edges if e.src == key]
        kids = [nodes[e.dst] for e in out if e.kind == "child" and e.dst in nodes]
        pipes = [e for e in out if e.kind == "pipe" and e.dst in nodes and e.dst != key]
        if not pipes or any(k.state not in ("zombie", "exited") for k in kids):
            continue
        holder = nodes[pipes[0].dst]
        summary = words.pipe_outlives_child(p, kids[0] if kids else None, holder)
        reason = words.pipe_holder_reason(pipes[0].evidence)
        blame = Suspect(pid=holder.pid, host=holder.host, reason=reason)
        return decided("deadlocked", 0.75, summary, [blame])
    return None


def waits_on_stopped_outsider(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a chain of its waits ends at a process *outside* the job
    that is stopped or a zombie - a local server a client or a handler thread calls, the
    writer of a pipe, a file lock's holder. The job's own stacks only say "waits for a result"
    or "a handler waits on something"; the graph names who: it must run again (or be
    replaced) before anything here does, and killing the job would not help."""
    g = s.graph
    if g is None:
        return None
    by_key = {n.key: n for n in g.nodes}
    for line, ends in zip(g.chains, g.line_ends):
        for key in ends:
            n = by_key.get(key)
            if n is None or not n.label.endswith(OUTSIDE_JOB) or not n.pid:
                continue
            if n.state not in ("stopped", "zombie"):
                continue
            summary = words.stopped_outsider(line, n)
            blame = Suspect(pid=n.pid, host=n.host, reason=words.outsider_reason(n))
            return decided("deadlocked", 0.8, summary, [blame])
    return None


def _dead_chains(s: Situation) -> Optional[WaitGraph]:
    """The graph when nothing works and every chain of waits from the participants ends where
    nothing can ever end it (stopped, dead, a cycle) and no participant has a thread of its
    own on a timer or behind a listening port (which might still end its wait) - a port some
    thread of it accepts on or watches (``door_ports``): a listener no thread takes
    connections from wakes nobody."""
    g = s.graph
    if g is None or not g.reasons or not all(r in DEAD_ENDS for r in g.reasons):
        return None
    if any(p.timer_threads or door_ports(s.ctx.bundle, p) for p in s.alive):
        return None
    return g


def pipe_full_in_dead_chain(s: Situation) -> Optional[Decision]:
    """Every chain of waits ends where nothing can end it, and the cycle is a writer blocked
    on a full pipe whose reader waits on the writer: told as that picture, which names what to
    fix, rather than as a bare cycle."""
    if _dead_chains(s) is None:
        return None
    return pipe_full(s)


def chains_never_end(s: Situation) -> Optional[Decision]:
    """Nothing works, and every chain of waits from the participants ends where nothing can
    ever end it: a stopped or dead process, or a cycle (the wait-for graph's deadlock, what
    the rules above name by its picture). A listening port or a timer elsewhere does not
    make such a job idle: no client and no timer is on any of its chains."""
    g = _dead_chains(s)
    if g is None:
        return None
    by_key = {n.key: n for n in g.nodes}
    ends = [by_key[k] for k in g.ends if k in by_key and by_key[k].pid]
    summary = words.chains_never_end(g.chains)
    suspects = [
        Suspect(pid=n.pid, rank=n.rank, host=n.host, reason=words.chain_end_reason(n))
        for n in ends[:4]
    ]
    # A cycle's edges are partly inferred (who holds a queue's other end is a guess without
    # fd inodes): less sure than a stopped or dead end.
    confidence = 0.6 if "cycle" in g.reasons else 0.75
    return decided("deadlocked", confidence, summary, suspects)


def timer_cannot_end(s: Situation) -> Optional[Decision]:
    """A poller's timer wakes cannot end the wait (``futile_poll``): it never reads the full
    pipe its child blocks on, or every running thread beside a lock's waiters only polls."""
    if s.progressing or s.workers:
        return None
    found = pipe_polled(s.ctx.bundle, writers_of(s.alive), s.ctx.procs, s.graph)
    for p in s.alive if found is None else ():
        found = lock_polled(s.ctx.bundle, p)
        if found is not None:
            break
    if found is None:
        return None
    p = found.poller
    reason = words_polls.futile_reason(found)
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
    # Held far longer than its poller's timer: time, too, says no wake will end it.
    sure = 0.8 if stuck_by_age(found) else 0.7
    return decided("deadlocked", sure, words_polls.futile_poll(found), suspects)


def wakes_only_itself(s: Situation) -> Optional[Decision]:
    """Only its own timers wake the job, and each wake only logs that it lives
    (``self_wake``): what it waits on, only its own code could set."""
    if s.progressing or s.working or s.ports:
        return None
    found = self_wake(s.ctx.bundle, s.alive, s.ctx.logs)
    if found is None:
        return None
    p = found.proc
    reason = words_polls.self_wake_reason(found)
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
    return decided("deadlocked", 0.65, words_polls.self_wake(found), suspects)


def pipe_full(s: Situation) -> Optional[Decision]:
    """Writers block on a full pipe whose reader stopped reading."""
    writers = writers_of(s.alive)
    if not (writers and len(writers) * 2 >= len(s.alive)):
        return None
    summary, suspects = pipe_story(writers, s.ctx.procs)
    return decided("deadlocked", 0.6, summary, suspects)


def chains_end_at_doors(s: Situation) -> Optional[Decision]:
    """Nothing moves, none of the participants waits on a door of its own, but every chain of
    their waits ends at a process that does - a helper a rank waits for, sleeping on a timer
    (polling for a file, a lock, a host); a server behind a child. Read alone, the ranks'
    waits said "nothing can wake it"; the chain names who can, and where to look."""
    g = s.graph
    if g is None or graph_state(g) != frozenset({"idle"}):
        return None
    by_key = {n.key: n for n in g.nodes}
    ends = [by_key[k] for k in g.ends if k in by_key and by_key[k].pid]
    if not ends:
        return None
    end = ends[0]
    summary = words.chains_end_at_doors(g.chains[0], end)
    suspects = [
        Suspect(pid=n.pid, rank=n.rank, host=n.host, reason=words.chain_end_reason(n))
        for n in ends[:4]
    ]
    return decided("idle", 0.5, summary, suspects)


def peer_unreachable(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a participant blocks on a TCP connection whose other end
    acknowledges nothing (``dead_link``): its host is down or the link cut - the answer it
    waits for never comes, whoever holds that end."""
    if s.progressing or s.workers or not s.alive:
        return None
    found = dead_links(s.ctx.bundle, s.alive)
    if not found:
        return None
    suspects = [
        Suspect(pid=d.proc.pid, rank=d.proc.rank, host=d.proc.key[0],
                reason=words_quiet.dead_link_reason(d))
        for d in found[:4]
    ]  # fmt: skip
    return decided("deadlocked", 0.8, words_quiet.dead_link(found), suspects)


def waits_on_quiet_peer(s: Situation) -> Optional[Decision]:
    """Every participant blocks reading a TCP socket from a live process outside the job that
    owes it nothing (``quiet_peer``): a subscriber on a quiet feed, not a deadlock."""
    if s.progressing or s.workers or not s.alive:
        return None
    found = quiet_peers(s.ctx.bundle, s.alive, s.graph)
    if not found:
        return None
    suspects = [
        Suspect(pid=q.peer.pid, host=q.peer.host, reason=words_quiet.quiet_peer_reason(q))
        for q in found[:4]
    ]
    return decided("idle", 0.55, words_quiet.quiet_peer(found), suspects)


def reply_owed(s: Situation) -> Optional[Decision]:
    """Every participant blocks reading the reply to a request it sent on a TCP connection
    whose other end is one live process outside the job (``quiet_peer.owing_peers``): that
    process, not the job, holds the wait - named, with the request's age from tcp_info. A
    peer that burns CPU over the capture computes the reply (slow); one that does not owes
    it and does nothing about it (deadlocked, the peer named: the job is not the cause)."""
    if s.progressing or s.workers or not s.alive:
        return None
    found = owing_peers(s.ctx.bundle, s.alive, s.graph)
    if not found:
        return None
    # The peer works (its CPU rose over the capture): it computes the reply - slow.
    works = all(q.peer_cpu_pct is not None and q.peer_cpu_pct >= COMPUTE_PCT for q in found)
    state: VerdictState = "slow" if works else "deadlocked"
    suspects = [
        Suspect(pid=q.peer.pid, host=q.peer.host, reason=words_quiet.reply_owed_reason(q))
        for q in found[:4]
    ]
    return decided(state, 0.6, words_quiet.reply_owed(found, state), suspects)


def nothing_can_wake(s: Situation) -> Optional[Decision]:
    """Nothing moves and nothing outside can wake it: waiting on each other, or on a peer that
    never answers (the last rule: it always applies)."""
    kinds = {p.main_wait.kind for p in s.alive if p.main_wait}
    summary = words.nothing_can_wake(s.alive, kinds)
    # The ends of the chains of waits, not the first few processes: who the others wait on.
    ends = set(s.graph.ends) if s.graph is not None else set()
    blamed = [p for p in s.alive if node_key(p) in ends] or s.alive
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=words.blocked_in_reason(p))
        for p in blamed[:4]
    ]
    return decided("deadlocked", 0.5, summary, suspects)
