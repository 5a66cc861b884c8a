"""The verdict: a pure function from a bundle's sample series to progressing / slow / idle /
deadlocked / exited (or unknown), with evidence, suspects and rank equivalence classes.

``measure`` reads the features once into a ``Situation``; ``RULES`` is the ordered rule table
(one small function each, first match decides), ordered the way an on-call engineer reasons,
and each guards against one classic misread (see domain notes, "What a naive classifier gets
wrong"):

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

The wait-for graph (``diag.verdict.graph``) is drawn after the measures and before the rules:
a rule may read it (``chains_never_end``: every chain ends stopped, dead or in a cycle), the
suspects carry the chain that ends at them, and ``graph_state`` - the state the graph alone
gives - is asserted to agree with the rules on every recorded and scenario capture (the
exceptions named in the tests). A rank the job's own log says died, that no live process is,
decides like a dead rank seen (``log_names_dead_rank``; ``diag.verdict.log_deaths``).

Launchers and helpers (torchrun, resource trackers, ``sleep``) are kept out of the decision:
participants are the ranks, or failing that the processes that are not merely waiting on
their children.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import Bundle, Evidence, RankClass, Suspect, Verdict, WaitGraph
from diag.verdict.collectives import (
    flight_recorder_source,
    gpu_error_source,
    nccl_log_source,
    ras_source,
)
from diag.verdict.equivalence import odd_classes, rank_classes
from diag.verdict.evidence import evidence_for, exit_evidence
from diag.verdict.features import COMPUTE_PCT, ProcSignals, extract
from diag.verdict.file_locks import holder_label, lock_waits
from diag.verdict.gpu import gpu_findings
from diag.verdict.graph import (
    OUT_CLIENTS,
    OUT_NETWORK,
    OUT_STDIN,
    OUT_TIMER,
    OUTSIDE_JOB,
    is_outside,
    node_key,
    wait_graph,
)
from diag.verdict.log_deaths import LogDeath, log_deaths
from diag.verdict.participants import (
    door,
    is_helper,
    is_rank_helper,
    participants,
    receives_work,
    serves,
    serving_ports,
    strong_rank,
)
from diag.verdict.pipe_story import pipe_story, writers_of
from diag.verdict.progress import LogGrowth, log_growth
from diag.verdict.rendezvous import mismatch, waiting_agents
from diag.verdict.sources import (
    PROGRESS,
    STUCK,
    WORK,
    Context,
    EvidenceSource,
    Finding,
    run_sources,
)
from diag.verdict.startup import with_startup
from diag.verdict.stories import (
    dead_story,
    helper_work_story,
    lock_story,
    peer_story,
    pool_story,
    progress_story,
    stopped_story,
    work_story,
)
from diag.verdict.waits import CHILD, LOCK, PEER, RESULT, SERVE, STDIN
from diag.verdict.wording import group_by_wait, size, verb, waits_phrase, where, who

READ_MIN_BYTES = 1 << 20  # rchar rise that counts as loading (per window)
RSS_MIN_BYTES = 64 << 20  # memory growth that counts as work
WRITE_MIN_BYTES = 1  # any output bytes, when the writer's own stack/CPU moves too
TRAFFIC_MIN_BYTES = 256 << 10  # sent by a rank waiting in a collective: the data moves
SERVED_MIN_BYTES = 16 << 10  # client traffic (both ways) that counts as requests served
HELPER_WORK_PCT = 25.0  # children's CPU (% of a core) that makes their parent's wait work

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
    state, confidence, summary, evidence, suspects, graph = _decide(
        ctx, findings, classes, intervals
    )
    evidence = evidence + [f.evidence for f in findings]
    suspects = suspects + [s for f in findings for s in f.suspects]
    warnings: Tuple[str, ...] = ()
    if state == "deadlocked":
        suspects = with_log_deaths(suspects, log_deaths(logs, procs, _seen_lines(bundle)))
    if graph is not None:
        suspects = with_chains(suspects, graph)
        warnings = graph_warnings(state, graph)
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
    verdict = _verdict(
        state,
        confidence,
        summary,
        evidence=tuple(evidence),
        suspects=_dedupe(suspects),
        classes=classes,
        graph=graph,  # who waits on whom: diag.verdict.graph
        warnings=warnings,
    )
    return with_startup(verdict, bundle, procs)  # startup phases, ETA, timeout warnings


def working_keys(s: Situation) -> FrozenSet[Tuple[str, int]]:
    """Processes whose output the verdict measured moving - bytes written, requests
    answered, a progress log they write, memory growing, children computing for them: the
    graph's "working" nodes, where chains of waits on them end."""
    keys = {p.key for p in [*s.writers, *s.answering, *s.growers]}
    # A parent working through children the capture sees: its chain goes on to them (they
    # compute); through children already reaped (their CPU in its cutime): it is the work.
    parents = {(q.key[0], q.info.ppid) for q in s.ctx.procs if not q.dead}
    keys.update(p.key for p, _, _ in s.helped if (p.key[0], p.pid) not in parents)
    log_pids = {pid for lg in s.progress_logs for pid in lg.pids}
    keys.update(p.key for p in s.alive if p.pid in log_pids)
    return frozenset(keys)


def gone_ranks(ctx: Context) -> List[LogDeath]:
    """Ranks the job's log says died that no live process of the job is (while other ranks
    live): killed and reaped before diag looked, or dead and not restarted."""
    ranks = [p for p in ctx.procs if p.rank is not None and not is_rank_helper(p)]
    live = {p.rank for p in ranks if not p.dead}
    if not live:
        return []
    deaths = log_deaths(ctx.logs, ctx.procs)
    return [d for d in deaths if d.rank is not None and d.rank not in live]


def _graph_of(ctx: Context, working: FrozenSet[Tuple[str, int]]) -> Optional[WaitGraph]:
    try:
        gone = [(d.rank, d.pid, d.line) for d in gone_ranks(ctx) if d.rank is not None]
        return wait_graph(ctx.bundle, ctx.procs, ctx.participants, working, gone)
    except Exception:  # a bug in the graph must not cost the verdict
        return None


# How a chain of waits ends when nothing can ever end it: a stopped or dead process, or a
# cycle of processes waiting on each other. ("lock"/"self": only the process's own threads
# can end the wait - one of them may be sleeping on a timer; the lock rules judge those.)
DEAD_ENDS = frozenset({"stopped", "dead", "cycle"})


def _chain_of(key: str, graph: WaitGraph) -> str:
    """The first chain line that ends at the node ``key`` (or has it in its cycle)."""
    return next((line for line, at in zip(graph.chains, graph.line_ends) if key in at), "")


def graph_state(graph: Optional[WaitGraph]) -> Optional[str]:
    """The state the wait-for graph alone gives, for checking the rules against it (a test
    asserts they agree on every recorded and scenario capture, exceptions named):

    - a chain ends at a stopped process, or at a dead one someone waits on other than by
      waitpid (or a dead rank) -> deadlocked: it outranks the rest, as in the rules;
    - else one ends in work (computing, its output moving, disk I/O) -> "slow|progressing";
    - else requests from outside wait unanswered on a chain -> deadlocked;
    - else every end waits on a door that will open - requests, a timer, stdin -> idle;
    - else (cycles, locks, a peer not in the capture that never answers) -> deadlocked.
    None without chains."""
    if graph is None or not graph.reasons:
        return None
    by_key = {n.key: n for n in graph.nodes}
    # A child's exit ends its parent's waitpid: only other waits on a dead process (a peer,
    # a pipe, a result) are waits it will never answer.
    waited_on = {e.dst for e in graph.edges if e.kind != "child"}
    doors: Dict[str, Set[str]] = {}
    for e in graph.edges:
        if is_outside(e.dst):
            doors.setdefault(e.src, set()).add(e.dst)
    lock_holders = {  # file locks' holders outside the job
        e.dst
        for e in graph.edges
        if e.kind == "file-lock" and e.dst in by_key and by_key[e.dst].label.endswith(OUTSIDE_JOB)
    }
    dead = stopped = work = False
    for key in graph.ends:
        n = by_key.get(key)
        if n is None:
            continue
        if n.state == "stopped":
            stopped = True
        elif n.state in ("zombie", "exited") and (key in waited_on or n.label.startswith("rank ")):
            dead = True
        elif n.state in ("computing", "working", "disk", "spinning"):
            work = work or n.state != "spinning"
        elif key in lock_holders and n.state in ("sleeping", "blocked"):
            work = True  # a file lock's holder outside the job, about its own business
    if stopped or dead:
        return "deadlocked"
    if work:
        return "slow|progressing"
    if any(e.src == OUT_CLIENTS for e in graph.edges):
        return "deadlocked"  # requests unanswered and nothing on their chain works
    live_ends = [
        k for k in graph.ends if k in by_key and by_key[k].state not in ("zombie", "exited")
    ]
    if not live_ends:  # only helpers that exited normally, nobody waiting on them
        busy = any(n.state in ("computing", "working") for n in graph.nodes)
        return "slow|progressing" if busy else None
    if any(e.kind == "lock" and e.src == e.dst and e.src in live_ends for e in graph.edges):
        return "deadlocked"  # a lock only its own threads hold, none of which will run
    open_doors = {OUT_NETWORK, OUT_TIMER, OUT_STDIN, OUT_CLIENTS}
    if live_ends and all(doors.get(k, set()) & open_doors for k in live_ends):
        return "idle"
    if any(doors.get(k, set()) & open_doors for k in live_ends) and all(
        doors.get(k) for k in live_ends
    ):
        return "idle"  # some wait on a peer not in the capture, others on open doors
    return "deadlocked"


def with_chains(suspects: Sequence[Suspect], graph: WaitGraph) -> List[Suspect]:
    """Each suspect with the chain of waits that ends at it (the graph's why)."""
    out = []
    for s in suspects:
        chain = _chain_of(f"{s.host}/{s.pid}", graph)
        if "→" not in chain and ": a cycle" not in chain:
            chain = ""  # a chain of one: the reason already says what it does
        out.append(msgspec.structs.replace(s, chain=chain) if chain and not s.chain else s)
    return out


def graph_warnings(state: str, graph: WaitGraph) -> Tuple[str, ...]:
    """What the wait-for graph shows that the verdict's state does not say: a part of an idle
    or working job that can never wake (two processes waiting on each other behind a healthy
    front end)."""
    if state not in ("idle", "slow", "progressing") or not graph.reasons:
        return ()
    stuck = [line for line, r in zip(graph.chains, graph.reasons) if r in DEAD_ENDS]
    return tuple(f"part of the job can never wake: {line}" for line in stuck[:3])


def _seen_lines(bundle: Bundle) -> List[str]:
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


def _dedupe(suspects: Sequence[Suspect]) -> Tuple[Suspect, ...]:
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


def _exited(bundle: Bundle, procs: Sequence[ProcSignals]) -> Verdict:
    code, evidence = exit_evidence(bundle, procs)
    code_text = f" (exit code {code})" if code is not None else ""
    error = last_exception(bundle) if code not in (None, 0) else ""
    error_text = f"; its log ends in `{error}`" if error else ""
    deaths = log_deaths(log_growth(bundle), procs, _seen_lines(bundle))
    suspects = with_log_deaths([], deaths) if code not in (None, 0) or deaths else []
    if suspects and deaths:
        error_text += f"; the log says a process died first: `{deaths[0].line[:160]}`"
    return _verdict(
        "exited",
        0.95,
        f"exited: the target is gone{code_text}{error_text}",
        evidence=tuple(evidence),
        suspects=tuple(suspects),
        exit_code=code,
    )


@dataclass(frozen=True)
class Situation:
    """What every rule reads, measured once: who works, who writes, who waits on what."""

    ctx: Context
    findings: Sequence[Finding]
    classes: Sequence[RankClass]
    intervals: int
    alive: List[ProcSignals]
    dead: List[ProcSignals]
    leans: FrozenSet[Optional[str]]
    progress_logs: List[LogGrowth]
    writers: List[ProcSignals]
    progressing: bool
    workers: List[ProcSignals]
    readers: List[ProcSignals]
    growers: List[ProcSignals]
    working: bool
    peer_waiters: List[ProcSignals]
    lockers: List[ProcSignals]
    ports: List[int]
    waiting_on_others: List[ProcSignals]
    ranked_dead: List[ProcSignals]
    # Processes whose child processes compute (parent, % of a core, the children's names).
    helped: List[Tuple[ProcSignals, float, List[str]]]
    answering: List[ProcSignals]  # servers whose client connections moved data
    graph: Optional[WaitGraph] = None  # who waits on whom (diag.verdict.graph)


# A rule's answer: state, confidence, summary, suspects. None: the rule does not apply.
Decision = Tuple[str, float, str, List[Suspect]]
Rule = Callable[[Situation], Optional[Decision]]


def _wakeup_writes(p: ProcSignals) -> bool:
    """Writes of at most 8 bytes each are an event loop waking a thread (eventfd: 8 bytes, the
    asyncio self-pipe: 1), not output: Ray's idle daemons, a loop's call_soon_threadsafe."""
    calls = p.write_calls_delta
    return calls > 0 and p.write_delta_bytes <= 8 * calls


def measure(
    ctx: Context, findings: Sequence[Finding], classes: Sequence[RankClass], intervals: int
) -> Situation:
    parts = ctx.participants
    alive = [p for p in parts if not p.dead]
    dead = [p for p in parts if p.dead]
    leans = frozenset(f.lean for f in findings)
    # A log counts when the job writes it: not one only helpers and framework daemons hold.
    part_keys = {p.key for p in parts}
    helpers = {p.pid for p in ctx.procs if is_helper(p) and p.key not in part_keys}
    progress_logs = [
        lg for lg in ctx.logs if lg.progress and not (lg.pids and set(lg.pids) <= helpers)
    ]
    # Output bytes count unless the writer's main thread sits unchanged in a peer or lock
    # wait: then it is a heartbeat thread talking about a stuck job - unless megabytes flow:
    # a collective that moves data completes, and a loop that calls it from one line is
    # sampled in the same place every time (a stuck collective moves nothing).
    # What a process wrote into a log judged a heartbeat (vLLM's zero-counter stats line) is
    # that heartbeat, not output: its wchar rose by the same bytes.
    heartbeat_bytes: Dict[int, int] = {}
    for lg in ctx.logs:
        if lg.grew and not lg.progress:
            for pid in lg.pids:
                heartbeat_bytes[pid] = heartbeat_bytes.get(pid, 0) + lg.grew_bytes
    writers = [
        p
        for p in alive
        if p.write_delta_bytes - heartbeat_bytes.get(p.pid, 0) >= WRITE_MIN_BYTES
        and not _wakeup_writes(p)
        and (
            p.compute_intervals
            or p.main_moved
            or p.main_family not in (PEER, LOCK)
            or p.write_delta_bytes >= TRAFFIC_MIN_BYTES
        )
    ]
    half = max(1, (intervals + 1) // 2)
    workers = [p for p in alive if p.compute_pct >= COMPUTE_PCT and p.compute_intervals >= half]
    readers = [p for p in alive if max(p.read_delta_bytes, p.file_progress_bytes) >= READ_MIN_BYTES]
    growers = [p for p in alive if p.rss_delta_bytes >= RSS_MIN_BYTES]
    if intervals == 0:  # no deltas: a thread running outside any wait is all we can see
        workers = [p for p in alive if p.main_wait is not None and p.main_wait.kind is None]
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
    # A dead process explains a hang when it was a rank, or when the living wait on someone
    # (a server with a finished, unreaped helper child is not deadlocked by it).
    ranked_dead = [p for p in dead if strong_rank(p)] or (
        dead if any(strong_rank(p) for p in parts) else []
    )
    answering = [
        p
        for p in ctx.procs
        if not p.dead and not is_rank_helper(p) and p.served_delta_bytes >= SERVED_MIN_BYTES
    ]
    return Situation(
        helped=child_work(ctx.procs, parts),
        answering=answering,
        ctx=ctx,
        findings=findings,
        classes=classes,
        intervals=intervals,
        alive=alive,
        dead=dead,
        leans=leans,
        progress_logs=progress_logs,
        writers=writers,
        progressing=bool(progress_logs or writers or answering or PROGRESS in leans),
        workers=workers,
        readers=readers,
        growers=growers,
        working=bool(workers or readers or growers or WORK in leans),
        peer_waiters=[p for p in alive if p.main_family == PEER],
        lockers=[p for p in alive if p.lock_waiters],
        ports=ports,
        waiting_on_others=waiting_on_others,
        ranked_dead=ranked_dead,
    )


def child_work(
    procs: Sequence[ProcSignals], parts: Sequence[ProcSignals] = ()
) -> List[Tuple[ProcSignals, float, List[str]]]:
    """Who works through its children: the CPU of the children it reaped during the capture
    plus that of its live helper descendants (not ranks: a launcher's children are the job).
    A launcher of ranks has its reaped CPU left out - a rank it reaped carries a lifetime of
    CPU; the root of a job without ranks is a "launcher" only because it has children.

    A Python child that is no participant counts by its own stacks - its CPU outside known
    waits - and only for an ancestor whose wait a child can end (``subprocess.run`` of a build
    or preprocessing script, a pool's result, a DataLoader's queue its workers fill).
    A Python participant (an EngineCore, a pool worker) is judged itself."""
    by_pid = {p.pid: p for p in procs}
    judged = {p.key for p in parts}

    def parent_chain(p: ProcSignals) -> List[int]:
        out: List[int] = []
        seen = {p.pid}
        ppid = p.info.ppid
        while ppid is not None and ppid in by_pid and ppid not in seen:
            out.append(ppid)
            seen.add(ppid)
            ppid = by_pid[ppid].info.ppid
        return out

    launches_ranks = any(p.info.role == "rank" for p in procs)
    helpers: Dict[int, List[Tuple[ProcSignals, float]]] = {}
    for p in procs:
        if p.info.role in ("rank", "launcher") or p.key in judged:
            continue
        if p.py_ok and (p.dead or not p.compute_intervals):
            continue
        for ancestor in parent_chain(p):
            parent = by_pid[ancestor]
            if p.py_ok and not _waits_on_helpers(parent):
                break  # nobody between it and a waiter: its work ends no wait
            pct = 0.0 if p.dead else p.compute_pct if p.py_ok else p.cpu_pct
            helpers.setdefault(ancestor, []).append((p, pct))
            if parent.info.role in ("rank", "launcher"):
                break
    out: List[Tuple[ProcSignals, float, List[str]]] = []
    for p in procs:
        if p.dead or is_rank_helper(p):
            continue
        kids = helpers.get(p.pid, [])
        pct = sum(pct for _, pct in kids)
        if p.info.role != "launcher" or not launches_ranks:
            pct += p.reaped_children_pct
        if pct >= HELPER_WORK_PCT:
            names = sorted({_kid_name(k) for k, _ in kids if k.info.name})
            out.append((p, pct, names))
    return out


def _waits_on_helpers(p: ProcSignals) -> bool:
    """A wait a child process can end: its exit (``waitpid``), a result a pool worker owes,
    a queue a worker fills (a DataLoader's ``_get_data``) - not a peer, a lock or a port."""
    wait = p.main_wait
    return p.main_family in (CHILD, RESULT) or (wait is not None and wait.kind == "queue")


def _kid_name(p: ProcSignals) -> str:
    """A native child by its name (g++, nvcc); a Python one by where it computes."""
    if p.py_ok and p.hot_label:
        return f"pid {p.pid} {p.info.name} in `{p.hot_label}`"
    return p.info.name


def rank_died(s: Situation) -> Optional[Decision]:
    """A rank died, its peers are still there and nothing progresses: they wait for it."""
    if not s.dead:
        return None
    # A rank that died of a signal or an error outranks output from the others (their
    # "lost rank N" messages, a front end's stats); one that exited 0 only when nothing moves.
    crashed = [p for p in s.ranked_dead if p.exit_code is None or p.exit_code != 0]
    crashed.sort(key=lambda p: p.dead_since if p.dead_since is not None else 1 << 30)
    if not s.alive:
        # Every rank is gone but the job is not: a server's front end or engine outlived its
        # TP workers (one was killed, the rest shut down after it). The first crash is why.
        rest = [p for p in s.ctx.procs if not p.dead and not is_helper(p)]
        if not (crashed and rest):
            return None
        # First to die first; a known failure code before an exit diag saw no code for.
        dead = sorted(
            s.dead,
            key=lambda p: (
                p.dead_since if p.dead_since is not None else 1 << 30,
                p.exit_code in (None, 0),
            ),
        )
        summary, suspects = dead_story(dead, rest, s.ctx)
        return "deadlocked", 0.8, summary, suspects
    if s.progressing and not crashed:
        return None
    if not (s.ranked_dead or s.waiting_on_others):
        return None
    if s.workers and not s.peer_waiters and not crashed:
        return None  # a finished rank (exit 0) while the others still compute
    summary, suspects = dead_story(s.dead, s.alive, s.ctx)
    return "deadlocked", 0.9 if s.peer_waiters else 0.75, summary, suspects


def rank_stopped(s: Situation) -> Optional[Decision]:
    """A process stopped by a signal or a debugger (state T) ends no wait until SIGCONT."""
    # Any process of the job, not only the ranks: a stopped EngineCore feeds its TP ranks, a
    # stopped front end answers no request, a stopped compiler holds up its rank.
    stopped = [p for p in s.alive if p.stopped] or [
        p for p in s.ctx.procs if p.stopped and not p.dead
    ]
    if not stopped:
        return None
    # Stopped in every sample outranks what the others show: whatever it owes them (a
    # collective, a reply on a queue, a health check's real work) will not come, and a
    # front end that keeps logging its stats or a peer spinning in a busy-wait collective
    # only looks alive.
    summary, suspects = stopped_story(stopped, s.alive)
    sure = 0.85 if not (s.progressing or s.workers) else 0.75
    return "deadlocked", sure, summary, suspects


def blocked_on_itself(s: Situation) -> Optional[Decision]:
    """A process whose every thread waits, untimed, on a private futex (its own locks, queues,
    events): only one of its own threads could end any of those waits, and none runs. No peer,
    port or timer can help, so this holds whatever the other ranks do - for a rank, the job
    hangs at its next collective; for another process, when nothing else moves either."""
    stuck = [p for p in s.alive if p.self_blocked]
    ranks = [p for p in stuck if strong_rank(p)]
    if not ranks and (s.progressing or s.working or not stuck):
        return None
    chosen = ranks or stuck
    p = chosen[0]
    threads = f"all its threads wait in {where(p)} and the like"
    summary = (
        f"deadlocked: {who(chosen)} can never wake by itself - {threads}, each untimed on a "
        "lock, queue or event of its own process (private futexes), so only one of its own "
        "threads could end a wait, and none runs; nothing outside can help. Kill it; "
        f"`py-spy dump --pid {p.pid}` shows who waits where (unless it waits for a signal)"
    )
    suspects = [
        Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason="blocked on its own locks")
        for q in chosen[:4]
    ]
    return "deadlocked", 0.8 if ranks else 0.75, summary, suspects


def answers_requests(s: Situation) -> Optional[Decision]:
    """A server answers its clients: bytes flow on connections to its listening ports. Socket
    traffic bypasses /proc/P/io (no wchar) and servers often log nothing per request, so this
    is the only sign of a busy server whose threads sit in epoll between requests."""
    if not s.answering or s.progress_logs or s.writers or s.intervals == 0:
        return None
    parts = []
    for p in s.answering[:3]:
        ports = ", ".join(f":{port}" for port in p.listen_ports[:3])
        rate = p.served_delta_bytes / p.window_s if p.window_s > 0 else 0.0
        parts.append(
            f"{p.name} answers requests on {ports} ({size(p.served_delta_bytes)} over "
            f"{p.served_conns} client connection(s), {size(rate)}/s)"
        )
    summary = "progressing: " + "; ".join(parts) + " - no log line needed to see it"
    suspects: List[Suspect] = []
    return "progressing", 0.8, summary, suspects


def output_moves(s: Situation) -> Optional[Decision]:
    """The job's own output moves (a log that is not a heartbeat, bytes written, data sent)."""
    if not (s.progressing and s.intervals > 0):
        return None
    summary, confidence, suspects = progress_story(s.progress_logs, s.writers, s.workers, s.dead)
    return "progressing", confidence, summary, suspects


def works_silently(s: Situation) -> Optional[Decision]:
    """CPU outside known waits, reads rising, memory growing, a GPU at power: looks hung, isn't."""
    if not s.working:
        return None
    summary, suspects = work_story(s.workers, s.readers, s.growers, s.alive, s.peer_waiters)
    return "slow", 0.8 if (s.workers or s.readers) else 0.6, summary, suspects


def calls_itself(s: Situation) -> Optional[Decision]:
    """A process waits for the answer of its own server: its thread reads a TCP connection
    whose other end still sits in its *own* listener's queue, and no other thread of it
    accepts (the graph's tcp self-edge). The thread that would answer is the one waiting - a
    synchronous HTTP call from an async handler to its own port. No client, timer or peer
    ends it: 'idle, waiting for work' would be wrong, and so would waiting."""
    g = s.graph
    if g is None:
        return None
    by_node = {node_key(p): p for p in s.ctx.procs if not p.dead}
    for e in g.edges:
        if e.src != e.dst or e.kind != "tcp":
            continue
        p = by_node.get(e.src)
        if p is None:
            continue
        summary = (
            f"deadlocked: {p.name} waits for its own server - in {where(p)} it {e.evidence}; "
            "the thread that would accept and answer is the one waiting, so nothing ends it. "
            "Restart it; the fix: no blocking call to its own port from its event loop "
            "(await an async client, or call the handler's function directly)"
        )
        blame = Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason="waits for its own server")
        return "deadlocked", 0.75, summary, [blame]
    return None


def pipe_outlives_child(s: Situation) -> Optional[Decision]:
    """A process waits in ``Popen.communicate`` (``run(capture_output=True)``) for EOF on its
    child's pipes, the child has exited, and a live process still holds a write end - one the
    child started in the background (``sh -c "server &"``) inherited it. The child is not what
    it waits for any more: that process is, and it may never exit (the graph's pipe edges
    from a child-waiter whose children are all dead)."""
    g = s.graph
    if g is None:
        return None
    nodes = {n.key: n for n in g.nodes}
    by_node = {node_key(p): p for p in s.ctx.procs if not p.dead and p.main_family == CHILD}
    for key, p in by_node.items():
        out = [e for e in g.edges if e.src == key]
        kids = [nodes[e.dst] for e in out if e.kind == "child" and e.dst in nodes]
        pipes = [e for e in out if e.kind == "pipe" and e.dst in nodes and e.dst != key]
        if not pipes or any(k.state not in ("zombie", "exited") for k in kids):
            continue
        holder = nodes[pipes[0].dst]
        child = f" (pid {kids[0].pid} {kids[0].label.split()[-1]})" if kids else ""
        summary = (
            f"deadlocked: {p.name} waits in {where(p)} for EOF on its child's output, but the "
            f"child{child} has exited and {holder.label} still holds the write end - a process "
            "it started in the background inherited the pipe, and the call returns only when "
            f"that one exits. Kill pid {holder.pid} (or send the background command's output "
            "elsewhere: `cmd > log 2>&1 &`)"
        )
        blame = Suspect(
            pid=holder.pid, host=holder.host, reason=f"holds the pipe: {pipes[0].evidence}"[:200]
        )
        return "deadlocked", 0.75, summary, [blame]
    return None


def waits_on_stopped_outsider(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a chain of its waits ends at a process *outside* the job
    that is stopped or a zombie - a local server a client or a handler thread calls, the
    writer of a pipe, a file lock's holder. The job's own stacks only say "waits for a result"
    or "a handler waits on something"; the graph names who: it must run again (or be
    replaced) before anything here does, and killing the job would not help."""
    g = s.graph
    if g is None:
        return None
    by_key = {n.key: n for n in g.nodes}
    for line, ends in zip(g.chains, g.line_ends):
        for key in ends:
            n = by_key.get(key)
            if n is None or not n.label.endswith(OUTSIDE_JOB) or not n.pid:
                continue
            if n.state == "stopped":
                act = ""  # the chain's line ends in its `kill -CONT`
            elif n.state == "zombie":
                act = ": restart what it served (its parent must reap it)"
            else:
                continue
            summary = (
                f"deadlocked: {line} - nothing in the job moves until pid {n.pid} does{act} "
                "(it is outside the job; killing the job would not help)"
            )
            blame = Suspect(pid=n.pid, host=n.host, reason=f"{n.state} outside the job: {n.detail}")
            return "deadlocked", 0.8, summary, [blame]
    return None


def waits_for_file_lock(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a process of it waits to take a file lock (``flock``,
    ``fcntl``) that a process *outside* the job holds: the holder's state is the job's. Read as
    a lock of its own, that wait looked like a deadlock to kill while the holder - a download,
    a build, another job under ``flock(1)`` - was busy; killing the job would not help. A lock
    held inside the job is left to the rules below (its holder's own wait decides)."""
    waits = lock_waits(s.ctx.bundle, s.alive)
    if not waits:
        return None
    w = waits[0]
    me = who([w.waiter])
    path = f"`{w.path}`" if w.path else "its lock file"
    find = f"`fuser -v {w.path}`" if w.path else "`cat /proc/locks`"
    host = w.waiter.key[0]
    if not w.holders:
        why = "no holder is listed in /proc/locks" if w.read else "/proc/locks was not read"
        summary = (
            f"unknown: {me} waits to take a file lock ({w.kind}) on {path} in {where(w.waiter)} "
            f"and {why} - {find} names who holds it; that process, not this job, decides "
            "when it goes on"
        )
        return "unknown", 0.3, summary, []
    outside = [h for h in w.holders if h.proc is None]
    if not outside:
        return None
    h = outside[0]
    held = f"{holder_label(h)} (outside the job) holds it"
    lead = f"{me} waits to take a file lock ({w.kind}) on {path} in {where(w.waiter)}: {held}"
    blame = [Suspect(pid=max(h.pid, 0), host=host, reason=f"holds the file lock on {path}")]
    if h.state in ("T", "t"):
        summary = (
            f"deadlocked: {lead}, and it is stopped (state {h.state}) - nothing moves until "
            f"`kill -CONT {h.pid}`"
        )
        return "deadlocked", 0.8, summary, blame
    if h.pid <= 0 or h.state in ("?", "Z", "X"):
        summary = (
            f"unknown: {lead}, and it is gone or cannot be read - a process that inherited "
            f"its fd holds the lock now: {find} names it; that process decides when this job "
            "goes on"
        )
        return "unknown", 0.4, summary, blame
    doing = "runs (state R)" if h.state == "R" else f"is asleep (state {h.state}) holding it"
    summary = (
        f"slow: {lead}, and it {doing} - this job goes on when it releases the lock; don't "
        f"kill the job, see what pid {h.pid} does (`py-spy dump --pid {h.pid}`, "
        f"`cat /proc/{h.pid}/stack`)"
    )
    return "slow", 0.6 if h.state == "R" else 0.45, summary, blame


def children_work(s: Situation) -> Optional[Decision]:
    """A process waits on child processes that compute (inductor's g++/cc1plus, nvcc): its own
    threads sleep in ``waitpid``/``Popen.wait`` and each compiler lives a second, so neither
    the parent's CPU nor any one sample shows the work - the reaped children's CPU does."""
    if not s.helped:
        return None
    summary, suspects = helper_work_story(s.helped, s.alive)
    return "slow", 0.7, summary, suspects


def waits_for_nodes_to_join(s: Situation) -> Optional[Decision]:
    """torchrun's agent waits in its rendezvous and no rank of it has started: the other
    nodes' agents end that wait, and a capture of this host holds none of them - nothing
    here is stuck, the missing nodes are (not started, failed, or told another endpoint or
    id). It gives up by itself at the join timeout. Across the hosts of a merged bundle,
    agents that all wait with different settings will never meet."""
    agents = waiting_agents(s.ctx.procs)
    if not agents or any(p.rank is not None and not p.dead for p in s.ctx.procs):
        return None
    p, settings = agents[0]
    hosts = {q.key[0] for q, _ in agents}
    differ = mismatch(agents) if len(hosts) > 1 else None
    where_ = f"in {where(p)}"
    if differ:
        summary = (
            f"deadlocked: torchrun's agents on {len(hosts)} hosts all wait {where_}, but with "
            f"different rendezvous settings ({differ}) - they will never meet. Restart them "
            "with the same --rdzv-endpoint, --rdzv-id and --nnodes"
        )
        suspects = [
            Suspect(pid=q.pid, host=q.key[0], reason=f"rendezvous {st.describe()}")
            for q, st in agents[:4]
        ]
        return "deadlocked", 0.75, summary, suspects
    joined = (
        f"{len(hosts)} host(s) of this capture joined"
        if len(hosts) > 1
        else ("no rank has started on this host yet")
    )
    summary = (
        f"idle: torchrun (pid {p.pid}) waits {where_} for the other nodes to join its "
        f"rendezvous ({settings.describe()}) - {joined}, so nothing here is stuck: the "
        "missing nodes are. Start torchrun on them with the same --rdzv-endpoint and "
        "--rdzv-id, or see why they did not start (their logs, the scheduler); it gives up by "
        "itself at the join timeout (default 600 s) - killing it does not help"
    )
    return "idle", 0.7, summary, []


def collective_laggard(s: Situation) -> Optional[Decision]:
    """Collective records (Flight Recorder) that show one rank behind name the culprit whatever
    the stacks show: a wait inside C++ (``work.wait()``) shows only its caller."""
    culprits = [f for f in s.findings if f.lean == STUCK and f.suspects]
    if not culprits:
        return None
    first = culprits[0]
    summary = (
        f"deadlocked: {first.evidence.detail} - the other ranks wait for it; see where it "
        f"is with `py-spy dump --pid {first.suspects[0].pid}`"
    )
    return "deadlocked", 0.85, summary, [x for f in culprits for x in f.suspects]


def server_feeds_ranks(s: Situation) -> Optional[Decision]:
    """A rank serves a port and the others wait for it to hand them work (a request
    broadcast): a ready server, not a diverged rank."""
    servers = [p for p in s.alive if p.main_family != PEER]
    if not s.peer_waiters or not all(receives_work(p) for p in s.peer_waiters):
        return None
    if not servers:
        # Every rank waits for a broadcast from a process that is no rank (vLLM's EngineCore
        # feeds its TP workers through a shared-memory queue): that feeder decides. Waiting
        # for requests itself, on a job with a port open, it is a ready server.
        alive_keys = {p.key for p in s.alive}
        feeders = [
            p
            for p in s.ctx.procs
            if not p.dead
            and p.key not in alive_keys
            and p.main_family == SERVE
            and not is_helper(p)
        ]
        if not (feeders and s.ports):
            return None
        ports = ", ".join(":" + str(p) for p in s.ports[:4])
        summary = (
            f"idle: {who(s.peer_waiters)} wait for work in {where(s.peer_waiters[0])}, "
            f"handed out by {who(feeders[:2])}, which {verb(feeders, 'waits', 'wait')} for "
            f"requests in {where(feeders[0])} ({ports} listening) - healthy, waiting for requests"
        )
        return "idle", 0.6, summary, []
    if not all(serves(p, s.ports) for p in servers):
        return None
    groups = group_by_wait(s.alive)
    summary = (
        f"idle: {who(servers)} {verb(servers, 'serves', 'serve')} "
        f"{', '.join(':' + str(p) for p in s.ports[:4])} and {waits_phrase(groups[:3])} - "
        "healthy, waiting for requests"
    )
    return "idle", 0.6, summary, []


def peers_wait(s: Situation) -> Optional[Decision]:
    """Ranks wait on a peer and nothing moves: the odd rank (or the missing one) is why."""
    if not s.peer_waiters:
        return None
    odd = odd_classes(s.classes)
    summary, suspects, confidence = peer_story(s.peer_waiters, s.alive, odd, s.classes, s.ctx)
    return "deadlocked", confidence, summary, suspects


def results_never_come(s: Situation) -> Optional[Decision]:
    """A process waits for pool results that no worker computes."""
    result_waiters = [p for p in s.alive if p.main_family == RESULT]
    if not result_waiters:
        return None
    summary, suspects = pool_story(result_waiters, s.alive)
    return "deadlocked", 0.7, summary, suspects


def lock_cycle(s: Situation) -> Optional[Decision]:
    """Thread locks are process-local: a cycle needs two locks in one process."""
    cycle = any(len({a for _, a, _ in p.lock_waiters if a}) >= 2 for p in s.lockers)
    if not (s.lockers and cycle):
        return None
    summary, suspects = lock_story(s.lockers, s.alive)
    return "deadlocked", 0.8, summary, suspects


def gpu_spins(s: Situation) -> Optional[Decision]:
    """A GPU reads busy at idle power and nothing else moves: a kernel waits on a peer."""
    if STUCK not in s.leans:
        return None
    summary = (
        "deadlocked: the GPU reads busy at idle power and nothing "
        f"else moves ({waits_phrase(group_by_wait(s.alive)[:2])}) - a kernel waits on a "
        "peer that never arrives; kill the job and restart"
    )
    return "deadlocked", 0.65, summary, []


def lock_without_door(s: Situation) -> Optional[Decision]:
    """Only a thread of the same process can release a lock: a locker whose own process has
    no door (timer, port, input) waits forever, whatever doors other processes have."""
    stuck_lockers = [p for p in s.lockers if not door(p, serving_ports([p]))]
    if not stuck_lockers:
        return None
    summary, suspects = lock_story(stuck_lockers, s.alive)
    return "deadlocked", 0.6, summary, suspects


def log_names_dead_rank(s: Situation) -> Optional[Decision]:
    """The job's log says rank N died and no live process of the job is rank N, while other
    ranks are there: they will wait for it (or are being shut down because of it) whatever
    CPU they burn - a TP peer spinning in its all-reduce, a worker tearing down. A rank that
    was restarted (a live rank N again) or a death line naming no rank does not count."""
    gone = gone_ranks(s.ctx)
    if not gone:
        return None
    d = gone[0]
    survivors = [p for p in s.ctx.procs if p.rank is not None and not is_rank_helper(p)]
    survivors = [p for p in survivors if not p.dead]
    summary = (
        f"deadlocked: the log says rank {d.rank} died ({d.path}: `{d.line[:160]}`) and no "
        f"process of the job is rank {d.rank} any more ({who(survivors)} still there) - "
        "the other ranks can never finish their collectives with it; read the log above "
        "that line, restart the job"
    )
    return "deadlocked", 0.75, summary, []


def log_reports_death(s: Situation) -> Optional[Decision]:
    """Nothing moves and the job's own log says one of its processes died (a worker killed
    and reaped before diag looked: no zombie is left to see, only its peers' ERROR lines)."""
    deaths = [(lg, line) for lg in s.ctx.logs for line in lg.deaths]
    if not deaths:
        return None
    # The first death is the cause; later lines (EngineDeadError in the front end) are its
    # consequences.
    log, line = deaths[0]
    quoted = " ".join(line.split())[:160]
    waits = waits_phrase(group_by_wait(s.alive)[:2])
    summary = (
        f"deadlocked: the log says a process of the job died ({log.path}: `{quoted}`) and "
        f"nothing moves{f' ({waits})' if waits else ''} - the survivors wait for it; read "
        "the log above that line, restart the job"
    )
    return "deadlocked", 0.7, summary, []


def requests_unanswered(s: Situation) -> Optional[Decision]:
    """Clients wait: requests from outside the job arrived before the capture began and got
    no byte of answer during it, while nothing in the server moves. Its event loop still
    accepts (a listening port, epoll) - that is what made it look idle."""
    stuck = [p for p in s.ctx.procs if not p.dead and p.stale_requests]
    if not stuck:
        return None
    stuck.sort(key=lambda p: -p.stale_requests)
    p = stuck[0]
    ports = ", ".join(f":{port}" for port in p.stale_ports[:3])
    total = sum(q.stale_requests for q in stuck)
    summary = (
        f"deadlocked: {total} request(s) to {ports} unanswered for {p.stale_age_s:.0f}+ s "
        f"while nothing in the server moves ({who([p])} waits in {where(p)}) - a handler "
        "waits on something that never comes (an await, a lock, a dead backend); clients "
        f"wait. See the handlers with `py-spy dump --pid {p.pid}`, then restart it "
        "(unless that endpoint is a long poll)"
    )
    suspects = [
        Suspect(
            pid=q.pid,
            rank=q.rank,
            host=q.key[0],
            reason=f"{q.stale_requests} request(s) unanswered for {q.stale_age_s:.0f}+ s",
        )
        for q in stuck[:4]
    ]
    return "deadlocked", 0.65, summary, suspects


def chains_never_end(s: Situation) -> Optional[Decision]:
    """Nothing works, and every chain of waits from the participants ends where nothing can
    ever end it: a stopped or dead process, or a cycle (the wait-for graph's deadlock, what
    the rules above name by its picture). A listening port or a timer elsewhere does not
    make such a job idle: no client and no timer is on any of its chains."""
    g = s.graph
    if g is None or not g.reasons or not all(r in DEAD_ENDS for r in g.reasons):
        return None
    # The graph follows each process's main thread: a participant with a thread of its own
    # on a timer or behind a listening port might still end its wait (a producer thread).
    if any(p.timer_threads or serving_ports([p]) for p in s.alive):
        return None
    full = pipe_full(s)  # the same cycle, told as its picture: a writer on a full pipe
    if full is not None:
        return full
    by_key = {n.key: n for n in g.nodes}
    ends = [by_key[k] for k in g.ends if k in by_key and by_key[k].pid]
    summary = (
        "deadlocked: nothing moves and every chain of waits ends where nothing can end it - "
        + "; ".join(g.chains[:2])
    )
    suspects = [
        Suspect(pid=n.pid, rank=n.rank, host=n.host, reason=f"{n.state}: {n.detail}"[:200])
        for n in ends[:4]
    ]
    # A cycle's edges are partly inferred (who holds a queue's other end is a guess without
    # fd inodes): less sure than a stopped or dead end.
    confidence = 0.6 if "cycle" in g.reasons else 0.75
    return "deadlocked", confidence, summary, suspects


# Locks that are a file's existence, waited for by polling it: nothing holds them open, so a
# build killed while it held one leaves it behind for good (frame -> what the lock is).
_FILE_BATONS = {
    "FileBaton.wait": (
        "torch's build lock, a `lock` file in the extension's build directory (under "
        "`$TORCH_EXTENSIONS_DIR`, default `~/.cache/torch_extensions`)"
    ),
}


def polls_for_stale_lock_file(s: Situation) -> Optional[Decision]:
    """Nothing in the job works and its processes poll for a lock *file* to disappear (torch's
    ``FileBaton``): whoever created it is no process of the job - a build that was killed
    while it held the lock, which stays behind for ever. (A build outside the job - another
    job sharing the cache - would make this slow; its compiler on this host says so.) Not
    'idle, healthy': the job never goes on by itself; killing it does not help either, the
    next run waits on the same file. Deleting the file does."""
    if s.ports:
        return None
    pollers = [p for p in s.alive if p.main_wait and p.main_wait.label in _FILE_BATONS]
    if not pollers:
        return None
    # A process of the job that waits on a child may be the build holding the lock (a rank in
    # `subprocess.run(ninja)` whose compiler is between steps): not a file left behind.
    if any(
        not p.dead and p.info.role != "launcher" and p.main_family == CHILD for p in s.ctx.procs
    ):
        return None
    label = pollers[0].main_wait.label if pollers[0].main_wait else ""
    summary = (
        f"deadlocked: {who(pollers)} {verb(pollers, 'polls', 'poll')} in `{label}` for a lock "
        f"file to go away - {_FILE_BATONS[label]} - and no process of the job builds: the lock "
        "was left by a build that was killed (unless a build outside the job holds it: then "
        "wait for it). If no compiler runs on this host (`pgrep -af 'ninja|cc1plus|nvcc'`), "
        "delete that `lock` file: the job goes on by itself - killing it would not help, the "
        "next run waits on the same file"
    )
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=f"polls in `{label}` for a lock file")
        for p in pollers[:4]
    ]
    return "deadlocked", 0.6, summary, suspects


def waits_for_outside(s: Situation) -> Optional[Decision]:
    """Every wait is one something outside can end: a listening port, stdin, a timer."""
    doors = [p for p in s.alive if door(p, s.ports) or p.timer_threads]
    if not (s.ports or doors):
        return None
    groups = group_by_wait(s.alive)
    port_text = f", {', '.join(':' + str(p) for p in s.ports[:4])} listening" if s.ports else ""
    # No port: input on stdin or a timer wakes it (a poll, a heartbeat, a retry with
    # backoff). The stacks cannot tell "waits for work" from "retries what never comes".
    on_stdin = [p for p in doors if p.main_wait and p.main_wait.kind == STDIN]
    tail = "healthy, waiting for work"
    if on_stdin and not s.ports:
        tail = (
            f"{who(on_stdin)} {verb(on_stdin, 'reads', 'read')} stdin (fd 0): it waits for "
            "input someone must type or pipe in (a prompt?) - answer it, or run the job "
            "with stdin closed (< /dev/null)"
        )
    elif not s.ports:
        tail = (
            "no port to serve, it wakes on a timer (polling, a heartbeat, or retrying "
            "something outside the job): healthy if it waits for work, stuck if what it "
            "polls for never comes - its log says which"
        )
    summary = (
        f"idle: nothing moves, no rank waits on a peer{port_text}; "
        f"{waits_phrase(groups[:3])} - {tail}"
    )
    return "idle", 0.8 if s.ports else 0.6, summary, []


def pipe_full(s: Situation) -> Optional[Decision]:
    """Writers block on a full pipe whose reader stopped reading."""
    writers = writers_of(s.alive)
    if not (writers and len(writers) * 2 >= len(s.alive)):
        return None
    summary, suspects = pipe_story(writers, s.ctx.procs)
    return "deadlocked", 0.6, summary, suspects


def nothing_can_wake(s: Situation) -> Optional[Decision]:
    """Nothing moves and nothing outside can wake it: waiting on each other, or on a peer that
    never answers (the last rule: it always applies)."""
    groups = group_by_wait(s.alive)
    summary = (
        f"deadlocked: nothing moves and nothing can wake it by itself (no listening port, no "
        f"timer, no wakeups): {waits_phrase(groups[:3])} - waiting on each other, or on a "
        "peer that never answers"
    )
    kinds = {p.main_wait.kind for p in s.alive if p.main_wait}
    if "write-full" in kinds:
        summary += " (a write blocks on a full pipe or socket: its reader stopped reading)"
    if "fifo-open" in kinds:
        summary += " (opening a named pipe (fifo) waits for a process to open its other end)"
    if "disk" in kinds:
        summary += " (state D: an uninterruptible kernel wait - storage or NFS not answering)"
    # The ends of the chains of waits, not the first few processes: who the others wait on.
    ends = set(s.graph.ends) if s.graph is not None else set()
    blamed = [p for p in s.alive if f"{p.key[0]}/{p.pid}" in ends] or s.alive
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=f"blocked in {where(p)}")
        for p in blamed[:4]
    ]
    return "deadlocked", 0.5, summary, suspects


# The rules, in the order an on-call engineer reasons (the README's verdict table): the first
# that applies decides. Each guards against one classic misread - see its docstring.
RULES: Tuple[Rule, ...] = (
    rank_died,
    rank_stopped,
    log_names_dead_rank,
    blocked_on_itself,
    answers_requests,
    output_moves,
    works_silently,
    children_work,
    calls_itself,
    pipe_outlives_child,
    waits_on_stopped_outsider,
    waits_for_file_lock,
    waits_for_nodes_to_join,
    collective_laggard,
    server_feeds_ranks,
    peers_wait,
    results_never_come,
    lock_cycle,
    gpu_spins,
    lock_without_door,
    log_reports_death,
    requests_unanswered,
    chains_never_end,
    polls_for_stale_lock_file,
    waits_for_outside,
    pipe_full,
    nothing_can_wake,
)


def _decide(
    ctx: Context,
    findings: Sequence[Finding],
    classes: Sequence[RankClass],
    intervals: int,
) -> Tuple[str, float, str, List[Evidence], List[Suspect], Optional[WaitGraph]]:
    """Measure, draw the wait-for graph (its working nodes from the measures), apply the
    rules in order."""
    situation = measure(ctx, findings, classes, intervals)
    graph = _graph_of(ctx, working_keys(situation))
    situation = dataclasses.replace(situation, graph=graph)
    evidence = evidence_for(ctx, classes)
    for rule in RULES:
        decision = rule(situation)
        if decision is not None:
            state, confidence, summary, suspects = decision
            return state, confidence, summary, evidence, suspects, graph
    raise AssertionError("nothing_can_wake always decides")  # pragma: no cover


def verdict_line(verdict: Optional[Verdict]) -> str:
    """The one line ``diag capture`` prints at the end."""
    if verdict is None:
        return "verdict: unknown"
    return f"verdict: {verdict.summary} (confidence {verdict.confidence:.2f})"
