"""The verdict: pure functions from a bundle's sample series to a state, evidence and suspects.

``features`` turns samples into per-process features, ``thread_wait``/``waits`` say what each
thread waits on, ``participants`` who the job is, ``sources``/``gpu``/``collectives``/
``fr_findings`` the extra evidence sources, ``classify`` the ordered rules, ``stories`` and
``wording`` the sentences. No I/O, no clock: may import only the base (``model``, ``frames``,
``text``) - never ``probes``, ``collect`` or ``render``.
"""

from diag.verdict.classify import EVIDENCE_SOURCES, classify, verdict_line

__all__ = ["EVIDENCE_SOURCES", "classify", "verdict_line"]
