"""What a finished capture or merge tells its user: notes, a summary, the verdict, --fail-on.

``diag capture --pid``, ``capture --slurm-job``, ``watch --slurm-job`` and ``diag merge`` all
end the same way - the notes on stderr, one summary line, the files written, the verdict line
on stdout, and exit code 10 when the verdict is one the user named in ``--fail-on`` (raised
only after the outputs exist, so the evidence is always on disk). Kept out of ``diag.cli`` so
the click layer stays options and calls, and so the four endings cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, FrozenSet, List, NamedTuple, Optional, Tuple

from diag.errors import EXIT_FAIL_ON, DiagError
from diag.model import Bundle
from diag.redaction.redact import Redactor
from diag.text.terminal import safe_line
from diag.text.units import rank_set


class Outcome(NamedTuple):
    """A finished bundle, the files written from it, and notes for the user."""

    bundle: Bundle
    written: Tuple[Path, ...]
    notes: Tuple[str, ...]
    redactor: Optional[Redactor] = None  # the capture's, which learned the target's secrets


def _ranks_suffix(bundle: Bundle) -> str:
    ranks = {p.rank for p in bundle.processes if p.rank is not None}
    return f", {rank_set(ranks)}" if ranks else ""


def captured_headline(bundle: Bundle) -> str:
    """``captured 3 sample(s) of 5 process(es), ranks 0,1,2,3``."""
    return (
        f"captured {len(bundle.samples)} sample(s) of {len(bundle.processes)} process(es)"
        + _ranks_suffix(bundle)
    )


def merged_headline(bundle: Bundle) -> str:
    """``merged 2 of 3 host(s): ...``: how many hosts made it into a multi-host bundle."""
    hosts = [h for h in bundle.hosts if h.status == "ok"]
    return (
        f"merged {len(hosts)} of {len(bundle.hosts)} host(s): {len(bundle.samples)} sample(s) "
        f"of {len(bundle.processes)} process(es)" + _ranks_suffix(bundle)
    )


def summary_lines(outcome: Outcome, headline: str) -> List[str]:
    """The stdout lines: the headline, one ``wrote PATH`` per file, the verdict line."""
    lines = [headline]
    lines += [safe_line(f"wrote {path}") for path in outcome.written]  # a newline in -o
    from diag.verdict.classify import verdict_line  # lazy: a Slurm node prints no verdict

    lines.append(verdict_line(outcome.bundle.verdict))
    return lines


def check_fail_on(outcome: Outcome, fail_states: FrozenSet[str]) -> None:
    """Raise the --fail-on error (exit 10) when the verdict is one of ``fail_states``."""
    verdict = outcome.bundle.verdict
    if verdict is not None and verdict.state in fail_states:
        raise DiagError(
            f"verdict {verdict.state} matched --fail-on {','.join(sorted(fail_states))}",
            f"evidence in {outcome.written[0]}" if outcome.written else "",
            EXIT_FAIL_ON,
        )


def report_outcome(
    outcome: Outcome,
    *,
    merged: bool,
    fail_states: FrozenSet[str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> None:
    """Notes to ``err``, the summary to ``out``, then --fail-on. A single-host capture's notes
    read ``diag: note: ...``; a merge's are host lines (``diag: node1: 3 sample(s)``) or
    carry their own ``note:``."""
    scrub = _line_scrubber(outcome)
    for note in outcome.notes:
        err(scrub(f"diag: {note}" if merged else f"diag: note: {note}"))
    headline = merged_headline if merged else captured_headline
    for line in summary_lines(outcome, headline(outcome.bundle)):
        out(scrub(line))
    check_fail_on(outcome, fail_states)


def _line_scrubber(outcome: Outcome) -> Callable[[str], str]:
    """What makes a line printable: the verdict names thread, function and log file names the
    target chose, so each line is scrubbed like the files (the capture's redactor when the
    outcome carries it, else one taught the bundle's environments, as ``write_reports`` does)
    and made one terminal-safe line."""
    redactor: Redactor
    if outcome.redactor is not None:
        redactor = outcome.redactor
    else:
        redactor = Redactor()
        for info in outcome.bundle.processes:
            redactor.add_environ(dict(info.env))
    return lambda line: safe_line(redactor.scrub(line))
