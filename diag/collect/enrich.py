"""What is read once per bundle, not per sample: Flight Recorder dumps and the NCCL log summary.

A capture ends here before its verdict: the dumps a watchdog wrote and the NCCL/torch lines of
every rank's log are read where the files are (this host), under the runner's timeout, and put
on the bundle. ``with_log_summary`` is the same summary for a bundle that lacks one (an old
bundle, a watch window), derived from the log tails the samples recorded.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, List, Sequence, Tuple

import msgspec

from diag.model import Bundle, ProbeFailure, RankCollectives
from diag.probes.nccl import logs as nccl_logs
from diag.probes.nccl.flight_recorder import FrTracker
from diag.probes.runner import ProbeCall, run_all


def enrich_bundle(
    bundle: Bundle,
    fr_dirs: Sequence[str] = (),
    scrub: Callable[[str], str] = str,
    timeout_s: float = 20.0,
) -> Bundle:
    """End of a capture or watch: attach the Flight Recorder dumps and the NCCL log summary.

    Both reads run under the runner's timeout (a dump on a hung NFS mount must not hang diag);
    a failure or an unreadable dump becomes a ``ProbeFailure`` in the bundle, never an error.
    """
    tracker = FrTracker(fr_dirs, timeout_s)  # dumps are read one way, a watch's too
    fr_call = ProbeCall("flight-recorder", partial(tracker.refresh, bundle.processes), timeout_s)
    log_call = ProbeCall(
        "nccl-logs",
        partial(nccl_logs.collect, bundle.samples, bundle.processes, scrub),
        timeout_s,
    )
    calls: List[ProbeCall[Any]] = [fr_call, log_call]
    fr_result, log_result = run_all(calls)
    failures = [r.failure for r in (fr_result, log_result) if r.failure is not None]
    records: Tuple[RankCollectives, ...] = tracker.apply(bundle).collectives
    if fr_result.failure is None:
        failures += [ProbeFailure(probe="flight-recorder", reason=p) for p in tracker.problems]
    logs = log_result.value if log_result.value is not None else bundle.nccl_logs
    return msgspec.structs.replace(
        bundle,
        collectives=records,
        nccl_logs=logs,
        failures=(*bundle.failures, *failures),
    )


def with_log_summary(bundle: Bundle) -> Bundle:
    """The bundle with its NCCL log summary, derived from the recorded tails when it has none."""
    if bundle.nccl_logs or not bundle.samples:
        return bundle
    entries = nccl_logs.entries_from_samples(bundle.samples)
    summary = nccl_logs.summarize(entries, bundle.processes)
    return msgspec.structs.replace(bundle, nccl_logs=summary) if summary else bundle
