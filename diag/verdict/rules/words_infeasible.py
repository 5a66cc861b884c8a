"""The rules' words for work its scheduler can never place (``infeasible``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.features import ProcSignals
from diag.verdict.infeasible import Infeasible
from diag.verdict.wording import verb, where, who


def never_placed(waiters: Sequence[ProcSignals], found: Infeasible) -> str:
    """``results_never_come``: the result's task can never be scheduled."""
    return (
        f"{who(waiters)} {verb(waiters, 'waits', 'wait')} for results in "
        f"{where(waiters[0])} of work that can never be scheduled - {found.path}: "
        f"`{found.line}`. It asks for resources no node has: nothing was lost and nothing "
        "will ever run it, and a rerun waits the same. Lower what the task or actor asks "
        "for (`num_cpus`, `num_gpus`, custom resources) or add a node that has it, then "
        "restart"
    )


def never_placed_reason(found: Infeasible) -> str:
    """A waiter's reason as a suspect."""
    return f"waits for a task its scheduler can never place (`{found.line[:100]}`)"
