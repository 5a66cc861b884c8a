"""The wait-for graph read as a verdict: the state its chains alone give (checked against the
rules on every recorded capture), the chain each suspect gets, and the warnings a graph adds to
a state that does not say them (part of an idle job that can never wake)."""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import Suspect, WaitGraph, WaitNode
from diag.verdict.graph_nodes import (
    OUT_CLIENTS,
    OUT_NETWORK,
    OUT_STDIN,
    OUT_STORE,
    OUT_TIMER,
    OUTSIDE_JOB,
    is_outside,
)
from diag.vocab import VerdictState

# How a chain of waits ends when nothing can ever end it: a stopped or dead process, or a
# cycle of processes waiting on each other. ("lock"/"self": only the process's own threads
# can end the wait - one of them may be sleeping on a timer; the lock rules judge those.)
DEAD_ENDS = frozenset({"stopped", "dead", "cycle"})


def _chain_of(key: str, graph: WaitGraph) -> str:
    """The first chain line that ends at the node ``key`` (or has it in its cycle)."""
    return next((line for line, at in zip(graph.chains, graph.line_ends) if key in at), "")


_DEADLOCKED: FrozenSet[VerdictState] = frozenset({"deadlocked"})
_WORKING: FrozenSet[VerdictState] = frozenset({"slow", "progressing"})
_IDLE: FrozenSet[VerdictState] = frozenset({"idle"})
_SLOW: FrozenSet[VerdictState] = frozenset({"slow"})


def graph_state(graph: Optional[WaitGraph]) -> Optional[FrozenSet[VerdictState]]:
    """The state the wait-for graph alone gives, for checking the rules against it (a test
    asserts they agree on every recorded and scenario capture, exceptions named):

    - a chain ends at a stopped process, or at a dead one someone waits on other than by
      waitpid (or a dead rank) -> deadlocked: it outranks the rest, as in the rules;
    - else one ends in work (computing, its output moving, disk I/O) -> "slow|progressing";
    - else requests from outside wait unanswered on a chain -> deadlocked (slow when the
      process holding them sleeps on a timer: a blocking call in a handler);
    - else every end waits on a door that will open - requests, a timer, stdin -> idle;
    - else (cycles, locks, a peer not in the capture that never answers) -> deadlocked.
    None without chains."""
    if graph is None or not graph.reasons:
        return None
    by_key = {n.key: n for n in graph.nodes}
    doors: Dict[str, Set[str]] = {}
    for e in graph.edges:
        if is_outside(e.dst):
            doors.setdefault(e.src, set()).add(e.dst)
    dead, work, stopped_aside = _ends(graph, by_key)
    if dead:
        return _DEADLOCKED
    if work:
        return _WORKING
    if any(e.kind == "flow" for e in graph.edges):
        return _SLOW  # a framework paused itself until a party acts (flow_control)
    if stopped_aside:
        return _DEADLOCKED  # nothing works: a stopped process is all there is to see
    return _doors_state(graph, by_key, doors)


def _ends(graph: WaitGraph, by_key: Dict[str, WaitNode]) -> Tuple[bool, bool, bool]:
    """Whether a chain ends where nothing can end it (a stopped process someone waits on or a
    stopped rank, a dead one waited on other than by waitpid, a dead rank), whether one ends
    in work, and whether a stopped process nobody waits on is there (a sidecar: it owes the
    job nothing while the job works - as the rule ``rank_stopped`` reads it)."""
    # A child's exit ends its parent's waitpid: only other waits on a dead process (a peer,
    # a pipe, a result) are waits it will never answer.
    waited_on = {e.dst for e in graph.edges if e.kind != "child"}
    waited_into = {e.dst for e in graph.edges if e.src != e.dst}
    # Clients waiting unanswered may wait on a stopped engine the graph drew no edge to (a
    # framework's own IPC: vLLM's front end and its EngineCore): then it is owed.
    clients_wait = any(e.src == OUT_CLIENTS for e in graph.edges)
    lock_holders = {  # file locks' holders outside the job
        e.dst
        for e in graph.edges
        if e.kind == "file-lock" and e.dst in by_key and by_key[e.dst].label.endswith(OUTSIDE_JOB)
    }
    dead = work = aside = False
    for key in graph.ends:
        n = by_key.get(key)
        if n is None:
            continue
        gone = n.state in ("zombie", "exited") and (key in waited_on or n.rank is not None)
        owed = key in waited_into or n.rank is not None or clients_wait
        if (n.state == "stopped" and owed) or gone:
            dead = True
        elif n.state == "stopped":
            aside = True
        elif n.state in ("computing", "working", "disk", "spinning"):
            work = work or n.state != "spinning"
        elif key in lock_holders and n.state in ("sleeping", "blocked"):
            work = True  # a file lock's holder outside the job, about its own business
    return dead, work, aside


def _doors_state(
    graph: WaitGraph, by_key: Dict[str, WaitNode], doors: Dict[str, Set[str]]
) -> Optional[FrozenSet[VerdictState]]:
    """No chain ends dead or in work: requests waiting, doors that will open, or none."""
    served = {e.dst for e in graph.edges if e.src == OUT_CLIENTS}
    if served and all(
        k in by_key and by_key[k].state == "sleeping" and OUT_TIMER in doors.get(k, set())
        for k in served
    ):
        return _SLOW  # the thread that answers sleeps in a handler: a timer ends it
    if served:
        return _DEADLOCKED  # requests unanswered and nothing on their chain works
    live_ends = [
        k for k in graph.ends if k in by_key and by_key[k].state not in ("zombie", "exited")
    ]
    if not live_ends:  # only helpers that exited normally, nobody waiting on them
        busy = any(n.state in ("computing", "working") for n in graph.nodes)
        return _WORKING if busy else None
    if any(e.kind == "lock" and e.src == e.dst and e.src in live_ends for e in graph.edges):
        return _DEADLOCKED  # a lock only its own threads hold, none of which will run
    # A rank joining a store whose host is not up waits on the outside too: the host's start
    # ends it (``rendezvous.store_joins``).
    open_doors = {OUT_NETWORK, OUT_TIMER, OUT_STDIN, OUT_CLIENTS, OUT_STORE}
    if live_ends and all(doors.get(k, set()) & open_doors for k in live_ends):
        return _IDLE
    if any(doors.get(k, set()) & open_doors for k in live_ends) and all(
        doors.get(k) for k in live_ends
    ):
        return _IDLE  # some wait on a peer not in the capture, others on open doors
    return _DEADLOCKED


def with_chains(suspects: Sequence[Suspect], graph: WaitGraph) -> List[Suspect]:
    """Each suspect with the chain of waits that ends at it (the graph's why)."""
    out = []
    for s in suspects:
        chain = _chain_of(f"{s.host}/{s.pid}", graph)
        if "→" not in chain and ": a cycle" not in chain:
            chain = ""  # a chain of one: the reason already says what it does
        out.append(msgspec.structs.replace(s, chain=chain) if chain and not s.chain else s)
    return out


def graph_warnings(state: str, graph: WaitGraph) -> Tuple[str, ...]:
    """What the wait-for graph shows that the verdict's state does not say: a part of an idle
    or working job that can never wake (two processes waiting on each other behind a healthy
    front end)."""
    if state not in ("idle", "slow", "progressing") or not graph.reasons:
        return ()
    stuck = [line for line, r in zip(graph.chains, graph.reasons) if r in DEAD_ENDS]
    return tuple(f"part of the job can never wake: {line}" for line in stuck[:3])
