"""Doors: waits something outside the job can end - a server handing work to its ranks,
requests that wait unanswered, a port, stdin or a timer."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect
from diag.verdict.participants import (
    door,
    is_helper,
    receives_work,
    serves,
)
from diag.verdict.readiness import not_ready
from diag.verdict.rules.base import Decision, decided
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.waits import PEER, SERVE, SLEEP, STDIN
from diag.verdict.wording import group_by_wait, verb, waits_phrase, where, who
from diag.verdict.work import poll_note, polls_for_work


def idle_if_ready(s: Situation, confidence: float, summary: str) -> Decision:
    """An idle decision - unless the job shows a start-up phase and no sign it is ready (no
    ready line, no request answered): then it is still starting, between two steps of its
    start-up, and "healthy, waiting for work" would send a user's requests into it."""
    phases = not_ready(s.ctx.bundle, s.ctx.procs)
    if not phases:
        return decided("idle", confidence, summary)
    summary = (
        "slow: still starting, not ready yet (no ready line in its log, no request answered)"
        f" - between two start-up steps nothing moves: {waits_phrase(group_by_wait(s.alive)[:3])}"
        "; not idle: let the start-up finish before sending it work, don't kill it"
    )
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
        ports = ", ".join(":" + str(p) for p in s.ports[:4])
        summary = (
            f"idle: {who(s.peer_waiters)} wait for work in {where(s.peer_waiters[0])}, "
            f"handed out by {who(feeders[:2])}, which {verb(feeders, 'waits', 'wait')} for "
            f"requests in {where(feeders[0])} ({ports} listening) - healthy, waiting for requests"
        )
        return idle_if_ready(s, 0.6, summary)
    # A rank that polls for work (an idle scheduler spinning on nothing to receive) is the
    # server's side too: the front end's port brings its requests.
    pollers = [p for p in servers if polls_for_work(p)]
    if not all(serves(p, s.ports) or (p in pollers and s.ports) for p in servers):
        return None
    groups = group_by_wait(s.alive)
    if pollers:
        summary = (
            f"idle: {', '.join(':' + str(p) for p in s.ports[:4])} listening; "
            f"{waits_phrase(groups[:3])}{poll_note(pollers)} - healthy, waiting for requests"
        )
        return idle_if_ready(s, 0.6, summary)
    summary = (
        f"idle: {who(servers)} {verb(servers, 'serves', 'serve')} "
        f"{', '.join(':' + str(p) for p in s.ports[:4])} and {waits_phrase(groups[:3])} - "
        "healthy, waiting for requests"
    )
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
    ports = ", ".join(f":{port}" for port in p.stale_ports[:3])
    total = sum(q.stale_requests for q in stuck)
    suspects = [
        Suspect(
            pid=q.pid,
            rank=q.rank,
            host=q.key[0],
            reason=f"{q.stale_requests} request(s) unanswered for {q.stale_age_s:.0f}+ s",
        )
        for q in stuck[:4]
    ]
    if p.main_family == SLEEP:
        # The thread that would answer sleeps in a handler: a blocking call on the event loop
        # (time.sleep in an async def) - every client waits until it returns, then it goes on.
        summary = (
            f"slow: {total} request(s) to {ports} unanswered for {p.stale_age_s:.0f}+ s because "
            f"the thread that answers them sleeps in {where(p)} ({who([p])}) - a blocking "
            "call inside a handler holds every client until it returns. Don't restart it: "
            "move the call off the event loop (`await asyncio.sleep`, `run_in_executor`)"
        )
        return decided("slow", 0.55, summary, suspects)
    summary = (
        f"deadlocked: {total} request(s) to {ports} unanswered for {p.stale_age_s:.0f}+ s "
        f"while nothing in the server moves ({who([p])} waits in {where(p)}) - a handler "
        "waits on something that never comes (an await, a lock, a dead backend); clients "
        f"wait. See the handlers with `py-spy dump --pid {p.pid}`, then restart it "
        "(unless that endpoint is a long poll)"
    )
    return decided("deadlocked", 0.65, summary, suspects)


def waits_for_outside(s: Situation) -> Optional[Decision]:
    """Every wait is one something outside can end: a listening port, stdin, a timer."""
    doors = [p for p in s.alive if door(p, s.ports) or p.timer_threads]
    if not (s.ports or doors):
        return None
    groups = group_by_wait(s.alive)
    port_text = f", {', '.join(':' + str(p) for p in s.ports[:4])} listening" if s.ports else ""
    # No port: input on stdin or a timer wakes it (a poll, a heartbeat, a retry with
    # backoff). The stacks cannot tell "waits for work" from "retries what never comes".
    on_stdin = [p for p in doors if p.main_wait and p.main_wait.kind == STDIN]
    tail = "healthy, waiting for work"
    if on_stdin and not s.ports:
        tail = (
            f"{who(on_stdin)} {verb(on_stdin, 'reads', 'read')} stdin (fd 0): it waits for "
            "input someone must type or pipe in (a prompt?) - answer it, or run the job "
            "with stdin closed (< /dev/null)"
        )
    elif not s.ports:
        tail = (
            "no port to serve, it wakes on a timer (polling, a heartbeat, or retrying "
            "something outside the job): healthy if it waits for work, stuck if what it "
            "polls for never comes - its log says which"
        )
    summary = (
        f"idle: nothing moves, no rank waits on a peer{port_text}; "
        f"{waits_phrase(groups[:3])}{poll_note(s.alive)} - {tail}"
    )
    return idle_if_ready(s, 0.8 if s.ports else 0.6, summary)
