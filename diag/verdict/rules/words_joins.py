"""The rules' words for a rendezvous whose host is dead, not late (``host_gone``): ranks that
wait to join a store whose host's death is in the evidence, and the hedge for a host that is
only missing.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.arrivals import Arrival
from diag.verdict.features import ProcSignals
from diag.verdict.host_gone import HostGone
from diag.verdict.rendezvous import StoreJoin
from diag.verdict.wording import verb, where, who

FORMING_OUTRANKS = (
    "a rank that reached the rendezvous during the capture moved: the meeting is forming, "
    "not hung, however still the others wait"
)

HOST_DIED_OUTRANKS = (
    "the rank the others wait to meet is dead: its death ends every wait on it, however much "
    "the waits look like a door that opens when it comes"
)


def store_host_died(join: StoreJoin, gone: HostGone) -> str:
    """``store_host_died``: ranks wait to join a store whose host rank died."""
    first = join.joiners[0]
    return (
        f"{who(join.joiners)} {verb(join.joiners, 'waits', 'wait')} in "
        f"{where(first)} to join the rendezvous at {join.endpoint()}, whose host, rank "
        f"{gone.rank}, is dead - {'; '.join(gone.evidence)}. It will never come up, so "
        f"{'they wait' if len(join.joiners) > 1 else 'it waits'} until init_process_group's "
        f"timeout (30 min by default): kill the job, read rank {gone.rank}'s error, fix it and "
        "restart"
    )


def host_died_reason(gone: HostGone) -> str:
    """A suspect's reason: the dead host rank (gone before diag looked)."""
    return f"hosts the c10d store and died before diag looked ({gone.evidence[0]})"


def host_missing_hedge(gone: HostGone) -> str:
    """``waits_for_nodes_to_join``: the host rank belongs on this host and is not here, with
    nothing in the capture that says why - late and dead look alike; say what would tell."""
    return (
        f". Rank {gone.rank} belongs on this host (its MASTER_ADDR is local) and no process here "
        "is it: not started yet, or dead before diag looked without a trace in a followed log. "
        f"Its own log or its launcher's exit status tells which (a traceback, `exit code 1`), "
        f"and `diag watch` sees it come up if it is only late"
    )


def rendezvous_forming(found: Sequence[Arrival], ranks: Sequence[ProcSignals]) -> str:
    """``rendezvous_forming``: ranks arrived at the rendezvous during the capture."""
    came = [a.proc for a in found]
    first = found[0]
    world = max((p.info.world_size or 0 for p in ranks), default=0)
    here = len({p.rank for p in ranks})
    if world > here:  # the others on other hosts, or not started: they must come too
        tail = (
            f"{here} of its {world} ranks are here - the others must come too (other hosts, "
            "or not yet started): if they still wait in a few minutes, capture again, and "
            "look for the missing ranks"
        )
    else:
        tail = (
            "If they still wait in a minute, capture again: a meeting of ranks that are all "
            "present completes in seconds"
        )
    return (
        f"start-up advances - {who(came)} reached `{first.at}` during the "
        f"capture ({'it was' if len(came) == 1 else 'they were'} in `{first.came_from}` at "
        f"the first sample), and {who(ranks)} now {verb(ranks, 'waits', 'wait')} there to "
        f"meet: the rendezvous is forming, no rank diverged. {tail}"
    )
