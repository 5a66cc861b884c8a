"""``diag report`` and ``diag summary``: re-render a bundle someone handed you, any age.

An old or cut-short bundle (a journal of a SIGKILLed watch, a bundle from before the verdict
was stored) has no verdict: it is judged here, with today's classifier, and the report says
the verdict was computed afterwards. A classifier that fails on such a bundle still leaves a
report (without a verdict): the evidence is worth more than the judgement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple, Union

import msgspec

from diag.bundle.io import load_bundle
from diag.collect.enrich import with_log_summary
from diag.commands.judge import judge
from diag.model import Bundle, Verdict
from diag.redaction.redact import Redactor
from diag.render.outputs import view_of, write_reports
from diag.render.terminal import render_summary


def resolve_verdict(bundle: Bundle) -> Tuple[Bundle, str]:
    """The bundle with a verdict: its own ("bundle"), one judged now ("computed"), or none."""
    bundle = with_log_summary(bundle)
    if bundle.verdict is not None:
        return bundle, "bundle"
    if not bundle.samples:
        return bundle, "none"
    try:
        verdict = judge(bundle)
    except Exception:  # the report must still render when the classifier cannot
        return bundle, "none"
    if not isinstance(verdict, Verdict):
        return bundle, "none"
    return msgspec.structs.replace(bundle, verdict=verdict), "computed"


def run_report(
    bundle_path: Union[str, Path], out: Optional[Union[str, Path]] = None
) -> Tuple[Path, Path]:
    """``diag report``: re-render any bundle (old, cut-short, journal) beside it or at ``out``."""
    bundle, source = resolve_verdict(load_bundle(bundle_path))
    return write_reports(bundle, bundle_path, Redactor(), html_path=out, verdict_source=source)


def summary_text(bundle_path: Union[str, Path]) -> str:
    """``diag summary``: the verdict and the per-rank table, for a terminal."""
    bundle, source = resolve_verdict(load_bundle(bundle_path))
    return Redactor().scrub(render_summary(view_of(bundle, source)))
