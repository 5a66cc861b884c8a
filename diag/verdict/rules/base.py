"""What a rule is and what it answers: a ``Rule`` record (id, family, the states it can give,
what it needs, why it sits where it does in the table, its ``decide`` function) and its
``Decision`` (state, confidence, the sentence, suspects).

The sentence a rule gives (from ``rules.words``) starts with its state ("deadlocked: rank 3
..."): ``decided`` checks that the two agree and keeps only the part after the state, so the
state is data and the summary is composed once, by the classifier, from the state and this
text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, FrozenSet, Literal, Optional, Sequence, Tuple

from diag.model import Suspect
from diag.verdict.situation import Situation
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
        return f"{self.state}: {self.text}"


def decided(
    state: VerdictState, confidence: float, summary: str, suspects: Sequence[Suspect] = ()
) -> Decision:
    """A ``Decision`` from a rule's sentence, which must open with its own state."""
    prefix = f"{state}: "
    if not summary.startswith(prefix):
        raise ValueError(f"a {state} decision whose sentence opens otherwise: {summary[:60]!r}")
    return Decision(state, confidence, summary[len(prefix) :], tuple(suspects))


@dataclass(frozen=True)
class Rule:
    """One row of the table. ``outranks`` says why it comes before the rules after it - what a
    report prints for a later rule that also matched ("overruled: ...")."""

    id: RuleId
    family: RuleFamily
    gives: FrozenSet[VerdictState]
    decide: Callable[[Situation], Optional[Decision]]
    outranks: str
    needs: FrozenSet[Need] = frozenset()
    # The last rule: it always applies, so it is never listed as "also matched".
    fallback: bool = False


def rule(
    id: RuleId,
    family: RuleFamily,
    gives: Sequence[VerdictState],
    decide: Callable[[Situation], Optional[Decision]],
    outranks: str,
    needs: Sequence[Need] = (),
    fallback: bool = False,
) -> Rule:
    """A table row, written compactly in the table."""
    return Rule(id, family, frozenset(gives), decide, outranks, frozenset(needs), fallback)
