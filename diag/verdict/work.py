"""Useful work, defined once: what makes a process's motion count as the job getting somewhere.

The misread this guards against is counting *motion* as *work*: a scheduler that spins on
"nothing to receive" burns a core and moves bytes between its own ranks while it serves
nobody; a rank busy-polling a collective that will never complete burns a core too. A process
does useful work when

- its CPU goes to frames that are neither a known wait nor a poll loop (``computes``);
- it reads its input (``reads_input``: rchar, file offsets, mapped pages);
- it writes output that is not a heartbeat, a wake-up, or its poll loop's exchange with the
  job's own ranks (``output_bytes``);
- it answers requests, whoever sent them (``answers``: a client inside the job - a benchmark
  harness, an RL loop querying its own server - counts as much as one outside); only a
  framework's own RPC channels (Ray's gRPC) are housekeeping (``framework_rpc``). Requests it
  holds unanswered are waits, whoever sent them (``with_requests_from_the_job``).

The verdict's measures (``diag.verdict.situation``) and the wait-for graph's computing nodes
read these predicates, never their own copy. Pure functions of ``ProcSignals``.
"""

from __future__ import annotations

import dataclasses
from typing import Collection, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from diag.frames import is_library
from diag.frameworks import union
from diag.model import Bundle, FdEnd, Frame
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.participants import is_helper, is_receive_collective, serving_ports
from diag.verdict.polling import MARKER_WORDS, POLL_KIND, PollLoop
from diag.verdict.tcp_ends import blocked_tcp_end
from diag.verdict.thread_wait import ThreadWait, frames_of
from diag.verdict.waits import LOCK, PEER
from diag.verdict.wording import verb, who

READ_MIN_BYTES = 1 << 20  # rchar or file progress over the capture that counts as loading
WRITE_MIN_BYTES = 1  # any output bytes, when the writer's own stack or CPU moves too
TRAFFIC_MIN_BYTES = 256 << 10  # sent by a rank waiting in a collective: the data moves
CHATTER_BYTES_PER_WRITE = 256  # a collective's control messages, not data: an empty batch
SERVED_MIN_BYTES = 16 << 10  # request traffic (both ways) that counts as requests answered


def computes(p: ProcSignals) -> bool:
    """CPU outside known waits and poll loops, in at least half of the intervals - or, with one
    sample (no deltas), a main thread running outside any wait. The verdict's workers and the
    wait-for graph's computing nodes, both."""
    running = p.main_wait is not None and p.main_wait.kind is None
    if p.intervals == 0:
        return running
    half = max(1, (p.intervals + 1) // 2)
    if p.runnable_intervals >= half and not p.spin_pct >= COMPUTE_PCT:
        return True  # wanted a CPU most of the time, outside any wait: a saturated host's work
    if p.compute_pct < COMPUTE_PCT:
        return False
    # Or a main thread last seen running outside any wait while compute burns: work that
    # started late in the capture.
    return p.compute_intervals >= half or running


def reads_input(p: ProcSignals) -> bool:
    """A loader getting through its files: rchar, read() offsets, resident mapped pages."""
    return max(p.read_delta_bytes, p.file_progress_bytes) >= READ_MIN_BYTES


def wakeup_writes(p: ProcSignals) -> bool:
    """Writes of at most 8 bytes each are an event loop waking a thread (eventfd: 8 bytes, the
    asyncio self-pipe: 1), not output: Ray's idle daemons, a loop's call_soon_threadsafe."""
    calls = p.write_calls_delta
    return calls > 0 and p.write_delta_bytes <= 8 * calls


def exchange_only(p: ProcSignals) -> bool:
    """Its bytes are the job's own exchange, not output: a poll loop (an idle scheduler's
    empty batch to its tensor-parallel peers every iteration), or a rank whose main thread sat
    in the collective that hands work out (a broadcast from the source rank) in every sample
    without computing, in messages of a few dozen bytes - the handout of nothing.

    A poll loop's bytes are dropped whole, whatever they went to: a bundle has no per-file
    write counter (wchar and syscw are the process's; ``open_files`` leaves out /dev and files
    under 16 MiB), so it cannot tell a socket from a file. An idle SGLang scheduler's wchar
    is its gloo chatter (~50 bytes a write); its load snapshots in /dev/shm go through an
    mmap, no write() at all. A loop caught once in its batch pick is still the loop
    (``polling``'s majority rule), so those bytes stay no output."""
    if p.poll is not None:
        return True
    labels = p.main_wait_labels
    if not labels or not all(map(is_receive_collective, labels)):
        return False
    # Nothing handed out: messages of a few dozen bytes each (a size header saying 0). A
    # handout of real batches, or pipeline stages' activations, writes kilobytes a call.
    if p.write_calls_delta > 0:
        return chatter(p)
    return p.write_delta_bytes < TRAFFIC_MIN_BYTES * max(1, p.intervals)


def chatter(p: ProcSignals) -> bool:
    """Its writes average a few dozen bytes a call: control messages, not data."""
    return p.write_delta_bytes <= CHATTER_BYTES_PER_WRITE * p.write_calls_delta


def output_bytes(p: ProcSignals, heartbeat_bytes: Mapping[Tuple[str, int], int]) -> int:
    """The bytes it wrote that are output: not what it wrote into a log judged a heartbeat
    (vLLM's zero-counter stats line: its wchar rose by the same bytes), not wake-ups, not its
    exchange with the job's own ranks, and not a heartbeat thread's talk while its main thread
    sits unchanged in a peer or lock wait - unless megabytes flow: a collective that moves
    data completes, and a loop calling it from one line is sampled there every time."""
    written = p.write_delta_bytes - heartbeat_bytes.get(p.key, 0)
    if written < WRITE_MIN_BYTES or wakeup_writes(p) or exchange_only(p):
        return 0
    moving = p.compute_intervals or p.main_moved or p.main_family not in (PEER, LOCK)
    return written if moving or p.write_delta_bytes >= TRAFFIC_MIN_BYTES else 0


# A framework's own RPC and long-poll channels between its processes, recognised by what they
# are: Ray's processes (by title or path) and those running Ray's core worker (its threads) talk
# gRPC to each other all the time, and hold long polls open on purpose - housekeeping, not the
# job's requests, and no request left waiting.
_RPC_MARKERS = union.RPC_MARKERS
_RPC_THREADS = union.RPC_THREADS


def framework_rpc(p: ProcSignals) -> bool:
    """Its listening ports are a framework's RPC channel (Ray's gRPC), or it is a helper."""
    text = " ".join(p.info.cmdline) + " " + p.info.name
    return (
        is_helper(p)
        or any(m in text for m in _RPC_MARKERS)
        or bool(_RPC_THREADS.intersection(p.thread_names))
    )


def request_ports(p: ProcSignals, ports: Collection[int]) -> FrozenSet[int]:
    """Its ports whose connections from the job's own processes are requests: the job's
    serving ports (``ports``: not a launcher's, not the rendezvous port, not gloo's or NCCL's)
    it listens on, unless they are a framework's RPC channel."""
    if framework_rpc(p):
        return frozenset()
    return frozenset(p.listen_ports).intersection(ports)


def answers(p: ProcSignals) -> bool:
    """It answered requests during the capture, whoever sent them (with the job's own
    requests counted in by ``with_requests_from_the_job``) - on connections it held, or on
    connections it accepted and closed between samples (``short_requests``)."""
    return p.served_delta_bytes >= SERVED_MIN_BYTES or p.short_requests is not None


def with_job_context(procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """What only the whole job tells about each process, applied once after the features:
    ranks that follow a poll loop (``with_poll_followers``), then requests from the job's own
    clients (``with_requests_from_the_job``)."""
    return with_requests_from_the_job(with_poll_followers(procs))


def with_poll_followers(procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """Ranks that wait, most of the time, in the collective through which the job's poll loop
    hands out its batch - every iteration, empty when idle (SGLang's TP ranks in
    ``broadcast_pyobj`` of an empty list), writing a few dozen bytes a call - follow that poll
    loop: their samples between two handouts are the loop's bookkeeping (an empty
    ``process_input_requests``), their CPU its spin, their wait the same one: for work. The
    loop is a rank seen polling for work, or, when every rank sits in the handout and bytes
    move, the handout itself. A rank that computes a batch writes kilobytes a call, or leaves
    the handout for a forward in most samples: it stays itself."""
    ranks = [p for p in procs if p.rank is not None and not p.dead and not is_helper(p)]
    leaders = {p.key[0] for p in ranks if polls_for_work(p)}
    hands = [p for p in ranks if p.poll is None and _in_handout(p)]
    for host in {p.key[0] for p in hands} - leaders:
        on_host = [p for p in ranks if p.key[0] == host]
        all_in = len(on_host) > 1 and all(p in hands for p in on_host)
        if all_in and any(p.write_calls_delta for p in on_host):
            leaders.add(host)  # the whole group cycles through the handout: its poll loop
    followers = {p.key for p in hands if p.key[0] in leaders}
    return [_follower(p) if p.key in followers else p for p in procs]


def _in_handout(p: ProcSignals) -> bool:
    """In the handout collective in most samples, its writes a few dozen bytes a call."""
    labels = [lb for lb in p.main_wait_labels if is_receive_collective(lb)]
    if not labels or len(labels) * 2 < len(p.main_wait_labels):
        return False
    return not p.write_calls_delta or chatter(p)


def _follower(p: ProcSignals) -> ProcSignals:
    labels = [lb for lb in p.main_wait_labels if is_receive_collective(lb)]
    wait = ThreadWait(POLL_KIND, labels[-1], p.main_wait.caller if p.main_wait else "", True)
    loop = PollLoop(wait=wait, markers=("handout",), samples=len(p.main_wait_labels))
    return dataclasses.replace(
        p,
        poll=loop,
        main_wait=wait,
        spin_pct=p.spin_pct + p.compute_pct,
        compute_pct=0.0,
        compute_intervals=0,
    )


def with_requests_from_the_job(procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """The processes with the requests of the job's own clients counted like those from
    outside - traffic answered, connections, requests left unanswered through the window - on
    the job's serving ports, unless those are a framework's RPC channel. One count, read by
    the rules and the wait-for graph alike: a harness waiting on a stuck handler of its own
    server is a waiting client; a harness served is work."""
    ports = serving_ports(procs)
    out: List[ProcSignals] = []
    for p in procs:
        own = request_ports(p, ports)
        moved = sum(max(0, b) for port, b in p.internal_served_bytes.items() if port in own)
        stale = [(port, age) for port, age in p.internal_stale if port in own]
        conns = sum(n for port, n in p.internal_conns.items() if port in own)
        if not (moved or stale or conns):
            out.append(p)
            continue
        out.append(
            dataclasses.replace(
                p,
                served_delta_bytes=p.served_delta_bytes + moved,
                served_conns=p.served_conns + conns,
                stale_requests=p.stale_requests + len(stale),
                stale_age_s=max([p.stale_age_s, *(age for _, age in stale)]),
                stale_ports=tuple(sorted({*p.stale_ports, *(port for port, _ in stale)})),
            )
        )
    return out


def polls_for_work(p: ProcSignals) -> bool:
    """Its main thread is a poll loop asking for work (not a collective's completion)."""
    return p.poll is not None and p.main_wait is not None and p.main_wait.kind == POLL_KIND


def poll_note(procs: Sequence[ProcSignals]) -> str:
    """ ", ranks 0-1 busy-poll with nothing to receive (98% of a core: no work)" - why a core
    burns in an idle job, said where the sentence names the waits; "" when none polls."""
    pollers = [p for p in procs if p.poll is not None and p.cpu_pct >= COMPUTE_PCT]
    if not pollers:
        return ""
    seen = dict.fromkeys(m for p in pollers if p.poll is not None for m in p.poll.markers)
    how = ", ".join(MARKER_WORDS[m] for m in seen)
    busiest = max(p.cpu_pct for p in pollers)
    return (
        f" ({who(pollers)} {verb(pollers, 'busy-polls', 'busy-poll')} with nothing to receive "
        f"- {how} - at up to {busiest:.0f}% of a core: motion, not work)"
    )


# --- a data-starved training loop --------------------------------------------------------------
# The loop's main thread waits in the DataLoader for its next batch; the batch comes from the
# worker processes, each in ``_worker_loop`` calling the dataset. A worker asleep or reading
# *inside the dataset's own code* (a remote fetch, a slow disk) makes batches, slowly: the
# loop is starved, not stuck. One idle in ``_worker_loop`` itself waits for indices - the
# loop does not ask; one blocked on a lock in the dataset may be a fork-inherited deadlock.
_LOADER_FRAMES = union.BATCH_WAIT_FRAMES
_WORKER_LOOPS = union.WORKER_LOOPS
_LOADER_FILES = union.BATCH_WAIT_FILES
_FETCH_WAITS = frozenset({None, "sleep", "socket-read", "event-loop", POLL_KIND})


# A worker's request with no byte of answer for this long is no slow fetch but a hung one: a
# sample's read does not take minutes to start answering, and a call without a timeout (the
# DataLoader's own ``timeout`` is 0 by default) waits for ever.
FETCH_HUNG_S = 120.0


class Starved(NamedTuple):
    """A loop waiting for batches (``loader``), its workers inside the dataset, and where."""

    loader: ProcSignals
    workers: List[ProcSignals]
    dataset_frame: str  # the job's frame the worker loop called (``RemoteShards.__getitem__``)
    # Workers whose fetch hangs: blocked on a TCP reply owed for ``FETCH_HUNG_S`` or more with
    # no byte received since (tcp_info's last-data ages), with that connection.
    hung: Tuple[Tuple[ProcSignals, FdEnd], ...] = ()
    loaders: int = 0  # the loop's DataLoader workers, fetching or not


def fetch_hung(bundle: Bundle, w: ProcSignals) -> Optional[FdEnd]:
    """The connection a worker's fetch hangs on: the reply owed to its request has not sent
    one byte for ``FETCH_HUNG_S`` (this side sent last, long ago), or None."""
    end = blocked_tcp_end(bundle, w)
    if end is None or end.owed is not True:
        return None
    ages = (end.last_sent_s, end.last_recv_s)
    if any(a is None or a < FETCH_HUNG_S for a in ages):
        return None
    return end


def _is_torch_data(frame: Frame) -> bool:
    return any(m in frame.filename for m in _LOADER_FILES)


def _waits_for_batch(bundle: Bundle, p: ProcSignals, read: Dict[Optional[str], bool]) -> bool:
    """Its main thread waits in a DataLoader's get at the last sample. ``read``: the answer
    by stack id (a content hash), so 16,384 ranks in one stack read its frames once."""
    if p.main_wait is None:
        return False
    sid = p.main_stack_ids[-1] if p.main_stack_ids else None
    found = read.get(sid)
    if found is None:
        found = read[sid] = any(
            _is_torch_data(f) and f.name.endswith(_LOADER_FRAMES) for f in frames_of(bundle, sid)
        )
    return found


def _dataset_frame(frames: Sequence[Frame]) -> str:
    """The job's frame the worker loop called, or "" (it waits in the loop itself)."""
    loop = next((i for i, f in enumerate(frames) if f.name in _WORKER_LOOPS), None)
    if loop is None:
        return ""
    own = [f for f in frames[:loop] if not is_library(f)]
    return own[-1].name if own else ""  # innermost first: the last is the one called


def _fetching(bundle: Bundle, w: ProcSignals) -> str:
    """The dataset frame a worker stood in at most of its samples and the last one, waiting
    on a door (a sleep, a socket, a file) or working, never on a lock or a queue."""
    if w.dead or w.stopped or (w.main_wait is not None and w.main_wait.kind not in _FETCH_WAITS):
        return ""
    seen = [_dataset_frame(frames_of(bundle, sid)) for sid in w.main_stack_ids]
    inside = [f for f in seen if f]
    return seen[-1] if seen and seen[-1] and 2 * len(inside) > len(seen) else ""


def data_starved(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[Starved]:
    """A process waits for batches while its DataLoader workers are all inside the dataset's
    own code: the input pipeline is the bottleneck (slow), not a wait that never ends."""
    alive = [p for p in procs if not p.dead]
    children: Dict[Tuple[str, int], List[ProcSignals]] = {}  # once, not a scan per waiter
    for w in alive:
        if w.info.ppid is not None:
            children.setdefault((w.key[0], w.info.ppid), []).append(w)
    read: Dict[Optional[str], bool] = {}
    for p in alive:
        if not _waits_for_batch(bundle, p, read):
            continue
        kids = children.get(p.key, [])
        loaders = [w for w in kids if not _WORKER_LOOPS.isdisjoint(_frame_names(bundle, w))]
        fetching = [(frame, w) for w in loaders for frame in [_fetching(bundle, w)] if frame]
        # A worker in the dataset on a lock or a queue: maybe a fork-inherited deadlock.
        odd = [
            w for w in loaders if _dataset_frame(_frames(bundle, w)) and not _fetching(bundle, w)
        ]
        if fetching and not odd:
            workers = [w for _, w in fetching]
            hung = tuple((w, e) for w in workers for e in [fetch_hung(bundle, w)] if e)
            return Starved(p, workers, fetching[0][0], hung, len(loaders))
    return None


def _frames(bundle: Bundle, p: ProcSignals) -> Sequence[Frame]:
    """Its main thread's frames at the last sample, innermost first."""
    return frames_of(bundle, p.main_stack_ids[-1] if p.main_stack_ids else None)


def _frame_names(bundle: Bundle, p: ProcSignals) -> FrozenSet[str]:
    return frozenset(f.name for f in _frames(bundle, p))
