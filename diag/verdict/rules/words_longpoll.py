"""The rules' words for requests held open by a long poll (``long_poll``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.features import ProcSignals
from diag.verdict.long_poll import LongPoll, SleepingWorkers


def long_poll(p: ProcSignals, total: int, lp: LongPoll) -> str:
    """``requests_unanswered``: the requests wait in a long poll that ends by itself."""
    ports = ", ".join(f":{port}" for port in p.stale_ports[:3])
    return (
        f"{total} request(s) to {ports} held open {p.stale_age_s:.0f}+ s by pid {p.pid}, "
        f"whose {lp.threads} handler thread(s) wait in {lp.where} with a timeout - the last "
        f"wakes by itself in {lp.wakes_in_s:.0f} s: a long poll, answered when its event comes "
        "or its timeout fires. Healthy if nothing happened to report; if the clients should "
        f"have had an answer by now, see what the handlers wait for (`py-spy dump --pid {p.pid}`)"
    )


def workers_sleep(p: ProcSignals, total: int, sw: SleepingWorkers) -> str:
    """``requests_unanswered``: the requests wait on pool workers asleep inside their tasks."""
    ports = ", ".join(f":{port}" for port in p.stale_ports[:3])
    return (
        f"{total} request(s) to {ports} unanswered for {p.stale_age_s:.0f}+ s: {sw.handlers} "
        f"handler thread(s) of pid {p.pid} wait for results from its {sw.sleepers} busy "
        f"worker thread(s), which all sleep in {sw.where} - the last wakes by itself in "
        f"{sw.wakes_in_s:.0f} s. The pool is full of slow calls and new requests queue behind "
        "them. Don't restart it: it goes on when they wake; give the call a shorter timeout or "
        "back-off, or the pool more workers"
    )
