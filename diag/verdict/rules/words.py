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

from typing import Sequence

from diag.verdict.features import ProcSignals
from diag.verdict.log_deaths import LogDeath
from diag.verdict.wording import group_by_wait, waits_phrase, who

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
