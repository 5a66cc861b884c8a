"""The one versioned bundle: a whole capture (``diag.model``)."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from diag.model.base import SCHEMA_VERSION, Record
from diag.model.identity import HostEntry, HostInfo, ProcessInfo, Target
from diag.model.judged import RankCollectives, RankNcclLog, Verdict, VerdictChange
from diag.model.samples import ProbeFailure, Sample, Stack


class Bundle(Record, frozen=True, omit_defaults=False):
    """The whole capture: what `diag report` renders and `diag merge` combines."""

    schema_version: int = SCHEMA_VERSION
    created_s: float = 0.0
    host: HostInfo = HostInfo()
    target: Target = Target()
    processes: Tuple[ProcessInfo, ...] = ()
    stacks: Dict[str, Stack] = {}
    samples: Tuple[Sample, ...] = ()
    failures: Tuple[ProbeFailure, ...] = ()
    verdict: Optional[Verdict] = None
    collectives: Tuple[RankCollectives, ...] = ()  # Flight Recorder dumps found
    nccl_logs: Tuple[RankNcclLog, ...] = ()
    # Multi-node: one entry per host (diag merge / --slurm-job); empty for a single host.
    hosts: Tuple[HostEntry, ...] = ()
    # False when a watch was cut short (SIGKILL, full disk) and rebuilt from its journal.
    complete: bool = True
    # A watch's verdict changes, oldest first (empty for a capture): the monitor's history.
    verdict_history: Tuple[VerdictChange, ...] = ()


def history_spans(bundle: Bundle) -> Tuple[Tuple[VerdictChange, float], ...]:
    """Each verdict change of a watch with how long it held, seconds: to the next change, or
    to the last sample for the latest - one definition for the report and ``--json``."""
    changes = bundle.verdict_history
    if not changes:
        return ()
    end_s = bundle.samples[-1].t_s if bundle.samples else changes[-1].t_s
    ends = [c.t_s for c in changes[1:]] + [end_s]
    return tuple((c, max(0.0, until - c.t_s)) for c, until in zip(changes, ends))
