"""The verdict: a pure function from a bundle's sample series to progressing / slow / idle /
deadlocked / exited (or unknown), with evidence, suspects and rank equivalence classes.

The rules are ordered the way an on-call engineer reasons, and each guards against one
classic misread (see domain notes, "What a naive classifier gets wrong"):

1. Nothing sampled -> unknown. Every process gone -> exited.
2. A rank died while its peers are still there and nothing progresses -> deadlocked: the peers
   wait for a rank that will never come (suspect: the dead rank). A rank stopped by a signal
   or debugger (state T) is the same story until someone sends SIGCONT.
3. The job's own output moves (log growth that is not a "still waiting" heartbeat, bytes
   written by a process whose stack or compute moves, or megabytes sent by a rank sampled in
   a collective - the collectives complete) -> progressing.
4. Processes work without visible output: CPU burning *outside* known waits, reads rising,
   memory growing, a GPU at full power -> slow ("looks hung, isn't"). CPU spent spinning in
   a known wait (CUDA synchronize, a collective) is not work; one long C call holding the GIL
   is (the frame is not a wait).
5. Nothing moves: a rank waiting on a peer (unless the odd rank serves requests on its own
   port), a process waiting for pool results nobody computes, a lock cycle, a lock whose own
   process has no way out, or a GPU spinning at idle power -> deadlocked; waits that something
   outside can end (a listening port, accept, a timer that fires or is pending) -> idle; waits
   only on each other, or an event loop / socket read with no timeout and no port (a peer
   that never answers) -> deadlocked, less sure. One snapshot of a weak pattern -> unknown.

Launchers and helpers (torchrun, resource trackers, ``sleep``) are kept out of the decision:
participants are the ranks, or failing that the processes that are not merely waiting on
their children.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from diag.model import Bundle, Evidence, RankClass, Suspect, Verdict
from diag.verdict.collectives import (
    flight_recorder_source,
    gpu_error_source,
    nccl_log_source,
    ras_source,
)
from diag.verdict.equivalence import odd_classes, rank_classes
from diag.verdict.evidence import evidence_for, exit_evidence
from diag.verdict.features import COMPUTE_PCT, ProcSignals, extract
from diag.verdict.gpu import gpu_findings
from diag.verdict.participants import (
    door,
    participants,
    receives_work,
    serves,
    serving_ports,
    strong_rank,
)
from diag.verdict.pipe_story import pipe_story, writers_of
from diag.verdict.progress import log_growth
from diag.verdict.sources import (
    PROGRESS,
    STUCK,
    WORK,
    Context,
    EvidenceSource,
    Finding,
    run_sources,
)
from diag.verdict.stories import (
    dead_story,
    lock_story,
    peer_story,
    pool_story,
    progress_story,
    stopped_story,
    work_story,
)
from diag.verdict.waits import LOCK, PEER, RESULT, STDIN
from diag.verdict.wording import group_by_wait, verb, waits_phrase, where, who

READ_MIN_BYTES = 1 << 20  # rchar rise that counts as loading (per window)
RSS_MIN_BYTES = 64 << 20  # memory growth that counts as work
WRITE_MIN_BYTES = 1  # any output bytes, when the writer's own stack/CPU moves too
TRAFFIC_MIN_BYTES = 256 << 10  # sent by a rank waiting in a collective: the data moves

# The evidence sources beyond CPU, stacks, I/O and logs, run in this order (a new source is
# a ``Context -> Iterable[Finding]`` function added here; nothing registers itself).
EVIDENCE_SOURCES: Tuple[EvidenceSource, ...] = (
    gpu_findings,
    flight_recorder_source,
    nccl_log_source,
    ras_source,
    gpu_error_source,
)


def _verdict(state: str, confidence: float, summary: str, **kw: Any) -> Verdict:
    clamped = round(max(0.0, min(1.0, confidence)), 2)
    return Verdict(state=state, confidence=clamped, summary=summary, **kw)


def classify(bundle: Bundle) -> Verdict:
    """The verdict for a bundle; never raises on a well-formed bundle."""
    if not bundle.samples:
        return _verdict(
            "unknown",
            0.0,
            "unknown: no samples were taken - nothing to judge",
            exit_code=bundle.target.exit_code,
        )
    procs = extract(bundle)
    if not procs:
        return _verdict(
            "unknown",
            0.0,
            "unknown: no process could be read in any sample",
            exit_code=bundle.target.exit_code,
        )
    last = bundle.samples[-1]
    if not any(ps.status == "alive" for ps in last.processes):
        return _exited(bundle, procs)
    parts = participants(procs)
    logs = log_growth(bundle)
    ctx = Context(bundle=bundle, procs=procs, participants=parts, logs=logs)
    findings = run_sources(ctx, EVIDENCE_SOURCES)
    classes = tuple(rank_classes(bundle, parts))
    intervals = max((p.intervals for p in procs), default=0)
    state, confidence, summary, evidence, suspects = _decide(ctx, findings, classes, intervals)
    evidence = evidence + [f.evidence for f in findings]
    suspects = suspects + [s for f in findings for s in f.suspects]
    if (
        intervals == 0
        and state == "deadlocked"
        and (confidence < 0.7 or not any(p.py_ok for p in parts))
    ):
        # One snapshot of a weak pattern (a just-started program, a probe that failed) says
        # where things are, not that they will stay there.
        state, suspects = "unknown", []
        summary = "unknown: " + summary.split(": ", 1)[-1] + " - but that is one snapshot"
    if intervals == 0:
        confidence *= 0.5
        summary += " (one sample: no deltas, so progress cannot be measured - capture more)"
        evidence.insert(
            0,
            Evidence(
                signal="single-sample",
                section="timeline",
                detail="only one sample: CPU, I/O and log deltas unknown",
            ),
        )
    elif intervals == 1:
        confidence *= 0.85
    if parts and not any(p.py_ok for p in parts):
        confidence *= 0.8
    return _verdict(
        state,
        confidence,
        summary,
        evidence=tuple(evidence),
        suspects=_dedupe(suspects),
        classes=classes,
    )


def _dedupe(suspects: Sequence[Suspect]) -> Tuple[Suspect, ...]:
    seen = set()
    out = []
    for s in suspects:
        if (s.host, s.pid) not in seen:
            seen.add((s.host, s.pid))
            out.append(s)
    return tuple(out)


def _exited(bundle: Bundle, procs: Sequence[ProcSignals]) -> Verdict:
    code, evidence = exit_evidence(bundle, procs)
    code_text = f" (exit code {code})" if code is not None else ""
    return _verdict(
        "exited",
        0.95,
        f"exited: the target is gone{code_text}",
        evidence=tuple(evidence),
        exit_code=code,
    )


def _decide(
    ctx: Context, findings: Sequence[Finding], classes: Sequence[RankClass], intervals: int
) -> Tuple[str, float, str, List[Evidence], List[Suspect]]:
    parts = ctx.participants
    alive = [p for p in parts if not p.dead]
    dead = [p for p in parts if p.dead]
    ev = evidence_for(ctx, classes)
    leans = {f.lean for f in findings}

    progress_logs = [lg for lg in ctx.logs if lg.progress]
    # Output bytes count unless the writer's main thread sits unchanged in a peer or lock
    # wait: then it is a heartbeat thread talking about a stuck job - unless megabytes flow:
    # a collective that moves data completes, and a loop that calls it from one line is
    # sampled in the same place every time (a stuck collective moves nothing).
    writers = [
        p
        for p in alive
        if p.write_delta_bytes >= WRITE_MIN_BYTES
        and (
            p.compute_intervals
            or p.main_moved
            or p.main_family not in (PEER, LOCK)
            or p.write_delta_bytes >= TRAFFIC_MIN_BYTES
        )
    ]
    progressing = bool(progress_logs or writers or PROGRESS in leans)

    half = max(1, (intervals + 1) // 2)
    workers = [p for p in alive if p.compute_pct >= COMPUTE_PCT and p.compute_intervals >= half]
    readers = [p for p in alive if p.read_delta_bytes >= READ_MIN_BYTES]
    growers = [p for p in alive if p.rss_delta_bytes >= RSS_MIN_BYTES]
    if intervals == 0:  # no deltas: a thread running outside any wait is all we can see
        workers = [p for p in alive if p.main_wait is not None and p.main_wait.kind is None]
    working = workers or readers or growers or WORK in leans

    peer_waiters = [p for p in alive if p.main_family == PEER]
    lockers = [p for p in alive if p.lock_waiters]

    # A dead process explains a hang when it was a rank, or when the living wait on someone
    # (a server with a finished, unreaped helper child is not deadlocked by it).
    ports = serving_ports(ctx.procs)
    # Waits only the job itself can end: peers, locks, results, its own queues.
    waiting_on_others = [
        p
        for p in alive
        if not ports
        and (
            p.main_family in (PEER, LOCK, RESULT)
            or (p.main_wait and p.main_wait.kind in ("blocked", "queue"))
        )
    ]
    ranked_dead = [p for p in dead if strong_rank(p)] or (
        dead if any(strong_rank(p) for p in parts) else []
    )
    if (
        dead
        and alive
        and not progressing
        and (ranked_dead or waiting_on_others)
        and not (workers and not peer_waiters)
    ):
        summary, suspects = dead_story(dead, alive, ctx)
        return "deadlocked", 0.9 if peer_waiters else 0.75, summary, ev, suspects
    stopped = [p for p in alive if p.stopped]
    if stopped and not progressing and not workers:
        summary, suspects = stopped_story(stopped, alive)
        return "deadlocked", 0.85, summary, ev, suspects
    if progressing and intervals > 0:
        summary, confidence, suspects = progress_story(progress_logs, writers, workers, dead)
        return "progressing", confidence, summary, ev, suspects
    if working:
        summary, suspects = work_story(workers, readers, growers, alive, peer_waiters)
        confidence = 0.8 if (workers or readers) else 0.6
        return "slow", confidence, summary, ev, suspects
    # Collective records (Flight Recorder) that show one rank behind the others name the
    # culprit whatever the stacks show: a wait inside C++ (work.wait()) shows only its caller.
    culprits = [f for f in findings if f.lean == STUCK and f.suspects]
    if culprits:
        first = culprits[0]
        summary = (
            f"deadlocked: {first.evidence.detail} - the other ranks wait for it; see where it "
            f"is with `py-spy dump --pid {first.suspects[0].pid}`"
        )
        return "deadlocked", 0.85, summary, ev, [s for f in culprits for s in f.suspects]
    odd = odd_classes(classes)
    doors = [p for p in alive if door(p, ports) or p.timer_threads]
    servers = [p for p in alive if p.main_family != PEER]
    if (
        peer_waiters
        and servers
        and all(serves(p, ports) for p in servers)
        and all(receives_work(p) for p in peer_waiters)
    ):
        # A rank serves a port and the others wait for it to hand them work (a request
        # broadcast): a ready server, not a diverged rank.
        groups = group_by_wait(alive)
        summary = (
            f"idle: {who(servers)} {verb(servers, 'serves', 'serve')} "
            f"{', '.join(':' + str(p) for p in ports[:4])} and {waits_phrase(groups[:3])} - "
            "healthy, waiting for requests"
        )
        return "idle", 0.6, summary, ev, []
    if peer_waiters:
        summary, suspects, confidence = peer_story(peer_waiters, alive, odd, classes, ctx)
        return "deadlocked", confidence, summary, ev, suspects
    result_waiters = [p for p in alive if p.main_family == RESULT]
    if result_waiters:
        summary, suspects = pool_story(result_waiters, alive)
        return "deadlocked", 0.7, summary, ev, suspects
    # Thread locks are process-local: a cycle needs two locks in one process, and only a
    # thread of the same process can release one - so a locker whose own process has no door
    # (timer, port, input) waits forever, whatever doors other processes have.
    cycle = any(len({a for _, a, _ in p.lock_waiters if a}) >= 2 for p in lockers)
    if lockers and cycle:
        summary, suspects = lock_story(lockers, alive)
        return "deadlocked", 0.8, summary, ev, suspects
    stuck_lockers = [p for p in lockers if not door(p, serving_ports([p]))]
    if STUCK in leans:
        return (
            "deadlocked",
            0.65,
            "deadlocked: the GPU reads busy at idle power and nothing "
            f"else moves ({waits_phrase(group_by_wait(alive)[:2])}) - a kernel waits on a "
            "peer that never arrives; kill the job and restart",
            ev,
            [],
        )
    if stuck_lockers:
        summary, suspects = lock_story(stuck_lockers, alive)
        return "deadlocked", 0.6, summary, ev, suspects
    if ports or doors:
        groups = group_by_wait(alive)
        port_text = f", {', '.join(':' + str(p) for p in ports[:4])} listening" if ports else ""
        # No port: input on stdin or a timer wakes it (a poll, a heartbeat, a retry with
        # backoff). The stacks cannot tell "waits for work" from "retries what never comes".
        on_stdin = [p for p in doors if p.main_wait and p.main_wait.kind == STDIN]
        tail = "healthy, waiting for work"
        if on_stdin and not ports:
            tail = (
                f"{who(on_stdin)} {verb(on_stdin, 'reads', 'read')} stdin (fd 0): it waits for "
                "input someone must type or pipe in (a prompt?) - answer it, or run the job "
                "with stdin closed (< /dev/null)"
            )
        elif not ports:
            tail = (
                "no port to serve, it wakes on a timer (polling, a heartbeat, or retrying "
                "something outside the job): healthy if it waits for work, stuck if what it "
                "polls for never comes - its log says which"
            )
        summary = (
            f"idle: nothing moves, no rank waits on a peer{port_text}; "
            f"{waits_phrase(groups[:3])} - {tail}"
        )
        return "idle", 0.8 if ports else 0.6, summary, ev, []
    writers = writers_of(alive)
    if writers and len(writers) * 2 >= len(alive):
        summary, suspects = pipe_story(writers, ctx.procs)
        return "deadlocked", 0.6, summary, ev, suspects
    groups = group_by_wait(alive)
    summary = (
        f"deadlocked: nothing moves and nothing can wake it by itself (no listening port, no "
        f"timer, no wakeups): {waits_phrase(groups[:3])} - waiting on each other, or on a "
        "peer that never answers"
    )
    kinds = {p.main_wait.kind for p in alive if p.main_wait}
    if "write-full" in kinds:
        summary += " (a write blocks on a full pipe or socket: its reader stopped reading)"
    if "fifo-open" in kinds:
        summary += " (opening a named pipe (fifo) waits for a process to open its other end)"
    if "disk" in kinds:
        summary += " (state D: an uninterruptible kernel wait - storage or NFS not answering)"
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=f"blocked in {where(p)}")
        for p in alive[:4]
    ]
    return "deadlocked", 0.5, summary, ev, suspects


def verdict_line(verdict: Optional[Verdict]) -> str:
    """The one line ``diag capture`` prints at the end."""
    if verdict is None:
        return "verdict: unknown"
    return f"verdict: {verdict.summary} (confidence {verdict.confidence:.2f})"
