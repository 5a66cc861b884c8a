"""The rules' words: every sentence a rule of the table gives, in one place.

A rule decides - which state, how sure, whom it blames - and takes its sentence from here: a
verdict summary (opening with its state, as ``base.decided`` checks), a suspect's reason, a
table line. Each function takes the values a sentence names (processes, pids, ports, counts,
states) and returns the sentence; its docstring says which rule says it and when. Phrases
shared with the longer stories (who, where, what a group waits in) come from
``diag.verdict.wording``; the stories themselves live in ``stories`` and ``pipe_story``.

Sections follow the table's families: deaths, motion, graph, locks, peers, doors, then the
table's own lines (why a row outranks the rows after it).

May import ``diag.model`` and ``diag.verdict`` only (never a family module: they import this).
"""

from __future__ import annotations

from typing import AbstractSet, Optional, Sequence

from diag.model import WaitNode
from diag.verdict.features import ProcSignals
from diag.verdict.log_deaths import LogDeath
from diag.verdict.wording import group_by_wait, size, waits_phrase, where, who

# --- deaths -----------------------------------------------------------------------------------


def rank_gone_in_log(death: LogDeath, survivors: Sequence[ProcSignals]) -> str:
    """``log_names_dead_rank``: the log says rank N died and no live process is rank N."""
    return (
        f"deadlocked: the log says rank {death.rank} died ({death.path}: `{death.line[:160]}`) "
        f"and no process of the job is rank {death.rank} any more ({who(survivors)} still "
        "there) - the other ranks can never finish their collectives with it; read the log "
        "above that line, restart the job"
    )


def death_in_log(path: str, line: str, alive: Sequence[ProcSignals]) -> str:
    """``log_reports_death``: nothing moves and the log says a process of the job died (``line``
    quoted, whitespace folded); what the survivors wait in follows."""
    quoted = " ".join(line.split())[:160]
    waits = waits_phrase(group_by_wait(alive)[:2])
    return (
        f"deadlocked: the log says a process of the job died ({path}: `{quoted}`) and "
        f"nothing moves{f' ({waits})' if waits else ''} - the survivors wait for it; read "
        "the log above that line, restart the job"
    )


# --- motion -----------------------------------------------------------------------------------


def answers_requests(servers: Sequence[ProcSignals]) -> str:
    """``answers_requests``: bytes flow to the servers' listening ports (the first three)."""
    parts = []
    for p in servers[:3]:
        ports = ", ".join(f":{port}" for port in p.listen_ports[:3])
        rate = p.served_delta_bytes / p.window_s if p.window_s > 0 else 0.0
        parts.append(
            f"{p.name} answers requests on {ports} ({size(p.served_delta_bytes)} over "
            f"{p.served_conns} client connection(s), {size(rate)}/s)"
        )
    return "progressing: " + "; ".join(parts) + " - no log line needed to see it"


# --- graph ------------------------------------------------------------------------------------

OWN_SERVER_REASON = "waits for its own server"


def calls_itself(p: ProcSignals, evidence: str) -> str:
    """``calls_itself``: a thread of ``p`` waits for an answer from ``p``'s own listener
    (``evidence``: the graph's tcp self-edge, "reads ... whose other end ...")."""
    return (
        f"deadlocked: {p.name} waits for its own server - in {where(p)} it {evidence}; "
        "the thread that would accept and answer is the one waiting, so nothing ends it. "
        "Restart it; the fix: no blocking call to its own port from its event loop "
        "(await an async client, or call the handler's function directly)"
    )


def pipe_outlives_child(p: ProcSignals, child: Optional[WaitNode], holder: WaitNode) -> str:
    """``pipe_outlives_child``: ``p`` waits for EOF from its exited ``child`` (None: not in
    the graph), but ``holder`` - started in the background - still holds the write end."""
    kid = f" (pid {child.pid} {child.label.split()[-1]})" if child else ""
    return (
        f"deadlocked: {p.name} waits in {where(p)} for EOF on its child's output, but the "
        f"child{kid} has exited and {holder.label} still holds the write end - a process "
        "it started in the background inherited the pipe, and the call returns only when "
        f"that one exits. Kill pid {holder.pid} (or send the background command's output "
        "elsewhere: `cmd > log 2>&1 &`)"
    )


def pipe_holder_reason(evidence: str) -> str:
    """The suspect of ``pipe_outlives_child``: the holder of the pipe, with the edge's evidence."""
    return f"holds the pipe: {evidence}"[:200]


def stopped_outsider(line: str, n: WaitNode) -> str:
    """``waits_on_stopped_outsider``: a chain of waits (``line``) ends at ``n``, outside the
    job and stopped (the line ends in its ``kill -CONT``) or a zombie."""
    act = ": restart what it served (its parent must reap it)" if n.state == "zombie" else ""
    return (
        f"deadlocked: {line} - nothing in the job moves until pid {n.pid} does{act} "
        "(it is outside the job; killing the job would not help)"
    )


def outsider_reason(n: WaitNode) -> str:
    """The suspect of ``waits_on_stopped_outsider``: the process outside the job."""
    return f"{n.state} outside the job: {n.detail}"


def chains_never_end(chains: Sequence[str]) -> str:
    """``chains_never_end``: every chain of waits ends stopped, dead or in a cycle (the first
    two chains' lines follow)."""
    return (
        "deadlocked: nothing moves and every chain of waits ends where nothing can end it - "
        + "; ".join(chains[:2])
    )


def chain_end_reason(n: WaitNode) -> str:
    """A suspect at the end of a chain of waits: its state and what it does there."""
    return f"{n.state}: {n.detail}"[:200]


def chains_end_at_doors(chain: str, end: WaitNode) -> str:
    """``chains_end_at_doors``: every chain (``chain``, the first) ends at a process a timer,
    a request or input can wake (``end``)."""
    return (
        f"idle: nothing moves, and every chain of waits ends at a process something outside "
        f"can wake - {chain}. Healthy if what {end.label} waits for comes (a timer's "
        f"next poll, a request, input); stuck if it never does: see what it waits for "
        f"(`py-spy dump --pid {end.pid}`) before killing anything"
    )


# What a kind of wait among the stuck adds to "nothing can wake it", in this order.
_KIND_NOTES = (
    ("write-full", " (a write blocks on a full pipe or socket: its reader stopped reading)"),
    ("fifo-open", " (opening a named pipe (fifo) waits for a process to open its other end)"),
    ("disk", " (state D: an uninterruptible kernel wait - storage or NFS not answering)"),
)


def nothing_can_wake(alive: Sequence[ProcSignals], kinds: AbstractSet[Optional[str]]) -> str:
    """``nothing_can_wake``, the table's last rule: what the live processes wait in, and a
    note per kind of wait among ``kinds`` (their main threads') that names its cause."""
    summary = (
        f"deadlocked: nothing moves and nothing can wake it by itself (no listening port, no "
        f"timer, no wakeups): {waits_phrase(group_by_wait(alive)[:3])} - waiting on each "
        "other, or on a peer that never answers"
    )
    return summary + "".join(note for kind, note in _KIND_NOTES if kind in kinds)


def blocked_in_reason(p: ProcSignals) -> str:
    """A suspect of ``nothing_can_wake``: where it waits."""
    return f"blocked in {where(p)}"
