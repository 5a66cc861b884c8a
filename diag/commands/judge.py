"""The one way a bundle is judged, whoever took it: ``capture --pid``, ``capture -- CMD`` and
``watch`` (each window), ``merge`` and ``--slurm-job`` (the merged whole), ``report`` and
``summary`` (an old bundle without a verdict), ``diag mcp``.

What the verdict reads beyond the samples is derived here first (the NCCL log summary from
the recorded tails; Flight Recorder dumps are read where the files are, when the capture is
taken), so a bundle judged again later gets the verdict it got when it was taken.
"""

from __future__ import annotations

import msgspec

from diag.bundle.gc_pause import collector_paused
from diag.collect.enrich import with_log_summary
from diag.model import Bundle, Verdict


def judge(bundle: Bundle) -> Verdict:
    """The verdict of a bundle (``diag.verdict.classify``, after its log summary)."""
    return _classified(with_log_summary(bundle))


def judged(bundle: Bundle) -> Bundle:
    """The bundle with its log summary and its verdict attached (the summary derived once:
    at 16,384 ranks reading every recorded tail again costs ~0.1 s)."""
    bundle = with_log_summary(bundle)
    return msgspec.structs.replace(bundle, verdict=_classified(bundle))


def _classified(summarised: Bundle) -> Verdict:
    """``classify`` of a bundle whose log summary is already derived."""
    from diag.verdict.classify import classify  # lazy: a Slurm node never judges

    with collector_paused():
        return classify(summarised)
