"""The rules' words for the doors: a server that feeds its ranks or is still starting, requests
unanswered (a handler asleep, a request cycle), and waits something outside the job can end.
Apart from ``words`` only to keep each module short; the same conventions hold.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.features import ProcSignals
from diag.verdict.wording import group_by_wait, verb, waits_phrase, where, who
from diag.verdict.work import poll_note

# --- doors ------------------------------------------------------------------------------------


def _ports(ports: Sequence[int], most: int) -> str:
    """ ":8000, :8001" - the first ``most`` ports."""
    return ", ".join(f":{port}" for port in ports[:most])


def still_starting(alive: Sequence[ProcSignals]) -> str:
    """An idle door rule's job that shows a start-up phase and no sign it is ready."""
    return (
        "still starting, not ready yet (no ready line in its log, no request answered)"
        f" - between two start-up steps nothing moves: {waits_phrase(group_by_wait(alive)[:3])}"
        "; not idle: let the start-up finish before sending it work, don't kill it"
    )


def fed_by_server(
    waiters: Sequence[ProcSignals], feeders: Sequence[ProcSignals], ports: Sequence[int]
) -> str:
    """``server_feeds_ranks``: the ranks wait for work from ``feeders``, which are no rank."""
    return (
        f"{who(waiters)} wait for work in {where(waiters[0])}, "
        f"handed out by {who(feeders[:2])}, which {verb(feeders, 'waits', 'wait')} for "
        f"requests in {where(feeders[0])} ({_ports(ports, 4)} listening) - healthy, waiting "
        "for requests"
    )


def server_polls(
    ports: Sequence[int], alive: Sequence[ProcSignals], pollers: Sequence[ProcSignals]
) -> str:
    """``server_feeds_ranks``: ranks wait for server ranks, ``pollers`` among them polling
    for work behind the job's ``ports`` (which of them busy-polls is noted)."""
    return (
        f"{_ports(ports, 4)} listening; {waits_phrase(group_by_wait(alive)[:3])}"
        f"{poll_note(pollers)} - healthy, waiting for requests"
    )


def server_serves(
    servers: Sequence[ProcSignals], ports: Sequence[int], alive: Sequence[ProcSignals]
) -> str:
    """``server_feeds_ranks``: ``servers`` serve ``ports`` and the other ranks wait for them."""
    return (
        f"{who(servers)} {verb(servers, 'serves', 'serve')} {_ports(ports, 4)} and "
        f"{waits_phrase(group_by_wait(alive)[:3])} - healthy, waiting for requests"
    )


def unanswered_reason(p: ProcSignals) -> str:
    """A suspect of ``requests_unanswered``: how many requests wait on it, and how long."""
    return f"{p.stale_requests} request(s) unanswered for {p.stale_age_s:.0f}+ s"


def handler_sleeps(p: ProcSignals, total: int, on_loop: bool = True) -> str:
    """``requests_unanswered``: requests wait on a thread asleep in a handler of ``p``. The
    advice is the worker's: under an event loop of coroutines (``on_loop``) the call stalls
    every connection - move it off the loop; in a worker that serves one request at a time (a
    sync worker, no loop to yield to) it holds that worker and the clients queued on it."""
    opening = (
        f"{total} request(s) to {_ports(p.stale_ports, 3)} unanswered for "
        f"{p.stale_age_s:.0f}+ s because the thread that answers them sleeps in {where(p)} "
        f"({who([p])})"
    )
    if not on_loop:
        return (
            f"{opening} - a worker that serves one request at a time (no event loop on its "
            "stack: a sync worker) holds every client queued on it until the call returns. "
            "Don't restart it: give the call a timeout, or serve with more workers or "
            "threads (or a worker class that yields while it waits)"
        )
    return (
        f"{opening} - a blocking call inside a handler holds every client until it "
        "returns. Don't restart it: move the call off the event loop (`await asyncio.sleep`, "
        "`run_in_executor`)"
    )


def _unanswered(p: ProcSignals, total: int) -> str:
    """ "3 request(s) to :8000 unanswered for 12+ s" - how every unanswered-requests sentence
    opens."""
    return f"{total} request(s) to {_ports(p.stale_ports, 3)} unanswered for {p.stale_age_s:.0f}+ s"


def requests_unanswered(p: ProcSignals, total: int) -> str:
    """``requests_unanswered``: requests wait and nothing in the server ``p`` moves."""
    return (
        f"{_unanswered(p, total)} while nothing in the server moves "
        f"({who([p])} waits in {where(p)}) - a handler waits on something that never comes "
        "(an await, a lock, a "
        f"dead backend); clients wait. See the handlers with `py-spy dump --pid {p.pid}`, "
        "then restart it (unless that endpoint is a long poll)"
    )


def request_cycle(p: ProcSignals, total: int, members: Sequence[str]) -> str:
    """``requests_unanswered`` when the server's handler is in a wait-for cycle with another
    process of the job (its handler calls a service that calls back into it)."""
    among = ", ".join(members[:4]) + (f" and {len(members) - 4} more" if len(members) > 4 else "")
    return (
        f"{_unanswered(p, total)}, and the handler is in a cycle of requests among "
        f"{among} - "
        "each waits for another's answer, and only a timeout or a kill ends it. Restart it; the "
        "fix is in the code: a handler must not call a service that calls back into it "
        "(or serve that callback from another thread)"
    )


def _outside_tail(
    ports: Sequence[int], on_stdin: Sequence[ProcSignals], on_signal: Sequence[ProcSignals]
) -> str:
    if ports:
        return "healthy, waiting for work"
    if on_stdin:
        return (
            f"{who(on_stdin)} {verb(on_stdin, 'reads', 'read')} stdin (fd 0): it waits for "
            "input someone must type or pipe in (a prompt?) - answer it, or run the job "
            "with stdin closed (< /dev/null)"
        )
    if on_signal:
        return signal_tail(on_signal)
    # A timer wakes it (a poll, a heartbeat, a retry with backoff): the stacks cannot tell
    # "waits for work" from "retries what never comes".
    return (
        "no port to serve, it wakes on a timer (polling, a heartbeat, or retrying "
        "something outside the job): healthy if it waits for work, stuck if what it "
        "polls for never comes - its log says which"
    )


def signal_tail(on_signal: Sequence[ProcSignals]) -> str:
    """``waits_for_outside``: the main threads of ``on_signal`` wait for a signal."""
    p = on_signal[0]
    return (
        f"{who(on_signal)} {verb(on_signal, 'waits', 'wait')} for a signal (`signal.pause()`, "
        "`sigwait`, `sigsuspend`), not on a timer: nothing inside acts until a `kill` comes - "
        "healthy if something is meant to signal it (a supervisor's SIGTERM, a `kill -USR1` "
        f"to reload), stuck if nothing will; `grep SigCgt /proc/{p.pid}/status` shows the "
        "signals it handles"
    )


def waits_for_outside(
    alive: Sequence[ProcSignals],
    ports: Sequence[int],
    on_stdin: Sequence[ProcSignals],
    on_signal: Sequence[ProcSignals] = (),
) -> str:
    """``waits_for_outside``: every wait is one a port, stdin (``on_stdin`` read it), a
    signal (``on_signal`` wait for one) or a timer can end; what ends it, and what to do,
    follows the waits."""
    port_text = f", {_ports(ports, 4)} listening" if ports else ""
    return (
        f"nothing moves, no rank waits on a peer{port_text}; "
        f"{waits_phrase(group_by_wait(alive)[:3])}{poll_note(alive)} - "
        f"{_outside_tail(ports, on_stdin, on_signal)}"
    )
