"""The rule table: the verdict's rules, in the order an on-call engineer reasons, as data.

Each row is a ``Rule`` (``rules.base``): an id, its family (one module each: ``deaths``,
``motion``, ``graph``, ``peers``, ``locks``, ``doors``), the states it can give, what it needs,
why it outranks the rows after it, and its ``decide`` function. The first row that decides,
decides; every later row is still asked, so the verdict records which would also have matched
and why each was overruled (``Verdict.also_matched``): whoever adds a row sees its effect on
every recorded capture in one fast test (``tests/test_rule_table.py``).

A row that raises is recorded as a problem (``Verdict.problems``) and skipped, never fatal: a
bug in one rule must not cost the verdict. A row that needs the wait-for graph is skipped when
the graph could not be drawn (recorded by the classifier).

May import the base and ``diag.verdict`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from diag.model import RuleMatch
from diag.verdict.rules import deaths, doors, graph, locks, motion, peers
from diag.verdict.rules.base import Decision, Rule, rule
from diag.verdict.situation import Situation

_STOP = "a stopped or dead process owes its peers what they wait for, whatever they print or burn"
_MOVES = "output that moves is progress, whatever waits elsewhere"
_WORK = "work without output (CPU, reads, memory, children) is slow, not stuck"
_SHAPE = "a named shape of a wait outranks the generic reading of the same stacks"
_GRAPH = "the graph names who ends the wait, past what the stacks alone show"

TABLE: Tuple[Rule, ...] = (
    rule("rank_died", "deaths", ["deadlocked"], deaths.rank_died, _STOP),
    rule("rank_stopped", "deaths", ["deadlocked"], deaths.rank_stopped, _STOP),
    rule("log_names_dead_rank", "deaths", ["deadlocked"], deaths.log_names_dead_rank, _STOP),
    rule(
        "waits_on_itself",
        "locks",
        ["deadlocked"],
        locks.waits_on_itself,
        "a thread blocked on a lock its own stack holds names both frames: more than any "
        "reading of the process as a whole",
    ),
    rule(
        "blocked_on_itself",
        "locks",
        ["deadlocked"],
        locks.blocked_on_itself,
        "a rank that can never wake by itself hangs the job at its next collective",
    ),
    rule(
        "answers_requests",
        "motion",
        ["progressing"],
        motion.answers_requests,
        "a server answering its clients is progressing, however quiet its log",
        needs=["deltas"],
    ),
    rule("output_moves", "motion", ["progressing"], motion.output_moves, _MOVES, ["deltas"]),
    rule("works_silently", "motion", ["slow"], motion.works_silently, _WORK),
    rule("children_work", "motion", ["slow"], motion.children_work, _WORK),
    rule("calls_itself", "graph", ["deadlocked"], graph.calls_itself, _GRAPH, ["graph"]),
    rule(
        "pipe_outlives_child", "graph", ["deadlocked"], graph.pipe_outlives_child, _GRAPH, ["graph"]
    ),
    rule(
        "waits_on_stopped_outsider",
        "graph",
        ["deadlocked"],
        graph.waits_on_stopped_outsider,
        _GRAPH,
        ["graph"],
    ),
    rule(
        "waits_for_file_lock",
        "locks",
        ["slow", "deadlocked", "unknown"],
        locks.waits_for_file_lock,
        "a file lock's holder outside the job decides when it goes on",
    ),
    rule(
        "waits_on_filesystem",
        "locks",
        ["slow", "deadlocked"],
        locks.waits_on_filesystem,
        "a rank asleep on a FUSE or network mount waits on that filesystem's owner, not on "
        "its peers: it is no diverged rank",
    ),
    rule(
        "waits_for_nodes_to_join",
        "peers",
        ["idle", "deadlocked"],
        peers.waits_for_nodes_to_join,
        "an agent waiting for other nodes is not a diverged rank",
    ),
    rule(
        "collective_laggard",
        "peers",
        ["deadlocked"],
        peers.collective_laggard,
        "collective records name the rank behind, whatever the stacks show",
    ),
    rule(
        "server_feeds_ranks",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.server_feeds_ranks,
        "ranks waiting for a server to hand out work are a ready server, not a diverged rank",
    ),
    rule("peers_wait", "peers", ["deadlocked"], peers.peers_wait, _SHAPE),
    rule("results_never_come", "peers", ["deadlocked"], peers.results_never_come, _SHAPE),
    rule("lock_cycle", "locks", ["deadlocked"], locks.lock_cycle, _SHAPE),
    rule("gpu_spins", "peers", ["deadlocked"], peers.gpu_spins, _SHAPE),
    rule("lock_without_door", "locks", ["deadlocked"], locks.lock_without_door, _SHAPE),
    rule("log_reports_death", "deaths", ["deadlocked"], deaths.log_reports_death, _STOP),
    rule(
        "requests_unanswered",
        "doors",
        ["deadlocked", "slow"],
        doors.requests_unanswered,
        "clients waiting unanswered past the capture outrank an open port",
    ),
    rule(
        "pipe_full_in_dead_chain",
        "graph",
        ["deadlocked"],
        graph.pipe_full_in_dead_chain,
        "a cycle through a full pipe is told as its picture: the writer and its reader",
        ["graph"],
    ),
    rule(
        "chains_never_end",
        "graph",
        ["deadlocked"],
        graph.chains_never_end,
        "chains ending stopped, dead or in a cycle outrank a port or a timer elsewhere",
        ["graph"],
    ),
    rule(
        "polls_for_stale_lock_file",
        "locks",
        ["deadlocked"],
        locks.polls_for_stale_lock_file,
        "polling for a lock file no process of the job holds is not a timer wait",
    ),
    rule(
        "waits_for_outside",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.waits_for_outside,
        "waits a port, stdin or a timer can end are idle before they are stuck",
    ),
    rule("pipe_full", "graph", ["deadlocked"], graph.pipe_full, _SHAPE),
    rule(
        "chains_end_at_doors",
        "graph",
        ["idle"],
        graph.chains_end_at_doors,
        "a chain that ends at a door names who can end the wait, where the ranks' own waits "
        "see none",
        ["graph"],
    ),
    rule(
        "nothing_can_wake",
        "graph",
        ["deadlocked"],
        graph.nothing_can_wake,
        "",
        fallback=True,
    ),
)


@dataclass(frozen=True)
class Outcome:
    """What the table gave: the deciding row and its decision, the later rows that matched
    too, and the rows that raised or were skipped (one line each)."""

    rule: Rule
    decision: Decision
    also: Tuple[RuleMatch, ...]
    problems: Tuple[str, ...]


def _ask(row: Rule, s: Situation, problems: List[str]) -> Optional[Decision]:
    if "graph" in row.needs and s.graph is None:
        return None
    try:
        return row.decide(s)
    except Exception as exc:  # a bug in one rule must not cost the verdict
        problems.append(f"rule {row.id} failed and was skipped: {type(exc).__name__}: {exc}"[:300])
        return None


def apply(s: Situation, table: Tuple[Rule, ...] = TABLE) -> Outcome:
    """The first row that decides, the later ones that would have, and what failed."""
    problems: List[str] = []
    chosen: Optional[Tuple[Rule, Decision]] = None
    also: List[RuleMatch] = []
    for row in table:
        if chosen is not None and row.fallback:
            continue
        decision = _ask(row, s, problems)
        if decision is None:
            continue
        if chosen is None:
            chosen = (row, decision)
        else:
            also.append(RuleMatch(rule=row.id, state=decision.state, overruled=chosen[0].outranks))
    if chosen is None:  # only if the fallback itself failed
        row = table[-1]
        text = "nothing moves, and the rules could not say more (see the problems below)"
        chosen = (row, Decision("unknown", 0.2, text))
    return Outcome(chosen[0], chosen[1], tuple(also), tuple(problems))


__all__ = ["TABLE", "Decision", "Outcome", "Rule", "apply"]
