"""What every rule of the table reads, measured once from the features: who works, who writes,
who answers requests, who waits on what (``Situation``), with the thresholds that make each
one count. One definition each: the rules, the wait-for graph's "working" nodes and the
report read these, never a second copy."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from diag.model import RankClass, RankPhase, WaitGraph
from diag.verdict.arrivals import Arrival, arrivals
from diag.verdict.features import ProcSignals
from diag.verdict.file_locks import LockWait, lock_waits
from diag.verdict.flow_control import FlowStall, flow_stalls
from diag.verdict.host_gone import HostGone, host_gone
from diag.verdict.log_deaths import LogDeath, log_deaths
from diag.verdict.machine import CpuHold, cpu_holds
from diag.verdict.output_kinds import failed_tries, failing_logs, probes_only
from diag.verdict.participants import (
    framework_rank,
    is_helper,
    is_rank_helper,
    serving_ports,
    strong_rank,
)
from diag.verdict.progress import LogGrowth
from diag.verdict.readiness import starting
from diag.verdict.rendezvous import StoreJoin, store_joins
from diag.verdict.rhythm import Rhythm, undecided
from diag.verdict.sources import (
    PROGRESS,
    WORK,
    Context,
    Finding,
)
from diag.verdict.startup import StartupPhases, startup_phases
from diag.verdict.startup_signs import COMPILING
from diag.verdict.tcp_ends import Receiving, receiving
from diag.verdict.waits import CHILD, LOCK, PEER, RESULT
from diag.verdict.work import (
    SERVED_MIN_BYTES,
    answers,
    computes,
    data_starved,
    output_bytes,
    reads_input,
)
from diag.vocab import WaitKind

# Main-thread waits beside the peer, lock and result families that only the job itself can
# end: an opaque native block, its own queue (``measure``'s ``waiting_on_others``).
_OPAQUE_OR_QUEUE: FrozenSet[WaitKind] = frozenset({"blocked", "queue"})

RSS_MIN_BYTES = 64 << 20  # memory growth that counts as work

HELPER_WORK_PCT = 25.0  # children's CPU (% of a core) that makes their parent's wait work
BAR_MAX_BYTES = 64 << 10  # what a start-up progress bar's redraws write over a capture, at most
TIMER_MAX_BYTES = 64 << 10  # what a timer's status writes add up to over a capture, at most
TIMER_BYTES_PER_WRITE = 512  # a status record or a keep-alive line a write, not data
# CPU (% of a core) of a process that only wakes to write on a timer: an asyncio loop
# rewriting a status file twice a second burns 0.25%; a job printing a line per batch of real
# work too brief for any sample to catch burns more (stdout_progress: 2.8%).
TIMER_CPU_PCT = 1.0


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
    # Readers fed through the TCP socket their main thread blocks on (``tcp_ends.receiving``).
    receivers: Dict[Tuple[str, int], Receiving]
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
    # Logs that moved with failures only (``diag.verdict.output_kinds``): not progress, but
    # evidence of a stall - out of ``progress_logs``, their bytes out of ``writers``.
    failing_logs: Tuple[LogGrowth, ...] = ()
    # Ranks that entered the rendezvous during the capture, every rank now in it
    # (``diag.verdict.arrivals``): a start-up that advances.
    arrivals: Tuple[Arrival, ...] = ()
    # Measured here once, read by the rules, the graph and the classifier (each had measured
    # them again): the processes' start-up phases, the participants' file-lock waits, and
    # the frameworks' own pauses.
    startup: StartupPhases = field(default_factory=lambda: StartupPhases((), {}))
    file_lock_waits: Tuple[LockWait, ...] = ()
    flow_stalls: Tuple[FlowStall, ...] = ()
    # Ranks joining a c10d store no process of the capture hosts (``rendezvous.store_joins``),
    # and what the capture shows of that store's host (``host_gone``): read by two rules and
    # the graph.
    store_join: Optional[StoreJoin] = None
    store_host: Optional[HostGone] = None
    # The job's log beats slower than the capture is long, not yet overdue (``rhythm``):
    # read by ``silence_within_rhythm`` and by the hedge of the wait families' decisions.
    rhythm: Optional[Rhythm] = None

    @cached_property
    def cpu_holds(self) -> Dict[Tuple[str, int], CpuHold]:
        """What held each process back from the CPU (``machine.cpu_holds``), measured on its
        first read - by the machine rules or the verdict's records - and kept (each had
        measured it again)."""
        return cpu_holds(self.ctx.bundle)


def measure(
    ctx: Context, findings: Sequence[Finding], classes: Sequence[RankClass], intervals: int
) -> Situation:
    parts = ctx.participants
    alive = [p for p in parts if not p.dead]
    dead = [p for p in parts if p.dead]
    leans = frozenset(f.lean for f in findings)
    workers = [p for p in alive if computes(p)]
    # Reading its files, or fed through a socket it blocks on (a download that trickles).
    receivers = {p.key: e for p in alive for e in [receiving(ctx.bundle, p)] if e is not None}
    readers = [p for p in alive if reads_input(p) or p.key in receivers]
    growers = [p for p in alive if p.rss_delta_bytes >= RSS_MIN_BYTES]
    helped = child_work(ctx.procs, parts)
    quiet = not (workers or readers or growers or helped or WORK in leans)
    startup = startup_phases(ctx.bundle, ctx.procs)
    join = store_joins(ctx.bundle, ctx.procs)
    progress_logs, writers, failing = _output(ctx, alive, starting(startup.phases), quiet)
    ports = serving_ports(ctx.procs)
    # Waits only the job itself can end: peers, locks, results, its own queues.
    waiting_on_others = [
        p
        for p in alive
        if not ports
        and (
            p.main_family in (PEER, LOCK, RESULT)
            or (p.main_wait and p.main_wait.kind in _OPAQUE_OR_QUEUE)
        )
    ]
    # A dead process explains a hang when it was a rank, or when the living wait on someone
    # (a server with a finished, unreaped helper child is not deadlocked by it).
    ranked_dead = [p for p in dead if strong_rank(p) or framework_rank(p)] or (
        dead if any(strong_rank(p) for p in parts) else []
    )
    answering = [p for p in ctx.procs if not p.dead and not is_rank_helper(p) and answers(p)]
    if failing and not progress_logs:
        # Connections accepted and closed between samples say a request came and went, not
        # what it was answered: a job whose only moving output is failure (a 503 for ever,
        # retried every second) answers with errors. Bytes on held connections still count.
        answering = [p for p in answering if p.served_delta_bytes >= SERVED_MIN_BYTES]
    elif not progress_logs:
        # Nor does it say so when the server logs its accesses and all it logged were health
        # checks or metrics scrapes: those are the requests that came and went - a server whose
        # every worker is wedged answers them all the same.
        probed = {k for lg in ctx.logs if lg.grew and probes_only(lg) for k in lg.writers}
        answering = [
            p for p in answering if p.key not in probed or p.served_delta_bytes >= SERVED_MIN_BYTES
        ]
    return Situation(
        helped=helped,
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
        receivers=receivers,
        growers=growers,
        working=bool(workers or readers or growers or WORK in leans),
        peer_waiters=[p for p in alive if p.main_family == PEER],
        lockers=[p for p in alive if p.lock_waiters],
        ports=ports,
        waiting_on_others=waiting_on_others,
        ranked_dead=ranked_dead,
        failing_logs=tuple(failing),
        arrivals=tuple(arrivals(ctx.bundle, alive)),
        startup=startup,
        file_lock_waits=tuple(lock_waits(ctx.bundle, alive)),
        flow_stalls=flow_stalls(ctx.bundle, ctx.procs),
        store_join=join,
        store_host=host_gone(ctx.bundle, join, ctx.procs, ctx.logs) if join else None,
        rhythm=undecided(ctx.bundle.samples),
    )


def _output(
    ctx: Context, alive: Sequence[ProcSignals], phases: Sequence[RankPhase], quiet: bool = False
) -> Tuple[List[LogGrowth], List[ProcSignals], List[LogGrowth]]:
    """The job's output that moves: logs that grew with progress (not with failures only:
    those are the third list), and processes writing bytes
    that are no heartbeat, no start-up phase's bar or compiler artefacts, no exchange among
    the job's own ranks (``diag.verdict.work``) - and, in a ``quiet`` job (nothing computes,
    reads, grows or runs on a GPU), no timer's status writes (``_timer_writes``). ``phases``:
    the processes in a start-up phase."""
    # A log counts when the job writes it: not one only helpers and framework daemons hold.
    part_keys = {p.key for p in ctx.participants}
    helpers = {p.key for p in ctx.procs if is_helper(p) and p.key not in part_keys}
    bars = [lg for lg in ctx.logs if _phase_bar(lg, {(r.host, r.pid) for r in phases})]
    progress_logs = [
        lg
        for lg in ctx.logs
        if lg.progress
        and not (lg.pids and lg.writers <= helpers)
        and lg not in bars
        and not probes_only(lg)  # a /health answered is no work done
    ]
    # "FAILED after 10.0 s: timed out" is no progress, nor a retry line judged a heartbeat
    failing = failing_logs(
        lg
        for lg in ctx.logs
        if lg.grew
        and not lg.writers_dead
        and not (lg.pids and lg.writers <= helpers)
        and lg not in bars
    )
    progress_logs = [lg for lg in progress_logs if lg not in failing]
    # What a process wrote into a log judged a heartbeat (vLLM's zero-counter stats line), or
    # a start-up phase's progress bar, is that, not output: its wchar rose by the same bytes.
    heartbeat_bytes: Dict[Tuple[str, int], int] = {}
    for lg in ctx.logs:
        if lg.grew and (not lg.progress or lg in bars or lg in failing):
            for key in lg.writers:
                heartbeat_bytes[key] = heartbeat_bytes.get(key, 0) + _written_into(lg)
    # Bytes a compiler or its cache writes during start-up are that phase's work, not output;
    # so are a bar's redraws (a few hundred bytes, not all caught in the log's size between
    # two samples), unless far more flows.
    not_output = {(r.host, r.pid) for r in phases if r.phase == COMPILING}
    drawing = {key for lg in bars for key in lg.writers}
    not_output |= {p.key for p in alive if p.key in drawing and p.write_delta_bytes < BAR_MAX_BYTES}
    # A process whose log says only that what it does fails and is retried, or that its
    # writes are refused (No space left on device), wrote failed tries: a save retried on a
    # full disk is no output.
    not_output |= {key for lg in failing if failed_tries(lg) for key in lg.writers}
    if quiet:
        not_output |= {p.key for p in alive if _timer_writes(p)}
    writers = [p for p in alive if p.key not in not_output and output_bytes(p, heartbeat_bytes)]
    return progress_logs, writers, failing


def _timer_writes(p: ProcSignals) -> bool:
    """Its bytes are a timer's, not output: small records (a status file rewritten in place,
    ``{"status": "idle", "t": ...}``; a keep-alive line to a terminal) from a process none of
    whose Python stacks moved and that burnt almost no CPU, in a job where nothing else works
    either (the caller's ``quiet``) - no work was done that they could report. A file rewritten
    in place does not grow, and one closed between writes is in no sample's open files: its
    writer's wchar is all the capture sees of it."""
    written = p.write_delta_bytes
    return (
        p.py_ok
        and not p.stacks_moved
        and p.cpu_pct < TIMER_CPU_PCT
        and 0 < written <= TIMER_MAX_BYTES
        and written <= TIMER_BYTES_PER_WRITE * max(1, p.write_calls_delta)
    )


def _written_into(lg: LogGrowth) -> int:
    """The bytes a writer's wchar may have risen by for this log's growth: what it grew by,
    and up to one of its lines more at each end of the capture - a sample reads the writer's
    wchar and the log's size at two instants, and a line written between the two reads counts
    in one and not the other (a monitor's heartbeat line read as "keeps writing output")."""
    line = max((len(x.encode()) + 1 for x in (*lg.new_lines, *lg.tail[-1:])), default=0)
    return lg.grew_bytes + 2 * line


def _phase_bar(lg: LogGrowth, phase_keys: Set[Tuple[str, int]]) -> bool:
    """A log that grew only by a progress bar redrawn in place (bytes, no new line) while a
    process writing it is in a start-up phase (loading weights, compiling): that phase's
    progress - shown with its ETA - not the job's output. A job whose only motion is its
    weight load is slow ("don't kill it"), not progressing."""
    if not (lg.grew and lg.grew_lines == 0 and phase_keys):
        return False
    return not lg.pids or bool(lg.writers & phase_keys)


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
    # Keyed by (host, pid): the nodes of a merged bundle repeat PIDs (containers).
    by_key = {p.key: p for p in procs}
    judged = {p.key for p in parts}

    def parent_chain(p: ProcSignals) -> List[Tuple[str, int]]:
        out: List[Tuple[str, int]] = []
        seen = {p.key}
        up = (p.key[0], p.info.ppid) if p.info.ppid is not None else None
        while up is not None and up in by_key and up not in seen:
            out.append(up)
            seen.add(up)
            ppid = by_key[up].info.ppid
            up = (up[0], ppid) if ppid is not None else None
        return out

    launches_ranks = any(p.info.role == "rank" for p in procs)
    helpers: Dict[Tuple[str, int], List[Tuple[ProcSignals, float]]] = {}
    for p in procs:
        if p.info.role in ("rank", "launcher") or p.key in judged:
            continue
        if p.py_ok and (p.dead or not (p.compute_intervals or p.runnable_intervals)):
            continue
        for ancestor in parent_chain(p):
            parent = by_key[ancestor]
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
        kids = helpers.get(p.key, [])
        pct = sum(pct for _, pct in kids)
        if p.info.role != "launcher" or not launches_ranks:
            pct += p.reaped_children_pct
        # A child that wanted a CPU most of the time works whatever share a saturated host
        # gave it (``ProcSignals.runnable_intervals``).
        starved_kid = any(2 * k.runnable_intervals >= max(1, k.intervals) for k, _ in kids)
        if pct >= HELPER_WORK_PCT or starved_kid:
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


def working_keys(s: Situation) -> FrozenSet[Tuple[str, int]]:
    """Processes whose output the verdict measured moving - bytes written, requests
    answered, a progress log they write, memory growing, children computing for them: the
    graph's "working" nodes, where chains of waits on them end."""
    keys = {p.key for p in [*s.writers, *s.answering, *s.growers]}
    keys.update(s.receivers)  # fed through the socket it blocks on: a transfer under way
    # A parent working through children the capture sees: its chain goes on to them (they
    # compute); through children already reaped (their CPU in its cutime): it is the work.
    parents = {(q.key[0], q.info.ppid) for q in s.ctx.procs if not q.dead}
    keys.update(p.key for p, _, _ in s.helped if (p.key[0], p.pid) not in parents)
    log_keys = {key for lg in s.progress_logs for key in lg.writers}
    keys.update(p.key for p in s.alive if p.key in log_keys)
    # DataLoader workers inside the dataset's own code, their loader waiting for batches:
    # the input pipeline works, however slowly (``work.data_starved``).
    starved = data_starved(s.ctx.bundle, s.ctx.procs)
    if starved is not None:
        keys.update(w.key for w in starved.workers)
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
