"""The rules' words for a server seen working only across samples (``short_requests``): the
connections it accepted and closed between two samples.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.features import ProcSignals
from diag.verdict.short_requests import ShortRequests


def short_requests_part(p: ProcSignals, r: ShortRequests, name: str = "") -> str:
    """``answers_requests``, for one server: the requests it answered that no sample saw.
    ``name``: the processes sharing that port (a master and its workers: one count for all
    of them, said once), else ``p``'s."""
    cpu = f", {p.cpu_pct:.0f}% of a core" if p.cpu_pct >= 1 and not name else ""
    verb = "answer" if name else "answers"
    return (
        f"{name or p.name} {verb} short requests on :{r.port} - {r.closed} connection(s) "
        "accepted and "
        f"closed in the last {r.span_s:.0f} s (TIME_WAIT, about {r.rate_per_s:.1f}/s), a close "
        f"between {r.with_close} of {r.intervals} pairs of samples{cpu}; each came and went "
        "between samples, so no sample holds one"
    )
