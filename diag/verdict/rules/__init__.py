"""The rule table: the verdict's rules, in the order an on-call engineer reasons, as data.

Each row is a ``Rule`` (``rules.base``): an id, its family (one module each: ``deaths``,
``motion``, ``graph``, ``peers``, ``locks``, ``doors``), the states it can give, what it needs,
why it outranks the rows after it, and its ``decide`` function. The first row that decides,
decides; every later row is still asked, so the verdict records which would also have matched
and why each was overruled (``Verdict.also_matched``): whoever adds a row sees its effect on
every recorded capture in one fast test (``tests/test_rule_table.py``).

Rules only decide (the state, how sure, whom to blame); the sentences they give - a verdict's
summary, a suspect's reason, why a row outranks the rows after it, a problem line - are
``rules.words``' functions and constants, one per sentence, so the wording is read, reviewed
and changed in one place. The longer stories (``diag.verdict.stories``, ``pipe_story``, a
filesystem's and a self-wait's story) are told by the modules that find them.

A row that raises is recorded as a problem (``Verdict.problems``) and skipped, never fatal: a
bug in one rule must not cost the verdict. A row that needs the wait-for graph is skipped when
the graph could not be drawn (recorded by the classifier).

May import the base and ``diag.verdict`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from diag.model import RuleMatch
from diag.verdict.rules import deaths, doors, graph, locks, motion, peers, words
from diag.verdict.rules.base import Decision, Rule, rule
from diag.verdict.situation import Situation

TABLE: Tuple[Rule, ...] = (
    rule("rank_died", "deaths", ["deadlocked"], deaths.rank_died, words.STOP_OUTRANKS),
    rule("rank_stopped", "deaths", ["deadlocked"], deaths.rank_stopped, words.STOP_OUTRANKS),
    rule(
        "log_names_dead_rank",
        "deaths",
        ["deadlocked"],
        deaths.log_names_dead_rank,
        words.STOP_OUTRANKS,
    ),
    rule(
        "waits_on_itself",
        "locks",
        ["deadlocked"],
        locks.waits_on_itself,
        words.SELF_LOCK_OUTRANKS,
    ),
    rule(
        "blocked_on_itself",
        "locks",
        ["deadlocked"],
        locks.blocked_on_itself,
        words.NEVER_WAKES_OUTRANKS,
    ),
    rule(
        "answers_requests",
        "motion",
        ["progressing"],
        motion.answers_requests,
        words.ANSWERS_OUTRANKS,
        needs=["deltas"],
    ),
    rule(
        "output_moves",
        "motion",
        ["progressing"],
        motion.output_moves,
        words.MOVES_OUTRANKS,
        ["deltas"],
    ),
    rule("works_silently", "motion", ["slow"], motion.works_silently, words.WORK_OUTRANKS),
    rule("children_work", "motion", ["slow"], motion.children_work, words.WORK_OUTRANKS),
    rule(
        "calls_itself", "graph", ["deadlocked"], graph.calls_itself, words.GRAPH_OUTRANKS, ["graph"]
    ),
    rule(
        "pipe_outlives_child",
        "graph",
        ["deadlocked"],
        graph.pipe_outlives_child,
        words.GRAPH_OUTRANKS,
        ["graph"],
    ),
    rule(
        "waits_on_stopped_outsider",
        "graph",
        ["deadlocked"],
        graph.waits_on_stopped_outsider,
        words.GRAPH_OUTRANKS,
        ["graph"],
    ),
    rule(
        "waits_for_file_lock",
        "locks",
        ["slow", "deadlocked", "unknown"],
        locks.waits_for_file_lock,
        words.LOCK_HOLDER_OUTRANKS,
    ),
    rule(
        "waits_on_filesystem",
        "locks",
        ["slow", "deadlocked"],
        locks.waits_on_filesystem,
        words.FILESYSTEM_OUTRANKS,
    ),
    rule(
        "waits_for_nodes_to_join",
        "peers",
        ["idle", "deadlocked"],
        peers.waits_for_nodes_to_join,
        words.JOIN_OUTRANKS,
    ),
    rule(
        "collective_laggard",
        "peers",
        ["deadlocked"],
        peers.collective_laggard,
        words.RECORDS_OUTRANKS,
    ),
    rule(
        "server_feeds_ranks",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.server_feeds_ranks,
        words.SERVER_OUTRANKS,
    ),
    rule("peers_wait", "peers", ["deadlocked"], peers.peers_wait, words.SHAPE_OUTRANKS),
    rule(
        "results_never_come",
        "peers",
        ["deadlocked"],
        peers.results_never_come,
        words.SHAPE_OUTRANKS,
    ),
    rule("lock_cycle", "locks", ["deadlocked"], locks.lock_cycle, words.SHAPE_OUTRANKS),
    rule("gpu_spins", "peers", ["deadlocked"], peers.gpu_spins, words.SHAPE_OUTRANKS),
    rule(
        "lock_without_door", "locks", ["deadlocked"], locks.lock_without_door, words.SHAPE_OUTRANKS
    ),
    rule(
        "log_reports_death", "deaths", ["deadlocked"], deaths.log_reports_death, words.STOP_OUTRANKS
    ),
    rule(
        "requests_unanswered",
        "doors",
        ["deadlocked", "slow"],
        doors.requests_unanswered,
        words.UNANSWERED_OUTRANKS,
    ),
    rule(
        "pipe_full_in_dead_chain",
        "graph",
        ["deadlocked"],
        graph.pipe_full_in_dead_chain,
        words.FULL_PIPE_OUTRANKS,
        ["graph"],
    ),
    rule(
        "chains_never_end",
        "graph",
        ["deadlocked"],
        graph.chains_never_end,
        words.DEAD_CHAINS_OUTRANKS,
        ["graph"],
    ),
    rule(
        "polls_for_stale_lock_file",
        "locks",
        ["deadlocked"],
        locks.polls_for_stale_lock_file,
        words.LOCK_FILE_OUTRANKS,
    ),
    rule(
        "waits_for_outside",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.waits_for_outside,
        words.DOORS_OUTRANKS,
    ),
    rule("pipe_full", "graph", ["deadlocked"], graph.pipe_full, words.SHAPE_OUTRANKS),
    rule(
        "chains_end_at_doors",
        "graph",
        ["idle"],
        graph.chains_end_at_doors,
        words.DOOR_CHAINS_OUTRANKS,
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
        problems.append(words.rule_failed(row.id, exc))
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
        chosen = (row, Decision("unknown", 0.2, words.NO_RULE_DECIDED))
    return Outcome(chosen[0], chosen[1], tuple(also), tuple(problems))


__all__ = ["TABLE", "Decision", "Outcome", "Rule", "apply"]
