"""Doors: waits something outside the job can end - a server handing work to its ranks,
requests that wait unanswered, a port, stdin or a timer."""

from __future__ import annotations

from typing import List, Optional, Tuple

from diag.model import Suspect, WaitGraph
from diag.verdict.features import ProcSignals
from diag.verdict.graph_nodes import node_key
from diag.verdict.long_poll import long_poll, sleep_wakes_in, workers_sleep
from diag.verdict.participants import (
    door,
    is_helper,
    receives_work,
    serves,
)
from diag.verdict.readiness import not_ready
from diag.verdict.rules import words_doors, words_files, words_longpoll, words_polls
from diag.verdict.rules.base import Decision, decided
from diag.verdict.self_wake import holds_a_waiter, wakes_only_itself
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.waits import PEER, SERVE, SLEEP, STDIN, runs_coroutines
from diag.verdict.work import polls_for_work


def idle_if_ready(s: Situation, confidence: float, summary: str) -> Decision:
    """An idle decision - unless the job shows a start-up phase and no sign it is ready (no
    ready line, no request answered): then it is still starting, between two steps of its
    start-up, and "healthy, waiting for work" would send a user's requests into it."""
    phases = not_ready(s.ctx.bundle, s.ctx.procs, s.startup.phases)
    if not phases:
        return decided("idle", confidence, summary)
    summary = words_doors.still_starting(s.alive)
    return decided("slow", 0.5, summary)


def server_feeds_ranks(s: Situation) -> Optional[Decision]:
    """A rank serves a port and the others wait for it to hand them work (a request
    broadcast): a ready server, not a diverged rank."""
    servers = [p for p in s.alive if p.main_family != PEER]
    if not s.peer_waiters or not all(receives_work(p) for p in s.peer_waiters):
        return None
    if not servers:
        # Every rank waits for a broadcast from a process that is no rank (vLLM's EngineCore
        # feeds its TP workers through a shared-memory queue): that feeder decides. Waiting
        # for requests itself, on a job with a port open, it is a ready server.
        alive_keys = {p.key for p in s.alive}
        feeders = [
            p
            for p in s.ctx.procs
            if not p.dead
            and p.key not in alive_keys
            and p.main_family == SERVE
            and not is_helper(p)
        ]
        if not (feeders and s.ports):
            return None
        summary = words_doors.fed_by_server(s.peer_waiters, feeders, s.ports)
        return idle_if_ready(s, 0.6, summary)
    # A rank that polls for work (an idle scheduler spinning on nothing to receive) is the
    # server's side too: the front end's port brings its requests.
    pollers = [p for p in servers if polls_for_work(p)]
    if not all(serves(p, s.ports) or (p in pollers and s.ports) for p in servers):
        return None
    if pollers:
        summary = words_doors.server_polls(s.ports, s.alive, pollers)
        return idle_if_ready(s, 0.6, summary)
    summary = words_doors.server_serves(servers, s.ports, s.alive)
    return idle_if_ready(s, 0.6, summary)


def requests_unanswered(s: Situation) -> Optional[Decision]:
    """Clients wait: requests from outside the job arrived before the capture began and got
    no byte of answer during it, while nothing in the server moves. Its event loop still
    accepts (a listening port, epoll) - that is what made it look idle."""
    stuck = [p for p in s.ctx.procs if not p.dead and p.stale_requests]
    if not stuck:
        return None
    stuck.sort(key=lambda p: -p.stale_requests)
    p = stuck[0]
    total = sum(q.stale_requests for q in stuck)
    suspects = [
        Suspect(
            pid=q.pid,
            rank=q.rank,
            host=q.key[0],
            reason=words_doors.unanswered_reason(q),
        )
        for q in stuck[:4]
    ]
    if p.main_family == SLEEP:
        # The thread that would answer sleeps in a handler: a blocking call on the event loop
        # (time.sleep in an async def) - every client waits until it returns, then it goes on.
        stack = s.ctx.bundle.stacks.get(p.main_stack_ids[-1] or "") if p.main_stack_ids else None
        on_loop = stack is not None and runs_coroutines(stack.frames)
        summary = words_doors.handler_sleeps(p, total, on_loop)
        return decided("slow", 0.55, summary, suspects)
    polled = long_poll(s.ctx.bundle, p)
    if polled is not None:  # every handler waits with a timeout: a long poll, not a wedge
        return decided("idle", 0.55, words_longpoll.long_poll(p, total, polled), [])
    asleep = workers_sleep(s.ctx.bundle, p)
    if asleep is not None:  # its handlers wait on pool workers asleep on a timer: it goes on
        return decided("slow", 0.6, words_longpoll.workers_sleep(p, total, asleep), suspects)
    cycle = _cycle_through(s.graph, p)
    if cycle:  # its handler waits on a service that waits on it: no timeout ends that
        return decided("deadlocked", 0.8, words_doors.request_cycle(p, total, cycle), suspects)
    summary = words_doors.requests_unanswered(p, total)
    return decided("deadlocked", 0.65, summary, suspects)


def _cycle_through(graph: Optional[WaitGraph], p: ProcSignals) -> List[str]:
    """The labels of the wait-for cycle ``p`` is in (its handler calls a service of the job
    that calls back into it), or none."""
    if graph is None:
        return []
    key = node_key(p)
    labels = {n.key: n.label for n in graph.nodes}
    for reason, members in zip(graph.reasons, graph.line_ends):
        if reason == "cycle" and key in members:
            return [labels.get(k, k) for k in members]
    return []


def waits_for_outside(s: Situation) -> Optional[Decision]:
    """Every wait is one something outside can end: a listening port, stdin, a timer."""
    doors = [p for p in s.alive if door(p, s.ports) or p.timer_threads]
    if not (s.ports or doors):
        return None
    on_stdin = [p for p in doors if p.main_wait and p.main_wait.kind == STDIN]
    # Waiting for a signal is told as such only when no timer of the job may act instead.
    on_signal = [p for p in doors if p.main_wait and p.main_wait.signal]
    if any(p.timer_threads for p in s.alive) or any(
        p.main_wait and p.main_wait.kind == SLEEP and not p.main_wait.signal for p in doors
    ):
        on_signal = []
    told = _file_lock_in_job(s)
    if told is not None:
        summary, blame = told
        decision = idle_if_ready(s, 0.55, summary)
        return decision if decision.state != "idle" else decided("idle", 0.55, summary, blame)
    summary = words_doors.waits_for_outside(s.alive, s.ports, on_stdin, on_signal)
    if not s.ports:
        closed = [p for p in s.alive if wakes_only_itself(s.ctx.bundle, p)]
        if closed:  # its timers are its only door: say what would tell idle from stuck
            summary += words_polls.only_own_timers(
                closed[0], holds_a_waiter(s.ctx.bundle, closed[0])
            )
    return idle_if_ready(s, 0.8 if s.ports else 0.6, summary)


def _file_lock_in_job(s: Situation) -> Optional[Tuple[str, List[Suspect]]]:
    """A process waits to take a file lock that another process of the job holds while that
    one waits on a door itself (a timer, a port): it goes on when the holder releases, so the
    holder - not the waiter, nor "a timer" - is the one to name. A polling acquirer
    (``filelock``) whose holder was not recorded is told as a lock wait too, with how to find
    the holder. (A holder outside the job, or stuck, was the rules above.)"""
    waits = s.file_lock_waits
    for w in waits:
        for h in w.holders:
            q = h.proc
            if q is not None and (door(q, s.ports) or q.timer_threads):
                reason = words_files.file_lock_reason(w)
                blame = [Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason=reason)]
                wakes = sleep_wakes_in(s.ctx.bundle, q)
                return words_files.file_lock_held_in_job(w, h, q, wakes), blame
    polled = [w for w in waits if w.polled and not w.holders]
    if polled and not s.ports:
        return words_files.polled_lock_unseen(polled[0]), []
    return None
