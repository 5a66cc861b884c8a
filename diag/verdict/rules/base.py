"""What a rule is and what it answers: a ``Rule`` record (id, family, the states it can give,
what it needs, why it sits where it does in the table, its ``decide`` function) and its
``Decision`` (state, confidence, the sentence, suspects).

The state is data: a rule names it in ``decided`` and its sentence (from ``rules.words``)
says only what follows it ("rank 3 ..."); the summary ("deadlocked: rank 3 ...") is composed
once, by the classifier, from the two - never written with the state inside and stripped back
out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, FrozenSet, Literal, Optional, Sequence, Tuple

from diag.model import Suspect
from diag.verdict.situation import Situation
from diag.verdict.wording import summary_of
from diag.vocab import RuleFamily, RuleId, VerdictState

# What a rule reads beyond the measures: the wait-for graph (skipped, and recorded as such,
# when the graph could not be drawn), or deltas between samples (a one-sample capture has
# none).
Need = Literal["graph", "deltas"]


@dataclass(frozen=True)
class Decision:
    """A rule's answer. ``text`` is the sentence without its leading "state: "."""

    state: VerdictState
    confidence: float
    text: str
    suspects: Tuple[Suspect, ...] = ()

    @property
    def summary(self) -> str:
        return summary_of(self.state, self.text)


def decided(
    state: VerdictState, confidence: float, text: str, suspects: Sequence[Suspect] = ()
) -> Decision:
    """A ``Decision``: its state, and the sentence that follows the state in the summary."""
    return Decision(state, confidence, text, tuple(suspects))


# An example is the name of a recorded capture the rule decides: a bundle's stem in
# samples/bundles/ or tests/golden/bundles/ (a real program, a real server, a scenario's
# recording), or ``fixture:NAME`` for a bundle a test helper builds where no program on a
# machine without a GPU reaches the rule (tests/rule_fixtures.py; the row's doc says so).
FIXTURE_PREFIX = "fixture:"


@dataclass(frozen=True)
class Rule:
    """One row of the table, documenting itself: ``doc`` says what it detects and the cause
    behind it, ``outranks`` why it comes before the rows after it (what a report prints for a
    later rule that also matched: "overruled: ..."), ``examples`` the recorded captures it
    decides (tests/test_rule_table.py fails for a row that decides none of them, or has none;
    docs/rules.md is generated from these fields)."""

    id: RuleId
    family: RuleFamily
    gives: FrozenSet[VerdictState]
    decide: Callable[[Situation], Optional[Decision]]
    outranks: str
    needs: FrozenSet[Need] = frozenset()
    # The last rule: it always applies, so it is never listed as "also matched".
    fallback: bool = False
    doc: str = ""
    examples: Tuple[str, ...] = ()


def rule(
    id: RuleId,
    family: RuleFamily,
    gives: Sequence[VerdictState],
    decide: Callable[[Situation], Optional[Decision]],
    outranks: str,
    needs: Sequence[Need] = (),
    fallback: bool = False,
    *,
    doc: str,
    examples: Sequence[str],
) -> Rule:
    """A table row, written compactly in the table."""
    return Rule(
        id,
        family,
        frozenset(gives),
        decide,
        outranks,
        frozenset(needs),
        fallback,
        " ".join(doc.split()),
        tuple(examples),
    )
