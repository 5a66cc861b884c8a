"""The verdict: a pure function from a bundle's sample series to progressing / slow / idle /
deadlocked / exited (or unknown), with evidence, suspects, rank equivalence classes, the rule
that decided and the ones that would also have.

The steps, each in its own module:

1. Nothing sampled or readable -> unknown; every process gone -> exited (``exits``).
2. The features (``features``), the participants, the logs and the evidence sources beyond
   CPU, stacks, I/O and logs (``EVIDENCE_SOURCES``) are read once into a ``Situation``
   (``situation.measure``): who works, who writes, who answers requests, who waits on what.
3. The wait-for graph (``graph``) is drawn from it; a failure to draw it is recorded in
   ``Verdict.problems`` and the rules that need it are skipped (the verdict says so).
4. The rule table (``rules.TABLE``), in the order an on-call engineer reasons: the first row
   that decides, decides; later rows that match are recorded with why they were overruled.
5. The summary is composed once from the state and the deciding sentence, then qualified: one
   snapshot of a weak pattern is unknown, start-up phases and framework timeouts are added
   (``startup``).

``graph_state`` (``chains``) - the state the graph alone gives - is asserted to agree with the
rules on every recorded and scenario capture (the exceptions named in the tests).
"""

from __future__ import annotations

from typing import FrozenSet, List, Optional, Sequence, Tuple

from diag.model import Bundle, Evidence, Suspect, Verdict, WaitGraph
from diag.verdict.bundle_index import judging
from diag.verdict.chains import graph_state, graph_warnings, with_chains
from diag.verdict.collectives import (
    flight_recorder_source,
    gpu_error_source,
    nccl_log_source,
    ras_source,
)
from diag.verdict.countdown import countdown
from diag.verdict.equivalence import rank_classes
from diag.verdict.evidence import evidence_for
from diag.verdict.exits import dedupe, exited_verdict, seen_lines, with_log_deaths
from diag.verdict.features import ProcSignals, extract
from diag.verdict.gpu import gpu_findings
from diag.verdict.gpu_health import gpu_health_findings, health_records
from diag.verdict.graph import wait_graph
from diag.verdict.graph_nodes import Measured
from diag.verdict.io_cause import io_tail
from diag.verdict.job_quiet import job_quiet
from diag.verdict.log_deaths import log_deaths
from diag.verdict.machine import hold_records
from diag.verdict.participants import participants
from diag.verdict.progress import log_growth
from diag.verdict.rules import TABLE, Outcome, apply
from diag.verdict.situation import Situation, gone_ranks, measure, working_keys
from diag.verdict.sources import Context, EvidenceSource, Finding, run_sources
from diag.verdict.startup_verdict import startup_parts
from diag.verdict.stragglers import straggler_parts
from diag.verdict.wait_age import stopped_age, wait_age
from diag.verdict.wording import group_by_wait, summary_of, waits_phrase
from diag.verdict.work import with_job_context
from diag.vocab import PreRuleId, RuleId, VerdictState

# The evidence sources beyond CPU, stacks, I/O and logs, run in this order (a new source is
# a ``Context -> Iterable[Finding]`` function added here; nothing registers itself).
EVIDENCE_SOURCES: Tuple[EvidenceSource, ...] = (
    gpu_findings,
    flight_recorder_source,
    nccl_log_source,
    ras_source,
    gpu_error_source,
    gpu_health_findings,  # throttled GPUs, XIDs, ECC (issue #37)
)


def _unknown(bundle: Bundle, rule: PreRuleId, text: str) -> Verdict:
    return Verdict(
        state="unknown",
        confidence=0.0,
        summary=summary_of("unknown", text),
        exit_code=bundle.target.exit_code,
        rule=rule,
    )


def classify(bundle: Bundle) -> Verdict:
    """The verdict for a bundle; never raises on a well-formed bundle. What it derives from
    the bundle once is kept in one index for the verdict's time (``bundle_index``)."""
    with judging():
        return _classify(bundle)


def _classify(bundle: Bundle) -> Verdict:
    if not bundle.samples:
        return _unknown(bundle, "no_samples", "no samples were taken - nothing to judge")
    procs = with_job_context(extract(bundle))  # poll-loop followers, in-job clients
    if not procs and bundle.target.launched and bundle.target.exit_code is not None:
        # A launched command that exited (and was reaped) before its first sample: no
        # process to read, but its exit code is known - it exited, it is no mystery.
        return exited_verdict(bundle, procs)
    if not procs:
        return _unknown(bundle, "nothing_readable", "no process could be read in any sample")
    if not any(ps.status == "alive" for ps in bundle.samples[-1].processes):
        return exited_verdict(bundle, procs)
    logs = log_growth(bundle)
    ctx = Context(bundle=bundle, procs=procs, participants=participants(procs), logs=logs)
    findings = run_sources(ctx, EVIDENCE_SOURCES)
    classes = tuple(rank_classes(bundle, ctx.participants))
    intervals = max((p.intervals for p in procs), default=0)
    situation = measure(ctx, findings, classes, intervals)
    graph, graph_problem = _graph_of(ctx, working_keys(situation), situation)
    situation = _with_graph(situation, graph)
    outcome = apply(situation)
    problems = outcome.problems
    if graph_problem:
        skipped = [r.id for r in TABLE if "graph" in r.needs]
        problems = (f"{graph_problem}; judged without it (rules skipped: {', '.join(skipped)})",)
        problems += outcome.problems
    return _qualified(ctx, situation, outcome, findings, graph, problems)


def _with_graph(s: Situation, graph: Optional[WaitGraph]) -> Situation:
    import dataclasses

    return dataclasses.replace(s, graph=graph)


def _graph_of(
    ctx: Context, working: FrozenSet[Tuple[str, int]], s: Situation
) -> Tuple[Optional[WaitGraph], str]:
    """The wait-for graph, or None and why: a bug in the graph must not cost the verdict, and
    must not go unseen either (it turns off every rule that reads it and every suspect's
    chain)."""
    try:
        gone = [(d.rank, d.pid, d.line) for d in gone_ranks(ctx) if d.rank is not None]
        measured = Measured(s.flow_stalls, s.store_join, s.file_lock_waits)
        graph = wait_graph(ctx.bundle, ctx.procs, ctx.participants, working, gone, measured)
        return graph, ""
    except Exception as exc:
        return None, f"the wait-for graph failed: {type(exc).__name__}: {exc}"[:300]


def _qualified(
    ctx: Context,
    s: Situation,
    outcome: Outcome,
    findings: Sequence[Finding],
    graph: Optional[WaitGraph],
    problems: Tuple[str, ...],
) -> Verdict:
    """The deciding rule's answer with what the capture's shape adds: evidence, suspects named
    by the log and the graph, the one-snapshot caveat, lower confidence without stacks."""
    d = outcome.decision
    state: VerdictState = d.state
    text, confidence = d.text, d.confidence
    evidence = evidence_for(ctx, s.classes) + [f.evidence for f in findings]
    # A job whose output moves is no hang: a rank a few collectives behind in dumps taken at
    # different moments is the skew of progress, not a suspect (the evidence still shows it).
    found = [x for f in findings for x in f.suspects] if state != "progressing" else []
    suspects: List[Suspect] = list(d.suspects) + found
    warnings: Tuple[str, ...] = ()
    if state == "deadlocked":
        suspects = with_log_deaths(
            suspects, log_deaths(ctx.logs, ctx.procs, seen_lines(ctx.bundle))
        )
    if graph is not None:
        suspects = with_chains(suspects, graph)
        warnings = graph_warnings(state, graph)
    parts = ctx.participants
    state, text, confidence, suspects = _sampling_caveats(
        s, parts, state, text, confidence, suspects, evidence, outcome.rule.id
    )
    if s.intervals == 0 and state == "unknown" and graph is not None and graph.chains:
        # The chains say "kill it" of a cycle they found in the one snapshot; the verdict
        # does not: the report's graph section must not say it unqualified.
        warnings += (ONE_SNAPSHOT_CHAINS,)
    straggling = straggler_parts(state, ctx.bundle, parts, suspects)  # who the ranks wait for
    text += straggling.tail
    evidence += straggling.evidence
    suspects += straggling.suspects
    startup = startup_parts(state, ctx.bundle, ctx.procs, s.startup)  # phases, ETA, timeouts
    text += startup.tail
    text += io_tail(state, ctx.bundle, suspects)  # a throttled device named (#37)
    working = [x.pid for x in suspects] if state == "slow" else []
    age = wait_age(state, ctx.bundle, parts, working)  # since when, from the kernel
    text += age.tail
    text += countdown(state, ctx.bundle, parts, age, startup.phases)  # ... and until when
    quiet = job_quiet(state, ctx.bundle, ctx.procs, age)  # ... and the whole job, since when
    text += quiet.tail
    if problems:
        text += " (judged with part of the verdict missing: see its problems)"
    return Verdict(
        state=state,
        confidence=round(max(0.0, min(1.0, confidence)), 2),
        summary=summary_of(state, text),
        evidence=tuple(evidence),
        suspects=dedupe(suspects),
        classes=s.classes if isinstance(s.classes, tuple) else tuple(s.classes),
        graph=graph,  # who waits on whom: diag.verdict.graph
        warnings=warnings + startup.warnings,
        phases=startup.phases,
        rule=outcome.rule.id,
        also_matched=outcome.also,
        problems=problems,
        stragglers=straggling.record,
        quiet_since_s=age.since_s,
        quiet_for_s=age.for_s,
        job_quiet_since_s=quiet.since_s,
        stopped_since_s=_stopped_since(outcome, ctx),
        cpu_holds=hold_records(
            ctx.bundle, ctx.procs, lambda: s.cpu_holds
        ),  # what kept each from the CPU
        gpu_health=health_records(ctx.bundle),  # each GPU's clocks, throttling, faults
    )


def _stopped_since(outcome: Outcome, ctx: Context) -> Optional[float]:
    """Since when the stopped processes have been stopped, where ``rank_stopped`` decided."""
    if outcome.rule.id != "rank_stopped":
        return None
    age = stopped_age(ctx.bundle, [p for p in ctx.procs if p.stopped and not p.dead])
    return None if age is None else age.since_s


# Rules whose "deadlocked" rests on nothing moving among peers that wait on each other: from
# one sample (no deltas) that is any healthy job's instant in a collective - unless the ranks
# wait in different collectives (``_crossed``). The others decide from what one sample shows
# for good: a stopped or dead rank, a death in the log, a lock cycle.
_NEEDS_MOTION: FrozenSet[RuleId] = frozenset({"peers_wait", "gpu_spins"})


ONE_SNAPSHOT_CHAINS = (
    "one snapshot: the wait-for chains are where each thread was at that instant, not that "
    "it stays there - take more samples before acting on them"
)


def _crossed(s: Situation) -> bool:
    """Ranks waiting in two different peer waits (``all_reduce`` and ``barrier``): collectives
    that cannot both complete - a mismatch one sample shows, unlike ranks met in one."""
    waits = {(p.main_wait.kind, p.main_wait.label) for p in s.peer_waiters if p.main_wait}
    return len(waits) >= 2


def _sampling_caveats(
    s: Situation,
    parts: Sequence[ProcSignals],
    state: VerdictState,
    text: str,
    confidence: float,
    suspects: List[Suspect],
    evidence: List[Evidence],
    rule: RuleId,
) -> Tuple[VerdictState, str, float, List[Suspect]]:
    """What the capture's shape takes away: one snapshot of a weak pattern is unknown, one
    sample has no deltas (half the confidence), a capture without Python stacks is less sure.
    ``evidence`` gets the single-sample line."""
    py_ok = any(p.py_ok for p in parts)
    if s.intervals == 0 and state == "deadlocked" and rule in _NEEDS_MOTION and not _crossed(s):
        # Ranks waiting on each other with "nothing moving" is what a healthy job looks like
        # at any instant its ranks meet in a collective (a one-sample capture of a healthy
        # gloo training job read "deadlocked ... kill the job" 5 times in 8): nothing moving
        # needs a second sample.
        state, suspects = "unknown", []
        where = waits_phrase(group_by_wait([p for p in parts if not p.dead]))
        text = (
            f"one snapshot: {where} - the ranks of a healthy job meet in their collectives "
            "every step, and one sample cannot tell a wait that lasts from one that ends: "
            "take more samples before acting"
        )
    elif s.intervals == 0 and state == "deadlocked" and (confidence < 0.7 or not py_ok):
        # One snapshot of a weak pattern (a just-started program, a probe that failed) says
        # where things are, not that they will stay there.
        state, suspects = "unknown", []
        text += " - but that is one snapshot"
    if s.intervals == 0:
        confidence *= 0.5
        text += " (one sample: no deltas, so progress cannot be measured - capture more)"
        evidence.insert(
            0,
            Evidence(
                signal="single-sample",
                section="timeline",
                detail="only one sample: CPU, I/O and log deltas unknown",
            ),
        )
    elif s.intervals == 1:
        confidence *= 0.85
    if parts and not py_ok:
        confidence *= 0.8
    return state, text, confidence, suspects


__all__ = ["EVIDENCE_SOURCES", "classify", "graph_state", "verdict_line"]


def verdict_line(verdict: Optional[Verdict]) -> str:
    """The one line ``diag capture`` prints at the end."""
    if verdict is None:
        return "verdict: unknown"
    return f"verdict: {verdict.summary} (confidence {verdict.confidence:.2f})"
