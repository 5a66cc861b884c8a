"""The rules' words: every sentence a rule of the table gives, in one place.

A rule decides - which state, how sure, whom it blames - and takes its sentence from here: a
verdict summary (opening with its state, as ``base.decided`` checks), a suspect's reason, a
table line. Each function takes the values a sentence names (processes, pids, ports, counts,
states) and returns the sentence; its docstring says which rule says it and when. Phrases
shared with the longer stories (who, where, what a group waits in) come from
``diag.verdict.wording``; the stories themselves live in ``stories`` and ``pipe_story``.

Sections follow the table's families: deaths, motion, graph, locks, peers, then the table's
own lines (why a row outranks the rows after it). The doors' sentences are in
``words_doors``, the file locks' (``waits_for_file_lock``, ``polls_for_stale_lock_file``) in
``words_files``, apart only to keep each module short.

May import the base (``diag.model``, ``diag.vocab``) and ``diag.verdict`` - never a family
module of the table: they import this one.
"""

from __future__ import annotations

from typing import AbstractSet, Optional, Sequence, Set, Tuple

from diag.model import FdEnd, WaitNode
from diag.verdict.backoff import Backoff
from diag.verdict.features import ProcSignals
from diag.verdict.lock_holder import LockHolders
from diag.verdict.log_deaths import LogDeath
from diag.verdict.rendezvous import RdzvSettings, StoreJoin
from diag.verdict.rules.words_served import short_requests_part
from diag.verdict.self_wait import SelfWait, UndrainedPut, self_wait_text, undrained_put_text
from diag.verdict.short_requests import ShortRequests
from diag.verdict.wait_age import age_words
from diag.verdict.wording import group_by_wait, size, verb, waits_phrase, where, who
from diag.verdict.work import SERVED_MIN_BYTES, Starved
from diag.vocab import WaitKind

# --- deaths -----------------------------------------------------------------------------------


def rank_gone_in_log(death: LogDeath, survivors: Sequence[ProcSignals]) -> str:
    """``log_names_dead_rank``: the log says rank N died and no live process is rank N."""
    return (
        f"the log says rank {death.rank} died ({death.path}: `{death.line[:160]}`) "
        f"and no process of the job is rank {death.rank} any more ({who(survivors)} still "
        "there) - the other ranks can never finish their collectives with it; read the log "
        "above that line, restart the job"
    )


def death_in_log(path: str, line: str, alive: Sequence[ProcSignals]) -> str:
    """``log_reports_death``: nothing moves and the log says a process of the job died (``line``
    quoted, whitespace folded); what the survivors wait in follows."""
    quoted = " ".join(line.split())[:160]
    waits = waits_phrase(group_by_wait(alive)[:2])
    return (
        f"the log says a process of the job died ({path}: `{quoted}`) and "
        f"nothing moves{f' ({waits})' if waits else ''} - the survivors wait for it; read "
        "the log above that line, restart the job"
    )


# --- motion -----------------------------------------------------------------------------------


def answers_requests(servers: Sequence[ProcSignals]) -> str:
    """``answers_requests``: bytes flow to the servers' listening ports (the first three). The
    connections closed on a port are the port's: processes sharing it (a master and its
    workers) are named together, with the one count."""
    parts = []
    short = [
        p
        for p in servers
        if p.short_requests is not None and p.served_delta_bytes < SERVED_MIN_BYTES
    ]
    told: Set[ShortRequests] = set()
    for p in servers[:3]:
        if p in short and p.short_requests is not None:
            if p.short_requests in told:
                continue
            told.add(p.short_requests)
            sharing = [q for q in short if q.short_requests == p.short_requests]
            name = who(sharing) if len(sharing) > 1 else ""
            parts.append(short_requests_part(p, p.short_requests, name))
            continue
        ports = ", ".join(f":{port}" for port in p.listen_ports[:3])
        rate = p.served_delta_bytes / p.window_s if p.window_s > 0 else 0.0
        parts.append(
            f"{p.name} answers requests on {ports} ({size(p.served_delta_bytes)} over "
            f"{p.served_conns} client connection(s), {size(rate)}/s)"
        )
    return "; ".join(parts) + " - no log line needed to see it"


def stuck_worker(stuck: Sequence[ProcSignals]) -> str:
    """``answers_requests``' tail: a worker of the same server holds requests it never
    answers while the others serve - the server moves, that worker does not."""
    total = sum(q.stale_requests for q in stuck)
    age = max(q.stale_age_s for q in stuck)
    return (
        f"; but {who(list(stuck))} - {'a worker' if len(stuck) == 1 else 'workers'} of the "
        f"same server - {verb(list(stuck), 'holds', 'hold')} {total} request(s) unanswered "
        f"for {age:.0f}+ s, waiting in {where(stuck[0])}: stuck, while the others serve (its "
        f"clients wait) - see it with `py-spy dump --pid {stuck[0].pid}`, then restart that "
        "worker alone"
    )


def stuck_worker_reason(q: ProcSignals) -> str:
    """A suspect's reason: the worker that does not answer beside those that do."""
    return f"holds {q.stale_requests} request(s) unanswered while its server's other workers answer"


_FETCH_HOW = {
    "sleep": "asleep there (a throttled or remote fetch, a retry)",
    "socket-read": "on the network there (a remote fetch)",
    "event-loop": "on the network there (a remote fetch)",
}


def data_starved(st: Starved) -> str:
    """``children_work``: a loop waits for batches its DataLoader workers make slowly inside
    the dataset's own code - the input pipeline is the bottleneck."""
    kinds = {w.main_wait.kind if w.main_wait else None for w in st.workers}
    how = _FETCH_HOW.get(next(iter(kinds)) or "", "reading there (storage, a decode)")
    n = len(st.workers)
    of = f" of its {st.loaders}" if st.loaders > n else ""
    return (
        f"{who([st.loader])} waits in the DataLoader for its next batch, and {n}{of} "
        f"DataLoader worker{'s' if n > 1 or of else ''} ({who(st.workers)}) "
        f"{verb(st.workers, 'is', 'are')} inside the dataset's `{st.dataset_frame}`, {how} - "
        "the job is data-starved, not stuck: don't kill it. See where the dataset spends its "
        f"time (`py-spy dump --pid {st.workers[0].pid}`), check the storage or network it "
        "reads, raise num_workers / prefetch_factor or cache the data"
    )


def fetch_hung(st: Starved) -> str:
    """``children_work``: a worker's fetch inside the dataset has had no byte of answer for
    minutes - the loop waits for a batch that never comes."""
    w, end = st.hung[0]
    more = f" (and {len(st.hung) - 1} more worker(s) like it)" if len(st.hung) > 1 else ""
    quiet = min(end.last_sent_s or 0.0, end.last_recv_s or 0.0)
    return (
        f"{who([st.loader])} waits in the DataLoader for its next batch, and DataLoader "
        f"worker {who([w])} inside the dataset's `{st.dataset_frame}` has waited "
        f"{age_words(quiet)} for the reply to its request on fd {end.fd} (tcp {end.local} → "
        f"{end.remote}) without receiving one byte{more}: the fetch hangs, and with no timeout "
        "(the DataLoader's own is 0 by default) the loop waits for ever. Look at the store "
        f"at {end.remote}; kill and restart with a timeout on the fetch (and a retry), or "
        "DataLoader(timeout=...) to turn the hang into an error"
    )


def fetch_hung_reason(end: FdEnd) -> str:
    """A hung worker as a suspect: whom it waits on, and for how long."""
    quiet = min(end.last_sent_s or 0.0, end.last_recv_s or 0.0)
    return f"its fetch from {end.remote} has received nothing for {age_words(quiet)}"


def backoff_reason(b: Backoff) -> str:
    """A back-off's suspect line: where it sleeps and when it wakes."""
    budget = f" of {age_words(b.timeout_s)}" if b.timeout_s is not None else ""
    return (
        f"sleeps in {where(b.proc)} ({b.call}{budget}); wakes by itself in "
        f"~{age_words(max(1.0, b.wakes_in_s))} - its peers wait for it"
    )


def starved_reason(st: Starved) -> str:
    """A suspect of ``data_starved``: a worker, in the dataset's frame."""
    return f"DataLoader worker in the dataset's `{st.dataset_frame}`: the loop waits for it"


# --- graph ------------------------------------------------------------------------------------

OWN_SERVER_REASON = "waits for its own server"


def calls_itself(p: ProcSignals, evidence: str) -> str:
    """``calls_itself``: a thread of ``p`` waits for an answer from ``p``'s own listener
    (``evidence``: the graph's tcp self-edge, "reads ... whose other end ...")."""
    return (
        f"{p.name} waits for its own server - in {where(p)} it {evidence}; "
        "the thread that would accept and answer is the one waiting, so nothing ends it. "
        "Restart it; the fix: no blocking call to its own port from its event loop "
        "(await an async client, or call the handler's function directly)"
    )


def pipe_outlives_child(p: ProcSignals, child: Optional[WaitNode], holder: WaitNode) -> str:
    """``pipe_outlives_child``: ``p`` waits for EOF from its exited ``child`` (None: not in
    the graph), but ``holder`` - started in the background - still holds the write end."""
    kid = f" (pid {child.pid} {child.label.split()[-1]})" if child else ""
    return (
        f"{p.name} waits in {where(p)} for EOF on its child's output, but the "
        f"child{kid} has exited and {holder.label} still holds the write end - a process "
        "it started in the background inherited the pipe, and the call returns only when "
        f"that one exits. Kill pid {holder.pid} (or send the background command's output "
        "elsewhere: `cmd > log 2>&1 &`)"
    )


def pipe_holder_reason(evidence: str) -> str:
    """The suspect of ``pipe_outlives_child``: the holder of the pipe, with the edge's evidence."""
    return f"holds the pipe: {evidence}"[:200]


def stopped_outsider(line: str, n: WaitNode) -> str:
    """``waits_on_stopped_outsider``: a chain of waits (``line``) ends at ``n``, outside the
    job and stopped (the line ends in its ``kill -CONT``) or a zombie."""
    act = ": restart what it served (its parent must reap it)" if n.state == "zombie" else ""
    return (
        f"{line} - nothing in the job moves until pid {n.pid} does{act} "
        "(it is outside the job; killing the job would not help)"
    )


def outsider_reason(n: WaitNode) -> str:
    """The suspect of ``waits_on_stopped_outsider``: the process outside the job."""
    return f"{n.state} outside the job: {n.detail}"


def chains_never_end(chains: Sequence[str]) -> str:
    """``chains_never_end``: every chain of waits ends stopped, dead or in a cycle (two shown),
    with the fix where the cycle is a known pitfall."""
    return (
        "nothing moves and every chain of waits ends where nothing can end it - "
        + "; ".join(chains[:2])
        + _known_cycle(chains[:2])
    )


def _known_cycle(chains: Sequence[str]) -> str:
    """multiprocessing's "joining processes that use queues": a child whose queue feeder
    still writes does not exit until the parent reads, and the parent joins it before
    reading - the cycle the graph shows (child, pipe), and its one-line fix."""
    text = " ".join(chains)
    if "QueueFeederThread" in text and ".join` " in text:
        return (
            ". This is multiprocessing's 'join before get' pitfall: the child cannot exit "
            "until what it put on the queue is read - call `q.get()` before `p.join()`"
        )
    return ""


def chain_end_reason(n: WaitNode) -> str:
    """A suspect at the end of a chain of waits: its state and what it does there."""
    return f"{n.state}: {n.detail}"[:200]


def chains_end_at_doors(chain: str, end: WaitNode) -> str:
    """``chains_end_at_doors``: every chain ends at a process (``end``) something can wake."""
    return (
        f"nothing moves, and every chain of waits ends at a process something outside "
        f"can wake - {chain}. Healthy if what {end.label} waits for comes (a timer's "
        f"next poll, a request, input); stuck if it never does: see what it waits for "
        f"(`py-spy dump --pid {end.pid}`) before killing anything"
    )


# What a kind of wait among the stuck adds to "nothing can wake it", in this order.
_KIND_NOTES: Tuple[Tuple[WaitKind, str], ...] = (
    ("write-full", " (a write blocks on a full pipe or socket: its reader stopped reading)"),
    ("fifo-open", " (opening a named pipe (fifo) waits for a process to open its other end)"),
    ("disk", " (state D: an uninterruptible kernel wait - storage or NFS not answering)"),
)


def nothing_can_wake(alive: Sequence[ProcSignals], kinds: AbstractSet[Optional[WaitKind]]) -> str:
    """``nothing_can_wake``, the table's last rule: what the live processes wait in, and a
    note per kind of wait among ``kinds`` (their main threads') that names its cause."""
    summary = (
        f"nothing moves and nothing can wake it by itself (no listening port, no "
        f"timer, no wakeups): {waits_phrase(group_by_wait(alive)[:3])} - waiting on each "
        "other, or on a peer that never answers"
    )
    return summary + "".join(note for kind, note in _KIND_NOTES if kind in kinds)


def blocked_in_reason(p: ProcSignals) -> str:
    """A suspect of ``nothing_can_wake``: where it waits."""
    return f"blocked in {where(p)}"


# --- locks ------------------------------------------------------------------------------------

OWN_LOCKS_REASON = "blocked on its own locks"


def blocked_on_itself(stuck: Sequence[ProcSignals]) -> str:
    """``blocked_on_itself``: every thread of ``stuck`` waits untimed on a private futex."""
    p = stuck[0]
    threads = verb(stuck, "all its threads wait", "all their threads wait (the first's")
    threads += f" in {where(p)} and the like" + verb(stuck, "", ")")
    can = verb(stuck, "can never wake by itself", "can each never wake by itself")
    return (
        f"{who(stuck)} {can} - {threads}, each on a "
        "lock, queue or event of its own process (private futexes), so only one of its own "
        "threads could end a wait, and none runs; nothing outside can help. Kill it; "
        f"`py-spy dump --pid {p.pid}` shows who waits where (unless it waits for a signal)"
    )


def lock_holder_tail(h: LockHolders) -> str:
    """``blocked_on_itself``' tail: who holds the lock its waiters block on (``lock_holder``)."""
    waiters = f"{h.waiters} thread(s) block on one lock in {h.lock_in}"
    if not h.candidates:
        return (
            f". {waiters} that no live thread is seen holding (the others wait for work or "
            "for threads to end): its holder most likely died holding it, or returned "
            "without releasing it"
        )
    if len(h.candidates) == 1:
        name, where_ = h.candidates[0]
        return (
            f". {waiters}, held by thread {name}: the only other thread parked in the job's "
            f"own code on an event, condition or lock - untimed, in {where_}; what it waits "
            "for never comes"
        )
    names = ", ".join(f"{n} ({w})" for n, w in h.candidates)
    return f". {waiters}, held by one of the threads parked in the job's own code: {names}"


def waits_on_itself(w: SelfWait, name: str) -> str:
    """``waits_on_itself``: a thread of ``name`` blocked on a lock its own stack holds."""
    return self_wait_text(w, name)


def self_wait_reason(w: SelfWait) -> str:
    """The suspect of ``waits_on_itself``: the two frames and what joins them."""
    return f"waits on itself: blocked in {w.blocked.name}, held by {w.holder.name} via a {w.kind}"


PUT_REASON = "blocked putting on a full queue no thread of it drains"


def put_never_drained(w: UndrainedPut, name: str) -> str:
    """``waits_on_itself``: a main thread's ``Queue.put`` that no thread of ``name`` drains."""
    return undrained_put_text(w, name)


def fs_waiting(others: Sequence[ProcSignals]) -> str:
    """``waits_on_filesystem``: what the other participants wait in, for ``fs_story``."""
    return waits_phrase(group_by_wait(others)[:2])


def fs_waiters(peers: Sequence[ProcSignals]) -> str:
    """``waits_on_filesystem``: the ranks waiting on the stalled one ("" for none)."""
    return who(peers) if peers else ""


# --- peers ------------------------------------------------------------------------------------


def agents_never_meet(agent: ProcSignals, hosts: int, differ: str) -> str:
    """``waits_for_nodes_to_join``: agents on several hosts wait with different settings."""
    return (
        f"torchrun's agents on {hosts} hosts all wait in {where(agent)}, but with "
        f"different rendezvous settings ({differ}) - they will never meet. Restart them "
        "with the same --rdzv-endpoint, --rdzv-id and --nnodes"
    )


def rendezvous_reason(settings: RdzvSettings) -> str:
    """A suspect of ``waits_for_nodes_to_join`` (settings differ): its agent's settings."""
    return f"rendezvous {settings.describe()}"


def nodes_to_join(agent: ProcSignals, settings: RdzvSettings, hosts: int) -> str:
    """``waits_for_nodes_to_join``: torchrun's agent waits for other nodes (``hosts``: how
    many hosts of the capture joined; 1: no rank has started here)."""
    joined = "no rank has started on this host yet"
    if hosts > 1:
        joined = f"{hosts} host(s) of this capture joined"
    return (
        f"torchrun (pid {agent.pid}) waits in {where(agent)} for the other nodes to join "
        f"its rendezvous ({settings.describe()}) - {joined}, so nothing here is stuck: the "
        "missing nodes are. Start torchrun on them with the same --rdzv-endpoint and "
        "--rdzv-id, or see why they did not start (their logs, the scheduler); it gives up by "
        "itself at the join timeout (default 600 s) - killing it does not help"
    )


def rank_joins_store(join: StoreJoin) -> str:
    """``waits_for_nodes_to_join``: ranks in ``init_process_group`` still connect to their
    TCPStore and no process of the capture listens on its port - the store's host is not up."""
    first, many = join.joiners[0], len(join.joiners) > 1
    if join.port:
        at = (
            f"{join.endpoint()} (MASTER_ADDR:MASTER_PORT), where no process of this capture listens"
        )
        check = f"`ss -ltn | grep :{join.port}` on {join.addr or 'its host'}"
    else:
        at = (
            "MASTER_ADDR:MASTER_PORT - not in the environment it started with (set by the "
            "script, or an init_method) - and no process of this capture hosts the store"
        )
        check = "`ss -ltn` on MASTER_ADDR's host"
    return (
        f"{who(join.joiners)} {verb(join.joiners, 'waits', 'wait')} in {where(first)} to "
        f"join the rendezvous: {'they connect' if many else 'it connects'} to the c10d store at "
        f"{at}. No collective has begun, so none is mismatched: the store's host (rank 0, or "
        "torchrun's agent) is not started, failed, or is told another address. Check that rank "
        f"0 / the master runs and listens ({check}) and that every rank has the same "
        "MASTER_ADDR and MASTER_PORT; it fails by itself when init_process_group's timeout runs "
        "out (its `timeout=`, 30 min by default, 10 for NCCL) - if rank 0 is only late, killing "
        f"{'them' if many else 'it'} does not help"
    )


def collective_laggard(detail: str, pid: int) -> str:
    """``collective_laggard``: a collective record (``detail``) names the rank behind (``pid``)."""
    return f"{detail} - the other ranks wait for it; see where it is with `py-spy dump --pid {pid}`"


def gpu_spins(alive: Sequence[ProcSignals]) -> str:
    """``gpu_spins``: a GPU busy at idle power, nothing else moves (what the live wait in)."""
    return (
        "the GPU reads busy at idle power and nothing "
        f"else moves ({waits_phrase(group_by_wait(alive)[:2])}) - a kernel waits on a "
        "peer that never arrives; kill the job and restart"
    )


# --- the table's own lines --------------------------------------------------------------------
# Why a row outranks the rows after it: what a report prints beside a later rule that also
# matched ("overruled: ..."). One sentence per row, in the table's order
# (tests/test_rule_table.py: no two rows share one).

DIED_OUTRANKS = (
    "a rank that died never answers its peers: whatever they print or burn afterwards waits "
    "on it or tears down because of it"
)
STOP_OUTRANKS = (
    "a stopped or dead process owes its peers what they wait for, whatever they print or burn"
)
DEATH_LINE_OUTRANKS = (
    "the log's word that a rank died explains its peers' spin or teardown, which alone reads "
    "as work or as a wait"
)
MOVES_OUTRANKS = "output that moves is progress, whatever waits elsewhere"
WORK_OUTRANKS = "CPU, reads or memory that move are work without output: slow, not stuck"
CHILDREN_WORK_OUTRANKS = (
    "children computing, or workers fetching, for a waiting parent are its work, though its "
    "own threads only wait"
)
OWN_SERVER_OUTRANKS = (
    "a process calling its own port waits on itself: no client, timer or peer can end it"
)
PIPE_HOLDER_OUTRANKS = (
    "the live holder of the pipe, not the exited child, is what the waiter waits on"
)
STOPPED_OUTSIDER_OUTRANKS = (
    "a stopped process outside the job ends every chain through it: the job's own waits, "
    "read alone, would blame one of its ranks"
)
PEERS_OUTRANKS = (
    "ranks waiting on a peer name the odd rank: a divergence, whatever pools, locks or "
    "doors the same stacks show"
)
BACKOFF_OUTRANKS = (
    "a rank whose sleep ends by itself within a sane back-off resumes: its peers' wait is "
    "slow, not a divergence"
)
LOST_RESULTS_OUTRANKS = (
    "a parent waiting for pool results no worker computes is a lost task, not its workers' "
    "empty queue"
)
LOCK_CYCLE_OUTRANKS = (
    "threads each holding what the other wants form a cycle no port or timer of the process "
    "can break"
)
GPU_SPIN_OUTRANKS = (
    "a GPU busy at idle power while nothing else moves is a kernel waiting on a peer, not an "
    "idle wait"
)
LOCK_NO_DOOR_OUTRANKS = (
    "a lock only its own process can release, in a process with no door, waits for ever "
    "whatever doors other processes have"
)
LOGGED_DEATH_OUTRANKS = (
    "a death the job's own log reports explains a still job, past the ports and timers that "
    "read as idle"
)
PIPE_FULL_OUTRANKS = (
    "a writer blocked on a full pipe names the reader that stopped reading, where a chain "
    "or 'nothing can wake' names none"
)
SELF_LOCK_OUTRANKS = (
    "a thread blocked on a lock its own stack holds names both frames: more than any "
    "reading of the process as a whole"
)
NEVER_WAKES_OUTRANKS = "a rank that can never wake by itself hangs the job at its next collective"
ANSWERS_OUTRANKS = "a server answering its clients is progressing, however quiet its log"
LOCK_HOLDER_OUTRANKS = "a file lock's holder outside the job decides when it goes on"
FILESYSTEM_OUTRANKS = (
    "a rank asleep on a FUSE or network mount waits on that filesystem's owner, not on "
    "its peers: it is no diverged rank"
)
JOIN_OUTRANKS = "an agent or a rank waiting to join its rendezvous is not a diverged rank"
RECORDS_OUTRANKS = "collective records name the rank behind, whatever the stacks show"
SERVER_OUTRANKS = (
    "ranks waiting for a server to hand out work are a ready server, not a diverged rank"
)
UNANSWERED_OUTRANKS = "clients waiting unanswered past the capture outrank an open port"
FULL_PIPE_OUTRANKS = "a cycle through a full pipe is told as its picture: the writer and its reader"
DEAD_CHAINS_OUTRANKS = (
    "chains ending stopped, dead or in a cycle outrank a port or a timer elsewhere"
)
LOCK_FILE_OUTRANKS = "polling for a lock file no process of the job holds is not a timer wait"
DOORS_OUTRANKS = "waits a port, stdin or a timer can end are idle before they are stuck"
DOOR_CHAINS_OUTRANKS = (
    "a chain that ends at a door names who can end the wait, where the ranks' own waits see none"
)
GPU_FAILED_OUTRANKS = (
    "a GPU that fell off the bus or lost its memory's integrity ends its rank's work: its "
    "peers wait for a rank that cannot answer, however it spins on the lost device"
)
CPU_HELD_OUTRANKS = (
    "a rank the kernel keeps from the CPU (a cgroup limit, a low priority) is slow however "
    "its peers wait or its output moves: the machine sets the job's pace"
)

# The verdict's sentence (after "unknown: ") when no row decided: only if the fallback failed.
NO_RULE_DECIDED = "nothing moves, and the rules could not say more (see the problems below)"


def rule_failed(rule_id: str, exc: Exception) -> str:
    """A problem line: a row raised and was skipped (the verdict went on without it)."""
    return f"rule {rule_id} failed and was skipped: {type(exc).__name__}: {exc}"[:300]
