"""An exited target's verdict, and the dead processes the job's log names: the last exception
line, the death lines that make a suspect of a rank reaped before diag looked."""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

from diag.model import Bundle, Suspect, Verdict
from diag.verdict.evidence import exit_evidence
from diag.verdict.features import ProcSignals
from diag.verdict.log_deaths import LogDeath, log_deaths
from diag.verdict.progress import log_growth
from diag.verdict.wording import summary_of


def seen_lines(bundle: Bundle) -> List[str]:
    """Every log line the capture kept (heads, and each sample's tail) - bounded by the log
    probe's own caps - for a dead rank's own prefix ("(Worker_TP1 pid=24119)")."""
    lines: List[str] = []
    for sample in bundle.samples[:64]:
        for lg in sample.logs:
            lines.extend(lg.head)
            lines.extend(lg.tail)
    return lines


def with_log_deaths(suspects: Sequence[Suspect], deaths: Sequence[LogDeath]) -> List[Suspect]:
    """Suspects named by the log's death lines: a dead process seen without a rank (a
    zombie has no cmdline to read one from) gets the rank the log names; a rank the log says
    died that no suspect is, comes first - its PID unknown (0) when it was reaped before
    diag looked and no line shows it. The first death is the cause, later ones follow it."""
    named = [d for d in deaths if d.rank is not None or d.pid is not None]
    if not named:
        return list(suspects)
    out = list(suspects)
    first = named[0]
    quoted = f"the log says it died: `{first.line[:160]}`"
    for n, s in enumerate(out):
        if first.pid is not None and s.pid == first.pid:
            rank = s.rank if s.rank is not None else first.rank
            out[n] = Suspect(pid=s.pid, rank=rank, host=s.host, reason=f"{s.reason}; {quoted}")
            return [out[n], *out[:n], *out[n + 1 :]]
    if first.rank is not None and any(s.rank == first.rank for s in out):
        return out
    return [Suspect(pid=first.pid or 0, rank=first.rank, reason=quoted), *out]


def dedupe(suspects: Sequence[Suspect]) -> Tuple[Suspect, ...]:
    seen = set()
    out = []
    for s in suspects:
        if (s.host, s.pid) not in seen:
            seen.add((s.host, s.pid))
            out.append(s)
    return tuple(out)


_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b:?\s")


def last_exception(bundle: Bundle) -> str:
    """The last exception line in the job's last log tails (a traceback's final line says
    what killed it): "OSError: [Errno 98] Address already in use"."""
    found = ""
    for lg in log_growth(bundle):
        for line in lg.tail:
            text = " ".join(line.split())
            if _EXCEPTION_LINE.match(line) or (text.startswith("ERROR") and "Error" in text):
                found = text
    return found[:200]


def exited_verdict(bundle: Bundle, procs: Sequence[ProcSignals]) -> Verdict:
    code, evidence = exit_evidence(bundle, procs)
    code_text = f" (exit code {code})" if code is not None else ""
    error = last_exception(bundle) if code not in (None, 0) else ""
    error_text = f"; its log ends in `{error}`" if error else ""
    deaths = log_deaths(log_growth(bundle), procs, seen_lines(bundle))
    suspects = with_log_deaths([], deaths) if code not in (None, 0) or deaths else []
    if suspects and deaths:
        error_text += f"; the log says a process died first: `{deaths[0].line[:160]}`"
    return Verdict(
        state="exited",
        confidence=0.95,
        rule="target_exited",
        summary=summary_of("exited", f"the target is gone{code_text}{error_text}"),
        evidence=tuple(evidence),
        suspects=tuple(suspects),
        exit_code=code,
    )
