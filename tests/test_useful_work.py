"""Useful work, not motion (#28): a poll loop's CPU and its ranks' exchange are no work; a spin
on a collective's completion is that collective's wait; a busy server and a CPU-bound rank
keep their verdicts. Table-driven on built series (``series.build``), no processes."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from series import SELECTORS, SOCKETSERVER, TORCH, Proc, StackSpec, Thr, build

from diag.model import ServedConn
from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.polling import POLL_KIND, POLLED_COLLECTIVE, frame_marker
from diag.verdict.progress import is_heartbeat
from diag.verdict.work import computes, exchange_only

SITE = "/venv/lib/python3.11/site-packages"
ZMQ_ERROR = f"{SITE}/zmq/error.py"
ZMQ_SOCKET = f"{SITE}/zmq/sugar/socket.py"
SCHED = f"{SITE}/engine/scheduler.py"
FUTURES = f"{SITE}/torch/futures/__init__.py"

LOOP = (("event_loop_normal", SCHED), ("run_scheduler", SCHED))
AGAIN = (
    ("ZMQError.__init__", ZMQ_ERROR),
    ("Socket.recv_pyobj", ZMQ_SOCKET),
    ("recv_requests", SCHED),
    *LOOP,
)
RECV_RUNNING = (("Socket.recv_pyobj", ZMQ_SOCKET), ("recv_requests", SCHED), *LOOP)
ON_IDLE = (("get_loads", SCHED), ("Scheduler.on_idle", SCHED), *LOOP)
BETWEEN = LOOP  # the loop itself, sampled between two calls
EMPTY_BROADCAST = (
    ("broadcast", TORCH),
    ("broadcast_pyobj", f"{SITE}/engine/utils.py"),
    ("recv_requests", SCHED),
    *LOOP,
)
FORWARD = (("LlamaModel.forward", f"{SITE}/engine/llama.py"), ("run_batch", SCHED), *LOOP)
FRONT = (("PollSelector.select", SELECTORS), ("BaseServer.serve_forever", SOCKETSERVER))

Stacks = List[Sequence[Tuple[str, str]]]
AnyStack = Union[StackSpec, List[StackSpec]]  # one stack, or one per sample


def _front(served: bool = False) -> Proc:
    conns: Optional[List[Tuple[ServedConn, ...]]] = None
    if served:  # a client's requests answered between samples (both ways, bytes rising)
        conns = [
            (ServedConn(port=8000, inode=9, bytes_in=k * 40_000, bytes_out=k * 90_000),)
            for k in range(3)
        ]
    return Proc(pid=100, role="launcher", stack=FRONT, ports=(8000,), served=conns)


def _scheduler(pid: int, rank: int, stacks: Stacks, cpu: float = 98.0, **kw: object) -> Proc:
    return Proc(
        pid=pid,
        ppid=100,
        rank=rank,
        world_size=2,
        rank_source="title",
        stack=list(stacks),
        cpu_pct=cpu,
        state="R",
        wchan=None,
        syscall="running",
        **kw,  # type: ignore[arg-type]
    )


def test_markers_name_what_a_loop_polls_with() -> None:
    from diag.model import Frame

    assert frame_marker(Frame(name="ZMQError.__init__", filename=ZMQ_ERROR)) == "nonblocking"
    assert frame_marker(Frame(name="Scheduler.on_idle", filename=SCHED)) == "idle-hook"
    assert frame_marker(Frame(name="self_check_during_idle", filename=SCHED)) == "idle-hook"
    assert frame_marker(Frame(name="Queue.get_nowait", filename="queue.py")) == "nonblocking"
    assert frame_marker(Frame(name="Future.done", filename=FUTURES)) == "completion"
    # a user function named `done` or one about "idleness" in a word is no marker
    assert frame_marker(Frame(name="done", filename="/job/train.py")) is None
    assert frame_marker(Frame(name="validate_token", filename="/job/auth.py")) is None


def test_idle_scheduler_busy_polling_reads_idle_not_cpu_bound() -> None:
    """SGLang's default idle: ~100% of a core in on_idle / a NOBLOCK receive raising Again."""
    sched = _scheduler(200, 0, [AGAIN, ON_IDLE, RECV_RUNNING])
    bundle = build([_front(), sched])
    by_pid = {p.pid: p for p in extract(bundle)}
    p = by_pid[200]
    assert p.poll is not None and p.main_wait is not None and p.main_wait.kind == POLL_KIND
    assert p.compute_pct < 10 and p.spin_pct > 90 and not computes(p)
    v = classify(bundle)
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary
    assert "works_silently" not in {m.rule for m in v.also_matched}


def test_a_flag_read_between_polls_is_the_loop_not_work() -> None:
    """Real SGLang caught once between two idle hooks, reading a flag of the loop
    (``EnvField.get`` <- ``is_disable_overlap_for_batch`` <- the loop): still the poll loop.
    A ``run_batch`` just as shallow is work (the busy contrast below)."""
    flag = (("EnvField.get", SCHED), ("is_disable_overlap_for_batch", SCHED), *LOOP)
    sched = _scheduler(200, 0, [flag, ON_IDLE, ON_IDLE])
    p = {p.pid: p for p in extract(build([_front(), sched]))}[200]
    assert p.poll is not None and not computes(p)
    v = classify(build([_front(), sched]))
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary


def test_tp2_idle_schedulers_exchanging_empty_batches_read_idle() -> None:
    """At TP 2 the idle schedulers also broadcast the empty batch every loop: bytes between
    the job's own ranks, tens of bytes a write, are not output."""
    r0 = _scheduler(200, 0, [AGAIN, EMPTY_BROADCAST, ON_IDLE], wchar_per_s=60e3, wcalls_per_s=1e3)
    r1 = _scheduler(201, 1, [EMPTY_BROADCAST, ON_IDLE, BETWEEN], wchar_per_s=50e3, wcalls_per_s=1e3)
    v = classify(build([_front(), r0, r1]))
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary


def test_tp2_rank_seen_only_in_the_empty_broadcast_reads_waiting_for_work() -> None:
    """A rank sampled in the handout broadcast every time, writing a size header a call: it
    waits to be handed work - beside a poll loop or a front end, an idle server."""
    r0 = _scheduler(200, 0, [AGAIN, ON_IDLE, BETWEEN], wchar_per_s=60e3, wcalls_per_s=1e3)
    r1 = _scheduler(201, 1, [EMPTY_BROADCAST], cpu=30.0, wchar_per_s=50e3, wcalls_per_s=1e3)
    bundle = build([_front(), r0, r1])
    assert exchange_only({p.pid: p for p in extract(bundle)}[201])
    v = classify(bundle)
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary


def test_pipeline_ranks_moving_data_through_recv_still_progress() -> None:
    """Contrast: ranks in a receive collective every sample that move kilobytes a write
    (pipeline activations) are no handout of nothing: the collectives complete."""
    recv = (("recv", TORCH), ("stage_forward", "/job/pp.py"), ("main", "/job/pp.py"))
    ranks = [
        Proc(
            pid=300 + r,
            rank=r,
            world_size=2,
            stack=recv,
            cpu_pct=5.0,
            wchar_per_s=50e6,
            wcalls_per_s=500,
        )
        for r in range(2)
    ]
    bundle = build(ranks)
    assert not any(exchange_only(p) for p in extract(bundle))
    v = classify(bundle)
    assert (v.rule, v.state) == ("output_moves", "progressing"), v.summary


def test_busy_scheduler_computing_a_batch_is_not_a_poll_loop() -> None:
    """Contrast: the same loop with a batch computing in one sample does real work."""
    sched = _scheduler(200, 0, [FORWARD, AGAIN, FORWARD])
    bundle = build([_front(served=True), sched])
    p = {p.pid: p for p in extract(bundle)}[200]
    assert p.poll is None and computes(p)
    v = classify(bundle)
    assert (v.rule, v.state) == ("answers_requests", "progressing"), v.summary
    v = classify(build([_front(), sched]))  # no answers seen: still working
    assert (v.rule, v.state) == ("works_silently", "slow"), v.summary
    assert [s.pid for s in v.suspects] == [200]


def test_cpu_bound_single_rank_stays_slow() -> None:
    """Contrast: one long call burning a core with the same stack is slow, never idle."""
    one = Proc(
        pid=400,
        role="process",
        stack=(("validate_token", "/job/auth.py"), ("main", "/job/auth.py")),
        cpu_pct=99.0,
        state="R",
        wchan=None,
    )
    v = classify(build([one]))
    assert (v.rule, v.state) == ("works_silently", "slow"), v.summary
    assert [s.pid for s in v.suspects] == [400]


def _spinning(
    pid: int, rank: int, world_size: int, stack: AnyStack, threads: Sequence[Thr] = ()
) -> Proc:
    """A rank running its own Python loop at 100% of a core."""
    return Proc(
        pid=pid,
        rank=rank,
        world_size=world_size,
        stack=stack,
        cpu_pct=99.0,
        state="R",
        wchan=None,
        threads=list(threads),
    )


def _sleeping(pid: int, rank: int, world_size: int, stack: AnyStack) -> Proc:
    """A rank elsewhere, in a timed sleep (``time.sleep``: clock_nanosleep)."""
    return Proc(
        pid=pid,
        rank=rank,
        world_size=world_size,
        stack=stack,
        wait_timed=True,
        wchan="hrtimer_nanosleep",
        syscall="clock_nanosleep",
    )


def test_spin_on_a_collectives_completion_is_that_collectives_wait() -> None:
    """Ranks busy-polling ``fut.done()`` of an all_reduce a peer never joins burn 100% of a
    core each: not slow work - a deadlock, the rank elsewhere named."""
    spin: Stacks = [
        (("Future.done", FUTURES), ("wait_for_grads", "/job/train.py"), ("main", "/job/train.py")),
        (("wait_for_grads", "/job/train.py"), ("main", "/job/train.py")),
        (("Future.done", FUTURES), ("wait_for_grads", "/job/train.py"), ("main", "/job/train.py")),
    ]
    elsewhere = (
        ("sleep", "/job/data.py"),
        ("fetch_shard", "/job/data.py"),
        ("main", "/job/train.py"),
    )
    ranks = [_spinning(500 + r, r, 3, spin) for r in range(2)]
    bundle = build([*ranks, _sleeping(502, 2, 3, elsewhere)])
    by_pid = {p.pid: p for p in extract(bundle)}
    assert by_pid[500].main_family == "peer" and not computes(by_pid[500])
    v = classify(bundle)
    assert (v.rule, v.state) == ("peers_wait", "deadlocked"), v.summary
    assert [s.rank for s in v.suspects] == [2]


def test_pure_python_spin_without_a_completion_poll_stays_slow() -> None:
    """Contrast (torchrun_livelock): a loop with no poll marker is CPU-bound work."""
    spin = (("wait_for_prefetch", "/job/train.py"), ("main", "/job/train.py"))
    barrier = (("barrier", TORCH), ("main", "/job/train.py"))
    ranks = [
        _spinning(600, 1, 2, spin),
        Proc(pid=601, rank=0, world_size=2, stack=barrier),
    ]
    v = classify(build(ranks))
    assert (v.rule, v.state) == ("works_silently", "slow"), v.summary
    assert [s.rank for s in v.suspects] == [1]


def _spinning_ranks(in_flight: bool) -> List[Proc]:
    """Ranks 0,1 at 100% in their own loop line (``while not work.is_completed(): pass``: the
    C call is invisible to py-spy), gloo's worker thread waiting on a peer (timed) or idle."""
    loop = (("wait_for_grads", "/job/train.py"), ("main", "/job/train.py"))
    worker = Thr(1, None, name="pt_gloo_runloop", wait_timed=in_flight, futex_op=0x189)
    ranks = [_spinning(700 + r, r, 3, loop, threads=[worker]) for r in range(2)]
    elsewhere = (("write_checkpoint", "/job/train.py"), ("main", "/job/train.py"))
    return [*ranks, _sleeping(702, 2, 3, elsewhere)]


def test_spin_on_an_invisible_completion_poll_with_a_collective_in_flight_is_its_wait() -> None:
    """The same stack in every sample, a core burning, and the rank's gloo worker waiting on a
    peer the whole time: the loop polls that collective - deadlocked, rank 2 named."""
    bundle = build(_spinning_ranks(in_flight=True))
    p = {p.pid: p for p in extract(bundle)}[700]
    assert p.main_wait is not None and p.main_wait.label == POLLED_COLLECTIVE
    v = classify(bundle)
    assert (v.rule, v.state) == ("peers_wait", "deadlocked"), v.summary
    assert [s.rank for s in v.suspects] == [2]


def test_same_spin_with_no_collective_in_flight_stays_cpu_bound() -> None:
    """Contrast: no collective in flight (gloo's worker idle, untimed): a CPU-bound loop."""
    v = classify(build(_spinning_ranks(in_flight=False)))
    assert (v.rule, v.state) == ("works_silently", "slow"), v.summary
    assert [s.pid for s in v.suspects] == [700, 701]


STATS = "[frontend] 2026-12-02 10:00:0{} | tput=0.0 tok/s | active=4 | queued=11 | kv=37.5%"


def test_a_repeated_report_with_unchanged_numbers_is_a_heartbeat_whatever_its_wording() -> None:
    """Heartbeats by shape: one template, the same values (zero or not), any framework."""
    assert is_heartbeat(tuple(STATS.format(k) for k in range(3)))
    # one line, its template printed before with the same values: nothing changed
    assert is_heartbeat((STATS.format(5),), before=(STATS.format(1),))
    moved = STATS.format(5).replace("active=4", "active=5")
    assert not is_heartbeat((moved,), before=(STATS.format(1),))  # a count moved
    # "Waiting: 3 reqs" is a value to compare, not a word about waiting
    busy = "Engine: Running: 2 reqs, Waiting: 3 reqs"
    assert not is_heartbeat((busy,))
    assert is_heartbeat((busy, busy), before=(busy,))


def test_events_and_new_counts_are_progress() -> None:
    """Contrast: lines that report new steps or requests are progress, even when identical
    (an access log's line per request), and a counter that moves is progress."""
    access = 'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK'
    assert not is_heartbeat((access, access, access))
    assert not is_heartbeat(("[frontend] done=41 | queued=3", "[frontend] done=44 | queued=3"))
    assert not is_heartbeat(("epoch 1 step 200 loss 0.52",), before=("epoch 1 step 199",))


BAR = "Compiling kernels:  45%|####5     | 9/20 [00:10<00:12,  0.90it/s]"


def _starting_server() -> Proc:
    return Proc(
        pid=800,
        role="process",
        stack=FRONT,
        ports=(8000,),
        syscall="select",
        wchan="do_select",
        wait_timed=True,
    )


def test_idle_needs_readiness_a_server_parked_mid_start_up_is_still_starting() -> None:
    """A start-up phase seen (its log ends in a compile bar), a port open, every thread in a
    wait, no ready line, nothing served: slow, still starting - not "healthy, waiting"."""
    tail: Tuple[str, ...] = ("INFO loading config", BAR)
    logs = {"/tmp/engine.log": [(100, 2, tail)] * 3}
    v = classify(build([_starting_server()], logs=logs))
    assert (v.rule, v.state) == ("waits_for_outside", "slow"), v.summary


def test_the_same_server_with_a_ready_line_is_idle() -> None:
    """Contrast: the log says it is ready (after its start-up lines): idle, healthy."""
    tail: Tuple[str, ...] = ("INFO loading config", BAR, "INFO engine: ready to serve requests")
    logs = {"/tmp/engine.log": [(160, 3, tail)] * 3}
    v = classify(build([_starting_server()], logs=logs))
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary


def test_all_ranks_cycling_through_the_empty_handout_read_idle() -> None:
    """Real SGLang at TP 2, idle: both schedulers caught in the broadcast of the empty batch in
    every sample, burning CPU, a few dozen bytes a write - the loop's handout of nothing."""
    ranks = [
        _scheduler(200 + r, r, [EMPTY_BROADCAST], cpu=60.0, wchar_per_s=50e3, wcalls_per_s=1e3)
        for r in range(2)
    ]
    bundle = build([_front(), *ranks])
    v = classify(bundle)
    assert (v.rule, v.state) == ("waits_for_outside", "idle"), v.summary
    assert not v.suspects


def test_ranks_handing_out_real_batches_are_not_followers() -> None:
    """Contrast: the same broadcast moving kilobytes a write hands out work: it progresses."""
    ranks = [
        _scheduler(200 + r, r, [EMPTY_BROADCAST], cpu=60.0, wchar_per_s=5e6, wcalls_per_s=500)
        for r in range(2)
    ]
    v = classify(build([_front(), *ranks]))
    assert (v.rule, v.state) == ("output_moves", "progressing"), v.summary
