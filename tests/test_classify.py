"""Table-driven verdicts on hand-built series: the edges a naive classifier gets wrong."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple, Union

import pytest
from series import CUDA, QUEUE, SELECTORS, SOCKETSERVER, THREADING, TORCH, Proc, Thr, build

from diag.model import Bundle, Verdict
from diag.verdict.classify import classify
from diag.vocab import PreRuleId, RuleId

ALL_REDUCE = [
    ("all_reduce", TORCH),
    ("wrapper", "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"),
    ("train_step", "/job/train.py"),
    ("main", "/job/train.py"),
]
BARRIER = [("barrier", TORCH), ("refresh_cache", "/job/train.py"), ("main", "/job/train.py")]
SYNC = [("synchronize", CUDA), ("train_step", "/job/train.py"), ("main", "/job/train.py")]
DEQUANT = [
    ("dequantize_int4", "/job/load.py"),
    ("load_weights", "/job/load.py"),
    ("main", "/job/load.py"),
]
TRAIN_A = [("forward", "/job/model.py"), ("train_step", "/job/train.py")]
TRAIN_B = [("backward", "/job/model.py"), ("train_step", "/job/train.py")]


def ranks(n: int, stack: object = ALL_REDUCE, **kw: object) -> List[Proc]:
    return [Proc(pid=100 + r, rank=r, world_size=n, ppid=99, stack=stack, **kw) for r in range(n)]  # type: ignore[arg-type]


def _one(**kw: object) -> Bundle:
    """A series of a single process (a plain script, no ranks, no launcher)."""
    return build([Proc(**kw)])  # type: ignore[arg-type]


def _sleeping_rank(rank: int, world_size: int, fn: str, caller: str, **kw: object) -> Proc:
    """Rank ``rank`` asleep in ``fn`` <- ``caller`` of /job/train.py (a poll or backoff loop:
    time.sleep, so hrtimer_nanosleep in the kernel) while its peers wait for it."""
    return Proc(
        pid=100 + rank,
        rank=rank,
        world_size=world_size,
        ppid=99,
        stack=[(fn, "/job/train.py"), (caller, "/job/train.py")],
        wchan="hrtimer_nanosleep",
        syscall="clock_nanosleep",
        **kw,  # type: ignore[arg-type]
    )


def _divergent() -> Bundle:
    procs = ranks(4)
    procs[2] = Proc(pid=102, rank=2, world_size=4, ppid=99, stack=BARRIER)
    return build(
        [
            Proc(
                pid=99,
                role="launcher",
                stack=[
                    (
                        "_monitor_workers",
                        "/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py",
                    )
                ],
                wchan="hrtimer_nanosleep",
                syscall="clock_nanosleep",
                cmdline=("torchrun",),
            ),
            *procs,
        ]
    )


def _sleeper_diverges() -> Bundle:
    procs = ranks(3)
    procs[1] = _sleeping_rank(1, 3, "rebuild_cache", "main")
    return build(procs)


def _spinning_sync() -> Bundle:
    return build(ranks(4, stack=SYNC, cpu_pct=100.0, state="R", wchan="0", syscall="running"))


def _load_time() -> Bundle:
    procs = ranks(4, stack=BARRIER)
    procs[0] = Proc(
        pid=100,
        rank=0,
        world_size=4,
        ppid=99,
        stack=DEQUANT,
        cpu_pct=98.0,
        state="R",
        wchan="0",
        syscall="running",
        rss_mb_per_s=150.0,
    )
    return build(procs, n=4)


def _bursty_silent_log() -> Bundle:
    procs = ranks(2, stack=TRAIN_A, cpu_pct=90.0, state="R", wchan="0", syscall="running")
    log: List[Tuple[int, int, Tuple[str, ...]]] = [(5000, 50, ("step 40 loss 1.2",))] * 3
    return build(procs, logs={"/job/train.log": log})


def _bursty_log_grows_once() -> Bundle:
    procs = ranks(
        2, stack=[TRAIN_A, TRAIN_B, TRAIN_A], cpu_pct=90.0, state="R", wchan="0", syscall="running"
    )
    log = [
        (5000, 50, ("step 40 loss 1.2",)),
        (5000, 50, ("step 40 loss 1.2",)),
        (5200, 52, ("step 40 loss 1.2", "step 41 loss 1.1", "step 42 loss 1.0")),
    ]
    return build(procs, logs={"/job/train.log": log})


def _heartbeat_log() -> Bundle:
    log = [
        (
            1000 + 60 * i,
            10 + i,
            tuple(f"[W] still waiting for rank 3 after {30 * j} s" for j in range(i + 1)),
        )
        for i in range(3)
    ]
    return build(ranks(3), logs={"/job/train.log": log})


def _training_logs() -> Bundle:
    procs = ranks(
        2,
        stack=[TRAIN_A, ALL_REDUCE, TRAIN_B],
        cpu_pct=80.0,
        state="R",
        wchan="0",
        syscall="running",
        wchar_per_s=3000,
    )
    log = [(100 * i, i, tuple(f"step {k} loss 0.{k}" for k in range(i))) for i in (1, 5, 9)]
    return build(procs, logs={"/job/train.log": log})


def _idle_server_procs() -> List[Proc]:
    server = Proc(
        pid=200,
        role="process",
        stack=[("select", SELECTORS), ("serve_forever", SOCKETSERVER), ("main", "/srv/app.py")],
        wchan="do_select",
        syscall="select",
        ports=(8080,),
    )
    workers = [
        Proc(
            pid=201 + k,
            ppid=200,
            role="worker",
            # a worker process waits for work from another process: a multiprocessing queue
            stack=[
                ("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py"),
                ("worker_loop", "/srv/app.py"),
            ],
        )
        for k in range(3)
    ]
    return [server, *workers]


def _idle_server() -> Bundle:
    return build(_idle_server_procs())


def _lock_cycle() -> Bundle:
    main = Proc(
        pid=300,
        role="process",
        stack=[("Thread.join", THREADING), ("main", "/x/locks.py")],
        futex_addr="0x10",
        threads=[
            Thr(
                1,
                stack=[("worker_a", "/x/locks.py"), ("Thread.run", THREADING)],
                futex_addr="0xaa0",
            ),
            Thr(
                2,
                stack=[("worker_b", "/x/locks.py"), ("Thread.run", THREADING)],
                futex_addr="0xbb0",
            ),
        ],
    )
    return build([main])


def _gil_call() -> Bundle:
    return _one(
        pid=400,
        role="process",
        stack=[("catastrophic_match", "/x/regex.py"), ("main", "/x/regex.py")],
        cpu_pct=99.0,
        state="R",
        wchan="0",
        syscall="running",
    )


def _slow_read() -> Bundle:
    return _one(
        pid=500,
        role="process",
        stack=[("read_chunk", "/x/load.py"), ("main", "/x/load.py")],
        cpu_pct=3.0,
        wchan="hrtimer_nanosleep",
        syscall="clock_nanosleep",
        rchar_per_s=4e6,
    )


def _gpu_idle_power() -> Bundle:
    procs = ranks(2, stack=[("forward", "/job/model.py"), ("main", "/job/train.py")])
    return build(procs, gpu=[(100.0, 70.0, 700.0, (100, 101))])


def _gpu_full_power() -> Bundle:
    procs = ranks(2, stack=[("forward", "/job/model.py"), ("main", "/job/train.py")])
    return build(procs, gpu=[(100.0, 620.0, 700.0, (100, 101))])


def _one_sample_divergent() -> Bundle:
    procs = ranks(3)
    procs[2] = Proc(pid=102, rank=2, world_size=3, ppid=99, stack=BARRIER)
    return build(procs, n=1)


def _one_sample_busy() -> Bundle:
    return build(
        [
            Proc(
                pid=400,
                role="process",
                stack=DEQUANT,
                cpu_pct=99.0,
                state="R",
                wchan="0",
                syscall="running",
            )
        ],
        n=1,
    )


def _dead_rank() -> Bundle:
    init = [
        ("_new_process_group_helper", TORCH),
        ("init_process_group", TORCH),
        ("<module>", "/job/train.py"),
    ]
    procs = ranks(3, stack=init)
    procs[2] = Proc(pid=102, rank=None, ppid=99, status=["zombie"] * 3, exit_code=3)
    return build(procs)


def _rank_dies_midway() -> Bundle:
    procs = ranks(3)
    procs[1] = Proc(
        pid=101,
        rank=1,
        world_size=3,
        ppid=99,
        stack=ALL_REDUCE,
        status=["alive", "zombie", "zombie"],
        exit_code=1,
    )
    return build(procs)


def _busy_launcher() -> Bundle:
    launcher = Proc(
        pid=99,
        role="launcher",
        cmdline=("torchrun",),
        stack=[("_monitor_workers", "/x/api.py")],
        cpu_pct=40.0,
        state="R",
        wchan="0",
        syscall="running",
    )
    tracker = Proc(
        pid=98,
        role="helper",
        cmdline=("python", "-c", "from multiprocessing.resource_tracker import main"),
        stack=[("main", "/usr/lib/python3.11/multiprocessing/resource_tracker.py")],
        wchan="pipe_read",
        syscall="read",
    )
    procs = ranks(3)
    procs[1] = Proc(pid=101, rank=1, world_size=3, ppid=99, stack=BARRIER)
    return build([launcher, tracker, *procs])


def _mismatch_tie() -> Bundle:
    procs = ranks(2)
    procs[1] = Proc(pid=101, rank=1, world_size=2, ppid=99, stack=BARRIER)
    return build(procs)


def _polling_sleeper() -> Bundle:
    return _one(
        pid=600,
        role="process",
        stack=[("wait_for_file", "/x/poll.py")],
        wchan="hrtimer_nanosleep",
        syscall="clock_nanosleep",
        wakeups_per_s=1.0,
        cpu_pct=0.5,
    )


def _queue_cycle() -> Bundle:
    qs = [("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py"), ("ask", "/x/pipe.py")]
    parent = Proc(pid=700, role="process", stack=qs, wchan="pipe_read", syscall="read")
    child = Proc(pid=701, ppid=700, role="worker", stack=qs, wchan="pipe_read", syscall="read")
    return build([parent, child])


def _server_with_finished_child() -> Bundle:
    server = _idle_server_procs()
    done = Proc(pid=250, ppid=200, role="worker", status=["zombie"] * 3, exit_code=0)
    return build([*server, done])


def _pool_with_guessed_ranks() -> Bundle:
    server, *workers = _idle_server_procs()
    for k, w in enumerate(workers):
        w.rank, w.rank_source = k, "inferred:start-order"
    done = Proc(pid=250, ppid=200, role="worker", status=["zombie"] * 3, exit_code=1)
    return build([server, *workers, done])


def _all_exited() -> Bundle:
    return build([Proc(pid=800, status=["alive", "exited", "exited"], exit_code=2)], target_exit=2)


def _no_samples() -> Bundle:
    return build([], n=0)


def _no_processes_read() -> Bundle:
    return build([], n=3)


CheckFn = Callable[[Verdict], None]
Decider = Union[RuleId, PreRuleId]  # the rule of the table that decides, or how none did


def _no_check(v: Verdict) -> None:
    """The state is the whole expectation."""


def _event_waiters_under_srun() -> Bundle:
    """Ranks parked on an Event forever under an srun launcher that listens for its own I/O
    forwarding; rank 0 also holds the rendezvous port. Neither port is a door to the job."""
    srun = Proc(
        pid=300,
        role="process",
        cmdline=("srun", "python", "rank.py"),
        stack=[("wait", "/usr/lib/python3.11/subprocess.py")],
        python=False,
        ports=(40211, 40212),
    )
    event_wait = [("wait", THREADING), ("Event.wait", THREADING), ("main", "/job/rank.py")]
    ranks = [
        Proc(
            pid=301 + r,
            rank=r,
            world_size=2,
            rank_source="env:RANK",
            ppid=300,
            stack=event_wait,
            futex_addr=f"0x{0x1000 + r:x}",
            ports=(29500,) if r == 0 else (),
            env={"MASTER_PORT": "29500"},
        )
        for r in range(2)
    ]
    return build([srun, *ranks])


def _suspect_ranks(v: Verdict) -> List[Optional[int]]:
    return [s.rank for s in v.suspects]


CASES: List[Tuple[str, Callable[[], Bundle], str, Decider, CheckFn]] = [
    (
        "divergent collective",
        _divergent,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [2]),
    ),
    (
        "rank sleeps elsewhere",
        _sleeper_diverges,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [1]),
    ),
    (
        "spinning synchronize at 100% CPU",
        _spinning_sync,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(any(e.signal == "spin" for e in v.evidence)),
    ),
    (
        "load-time dequantization",
        _load_time,
        "slow",
        "works_silently",
        # the wording is the feature: what it computes, "wait, don't kill" and the ETA
        lambda v: _assert(
            _suspect_ranks(v) == [0]
            and "dequantize_int4" in v.summary
            and "don't kill" in v.summary
            and "1\u20133" in v.summary
        ),
    ),
    ("bursty log, silent now", _bursty_silent_log, "slow", "works_silently", lambda v: None),
    (
        "bursty log, grew once",
        _bursty_log_grows_once,
        "progressing",
        "output_moves",
        _no_check,
    ),
    (
        "heartbeat log while stuck",
        _heartbeat_log,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(any("repeats a waiting line" in e.detail for e in v.evidence)),
    ),
    ("training loop that logs", _training_logs, "progressing", "output_moves", lambda v: None),
    (
        "idle server with queue workers",
        _idle_server,
        "idle",
        "waits_for_outside",
        lambda v: _assert(not v.suspects),
    ),
    (
        "idle server with an unreaped finished child",
        _server_with_finished_child,
        "idle",
        "waits_for_outside",
        lambda v: _assert(any(e.signal == "exited" for e in v.evidence)),
    ),
    (
        "worker pool, ranks guessed, one dead",
        _pool_with_guessed_ranks,
        "idle",
        "waits_for_outside",
        lambda v: None,
    ),
    (
        "lock cycle",
        _lock_cycle,
        "deadlocked",
        "lock_cycle",
        lambda v: _assert([s.pid for s in v.suspects] == [300]),
    ),
    (
        "long GIL-holding C call",
        _gil_call,
        "slow",
        "works_silently",
        lambda v: _assert(
            [s.pid for s in v.suspects] == [400] and any(e.signal == "cpu" for e in v.evidence)
        ),
    ),
    (
        "throttled read",
        _slow_read,
        "slow",
        "works_silently",
        lambda v: _assert(
            [s.pid for s in v.suspects] == [500] and any(e.signal == "io" for e in v.evidence)
        ),
    ),
    (
        "GPU 100% util at idle power",
        _gpu_idle_power,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(any(e.section == "gpu" for e in v.evidence)),
    ),
    ("GPU 100% util at full power", _gpu_full_power, "slow", "works_silently", lambda v: None),
    (
        "one sample, divergent",
        _one_sample_divergent,
        "deadlocked",
        "peers_wait",
        # the wording is the feature: the verdict says it rests on one sample
        lambda v: _assert(v.confidence <= 0.5 and "one sample" in v.summary),
    ),
    (
        "one sample, busy",
        _one_sample_busy,
        "slow",
        "works_silently",
        lambda v: _assert(v.confidence <= 0.5),
    ),
    (
        "zombie rank, peers in init",
        _dead_rank,
        "deadlocked",
        "rank_died",
        lambda v: _assert(_suspect_ranks(v) == [2] and [s.pid for s in v.suspects] == [102]),
    ),
    (
        "rank dies mid-capture",
        _rank_dies_midway,
        "deadlocked",
        "rank_died",
        lambda v: _assert(_suspect_ranks(v) == [1]),
    ),
    (
        "busy launcher does not dominate",
        _busy_launcher,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [1]),
    ),
    (
        "two ranks in different collectives",
        _mismatch_tie,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(not v.suspects),
    ),
    (
        "polling sleeper",
        _polling_sleeper,
        "idle",
        "waits_for_outside",
        lambda v: _assert(not v.suspects),
    ),
    (
        "processes wait on each other's queues",
        _queue_cycle,
        "deadlocked",
        "chains_never_end",
        lambda v: _assert(v.confidence <= 0.6),
    ),
    (
        "target exited",
        _all_exited,
        "exited",
        "target_exited",
        lambda v: _assert(v.exit_code == 2),
    ),
    ("nothing readable", _no_processes_read, "unknown", "nothing_readable", lambda v: None),
    ("zero samples", _no_samples, "unknown", "no_samples", lambda v: _assert(v.confidence == 0.0)),
    (
        "launcher ports are no door",
        _event_waiters_under_srun,
        "deadlocked",
        "nothing_can_wake",
        lambda v: None,
    ),
]


# --- Red-team cases: situations the scenario library missed at first (samples/scenarios). ---

POOL = "/usr/lib/python3.11/multiprocessing/pool.py"
MPQUEUES = "/usr/lib/python3.11/multiprocessing/queues.py"
EVENT_LOOP = [
    ("EpollSelector.select", SELECTORS),
    ("BaseEventLoop._run_once", "/usr/lib/python3.11/asyncio/base_events.py"),
    ("BaseEventLoop.run_forever", "/usr/lib/python3.11/asyncio/base_events.py"),
    ("main", "/x/app.py"),
]


def _store_wait_with_poller() -> Bundle:
    """Ranks blocked in a C call from user code (``store.wait``: py-spy shows only the caller,
    the kernel a poll) wait on a peer; rank 0 polls for a file. Every rank holds a gloo port
    in the ephemeral range: not a service."""
    procs = [
        Proc(
            pid=100 + r,
            rank=r,
            world_size=3,
            rank_source="env:RANK",
            ppid=99,
            stack=[("main", "/job/train.py"), ("<module>", "/job/train.py")],
            wchan="poll_schedule_timeout",
            syscall="poll",
            wait_timed=True,
            ports=(40000 + r,),
        )
        for r in range(3)
    ]
    procs[0] = _sleeping_rank(
        0, 3, "wait_for_download", "main", rank_source="env:RANK", wakeups_per_s=2.0, ports=(40100,)
    )
    return build(procs)


def _stopped_rank() -> Bundle:
    procs = ranks(3)
    procs[1] = Proc(
        pid=101,
        rank=1,
        world_size=3,
        ppid=99,
        stack=[("train", "/job/train.py")],
        state="T",
        wchan="do_signal_stop",
        syscall="none",
    )
    return build(procs)


def _lost_pool_task() -> Bundle:
    parent = Proc(
        pid=900,
        role="process",
        stack=[
            ("Condition.wait", THREADING),
            ("ApplyResult.wait", POOL),
            ("ApplyResult.get", POOL),
            ("main", "/x/job.py"),
        ],
    )
    idle = [("SimpleQueue.get", MPQUEUES), ("worker", POOL), ("Process.run", POOL)]
    workers = [Proc(pid=901 + k, ppid=900, role="worker", stack=idle) for k in range(3)]
    return build([parent, *workers])


def _busy_pool() -> Bundle:
    parent = Proc(
        pid=900,
        role="process",
        stack=[("Condition.wait", THREADING), ("ApplyResult.get", POOL), ("main", "/x/job.py")],
    )
    busy = [("simulate", "/x/job.py"), ("worker", POOL)]
    workers = [
        Proc(pid=901 + k, ppid=900, role="worker", stack=busy, cpu_pct=95.0, state="R")
        for k in range(2)
    ]
    return build([parent, *workers])


def _event_loop(timed: Optional[bool]) -> Callable[[], Bundle]:
    def make() -> Bundle:
        return build(
            [
                Proc(
                    pid=950,
                    role="process",
                    stack=EVENT_LOOP,
                    wchan="do_epoll_wait",
                    syscall="epoll_wait",
                    wait_timed=timed,
                )
            ]
        )

    return make


def _client_waits_for_reply() -> Bundle:
    read = [("SocketIO.readinto", "/usr/lib/python3.11/socket.py"), ("generate", "/x/client.py")]
    return _one(
        pid=960,
        role="process",
        stack=read,
        wchan="sk_wait_data",
        syscall="recvfrom",
        wait_timed=False,
    )


def _tp_server_idle() -> Bundle:
    """Rank 0 serves HTTP on :8000 and broadcasts each request; ranks 1-3 wait for it."""
    bcast = [("broadcast", TORCH), ("next_request", "/srv/tp.py"), ("main", "/srv/tp.py")]
    procs = ranks(4, stack=bcast, rank_source="env:RANK", ports=(45000,))
    procs[0] = Proc(
        pid=100,
        rank=0,
        world_size=4,
        rank_source="env:RANK",
        ppid=99,
        stack=[("select", SELECTORS), ("serve_forever", SOCKETSERVER), ("main", "/srv/tp.py")],
        wchan="do_select",
        syscall="select",
        ports=(8000, 45001),
    )
    return build(procs)


def _many_waiters_one_lock() -> Bundle:
    waiter = [("waiter", "/x/app.py"), ("Thread.run", THREADING)]
    threads = [Thr(k + 1, stack=waiter, futex_addr="0xaa0") for k in range(5)]
    main = Proc(pid=970, role="process", stack=[("Thread.join", THREADING)], threads=threads)
    return build([main])


def _one_sample_lock() -> Bundle:
    waiter = [("waiter", "/x/app.py"), ("Thread.run", THREADING)]
    main = Proc(
        pid=980,
        role="process",
        stack=[("Thread.join", THREADING)],
        threads=[Thr(1, stack=waiter, futex_addr="0xaa0")],
    )
    return build([main], n=1)


def _forked_workers_on_inherited_lock() -> Bundle:
    """DataLoader workers forked while a thread held a lock: each blocks on its copy forever;
    the parent polls their queue with a timeout (it wakes) - a door of its own, not theirs."""
    parent = Proc(
        pid=990,
        role="process",
        stack=[("Queue.get", MPQUEUES), ("main", "/x/train.py")],
        wchan="poll_schedule_timeout",
        syscall="poll",
        wait_timed=True,
        wakeups_per_s=0.5,
    )
    get_item = [("Dataset.__getitem__", "/x/data.py"), ("fetch", "/x/data.py")]
    workers = [
        Proc(pid=991 + k, ppid=990, role="worker", stack=get_item, futex_addr="0x5570")
        for k in range(2)
    ]
    return build([parent, *workers])


def _training_sampled_in_all_reduce() -> Bundle:
    """Healthy gloo training whose loop calls all_reduce from one line: every sample lands
    there with the same stack, CPU reads as spin - but 60 MB/s leave each rank."""
    return build(ranks(3, cpu_pct=30.0, state="S", wchar_per_s=60e6, wakeups_per_s=170.0))


def _stuck_all_reduce_with_heartbeat_bytes() -> Bundle:
    return build(ranks(3, wchar_per_s=200.0))


def _spawned_ranks_one_polls() -> Bundle:
    """mp.spawn ranks (rank guessed from start order, no RANK env) with gloo's ephemeral ports;
    rank 2 polls for a file (it wakes), ranks 0,1 wait in barrier: not a server."""
    procs = ranks(3, stack=BARRIER, rank_source="inferred:start-order")
    for k, p in enumerate(procs):
        p.ports = (40000 + k,)
    procs[2] = _sleeping_rank(
        2,
        3,
        "upload_checkpoint",
        "worker",
        rank_source="inferred:start-order",
        wakeups_per_s=1.0,
        ports=(40002,),
    )
    return build(procs)


def _consumer_of_a_killed_producer() -> Bundle:
    consumer = Proc(
        pid=1000,
        role="process",
        stack=[("Queue.get", MPQUEUES), ("consume", "/x/etl.py")],
        wchan="pipe_read",
        syscall="read",
    )
    producer = Proc(pid=1001, ppid=1000, role="worker", status=["zombie"] * 3, exit_code=-9)
    return build([consumer, producer])


def _server_parent_labelled_launcher() -> Bundle:
    """The parent of look-alike workers is labelled a launcher; it serves, so its port counts."""
    server, *workers = _idle_server_procs()
    server.role = "launcher"
    for k, w in enumerate(workers):
        w.rank, w.rank_source = k, "inferred:start-order"
    return build([server, *workers])


def _daemon(heartbeat: bool) -> Callable[[], Bundle]:
    """Main waits on a stop Event (no port); with a heartbeat thread asleep between ticks it is
    a daemon, without it nothing can ever wake it."""

    def make() -> Bundle:
        threads = [Thr(1, stack=[("Queue.get", QUEUE), ("worker", "/x/agent.py")])]
        if heartbeat:
            threads.append(
                Thr(
                    2,
                    stack=[("heartbeat", "/x/agent.py"), ("Thread.run", THREADING)],
                    wchan="hrtimer_nanosleep",
                    syscall="clock_nanosleep",
                )
            )
        stack = [("Condition.wait", THREADING), ("Event.wait", THREADING), ("main", "/x/a.py")]
        return build([Proc(pid=1100, role="process", stack=stack, threads=threads)])

    return make


def _child_blocked_on_full_pipe() -> Bundle:
    parent = Proc(
        pid=1200,
        role="launcher",
        stack=[("Popen._try_wait", "/usr/lib/python3.11/subprocess.py"), ("main", "/x/e.py")],
        wchan="do_wait",
        syscall="wait4",
    )
    child = Proc(
        pid=1201,
        ppid=1200,
        role="worker",
        stack=[("<module>", "<string>")],
        wchan="anon_pipe_write",
        syscall="write",
    )
    return build([parent, child])


def _stdin_prompt(fd: int) -> Bundle:
    """input() on a pipe nobody writes: py-spy shows only the caller, the kernel a read of
    ``fd`` (0: stdin, a prompt; another fd: a pipe from a peer)."""
    return _one(
        pid=1500,
        role="process",
        stack=[("confirm_overwrite", "/x/p.py")],
        wchan="anon_pipe_read",
        syscall="read",
        syscall_fd=fd,
        wait_timed=False,
    )


def _child_opens_fifo() -> Bundle:
    """A script in subprocess.run of `cat` on a named pipe nobody writes: the child blocks in
    open() (wait_for_partner) and the parent waits for it."""
    parent = Proc(
        pid=1400,
        role="launcher",
        stack=[("Popen._try_wait", "/usr/lib/python3.11/subprocess.py"), ("main", "/x/f.py")],
        wchan="do_wait",
        syscall="wait4",
    )
    child = Proc(pid=1401, ppid=1400, role="worker", wchan="wait_for_partner", syscall="openat")
    return build([parent, child])


def _ranks_blocked_on_stdout() -> Bundle:
    """A launcher started its ranks with stdout=PIPE and waits on rank 0 instead of reading:
    every rank blocks writing a log line to its full pipe."""
    launcher = Proc(
        pid=1300,
        role="launcher",
        stack=[("Popen._try_wait", "/usr/lib/python3.11/subprocess.py"), ("launch", "/x/l.py")],
        wchan="do_wait",
        syscall="wait4",
    )
    writers = [
        Proc(
            pid=1301 + r,
            ppid=1300,
            rank=r,
            role="rank",
            stack=[("<module>", "<string>")],
            wchan="pipe_write",
            syscall="write",
        )
        for r in range(3)
    ]
    return build([launcher, *writers])


def _rank0_metrics_port_stuck_loader() -> Bundle:
    """Rank 0 exports metrics on :8000 and waits on its data queue; ranks 1-3 wait for it in
    all_reduce. A port and a queue wait do not make a training job a server."""
    procs = ranks(4, rank_source="env:RANK")
    procs[0] = Proc(
        pid=100,
        rank=0,
        world_size=4,
        rank_source="env:RANK",
        ppid=99,
        stack=[("Queue.get", MPQUEUES), ("_next_data", "/job/train.py"), ("main", "/job/t.py")],
        wchan="pipe_read",
        syscall="read",
        ports=(8000,),
    )
    return build(procs)


def _stuck_in_d_state() -> Bundle:
    return _one(
        pid=1300,
        role="process",
        stack=[("load_shard", "/x/load.py")],
        state="D",
        wchan="rpc_wait_bit_killable",
        syscall="read",
    )


CASES += [
    (
        "uninterruptible read, nothing moves",
        _stuck_in_d_state,
        "deadlocked",
        "nothing_can_wake",
        # the wording is the feature: the fallback rule says what state D means (storage, NFS)
        lambda v: _assert("state D" in v.summary and [s.pid for s in v.suspects] == [1300]),
    ),
    (
        "rank 0 with a metrics port stuck on its loader; peers in all_reduce",
        _rank0_metrics_port_stuck_loader,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [0]),
    ),
    (
        "child blocked writing to a pipe its parent never reads",
        _child_blocked_on_full_pipe,
        "deadlocked",
        "pipe_full_in_dead_chain",
        lambda v: _assert([s.pid for s in v.suspects] == [1201]),
    ),
    (
        "a prompt reads stdin: waits for input, says so",
        lambda: _stdin_prompt(0),
        "idle",
        "waits_for_outside",
        # the wording is the feature: it names stdin, so the user knows to answer the prompt
        lambda v: _assert("stdin (fd 0)" in v.summary and not v.suspects),
    ),
    (
        "a read of another pipe nobody writes",
        lambda: _stdin_prompt(5),
        "deadlocked",
        "nothing_can_wake",
        _no_check,
    ),
    (
        "non-Python child blocked opening a fifo nobody writes",
        _child_opens_fifo,
        "deadlocked",
        "nothing_can_wake",
        lambda v: _assert([s.pid for s in v.suspects] == [1401]),
    ),
    (
        "every rank blocked writing to a stdout pipe its launcher never reads",
        _ranks_blocked_on_stdout,
        "deadlocked",
        "pipe_full_in_dead_chain",
        lambda v: _assert(_suspect_ranks(v) == [0, 1, 2]),
    ),
    (
        "daemon: main on a stop Event, heartbeat asleep",
        _daemon(True),
        "idle",
        "waits_for_outside",
        lambda v: None,
    ),
    (
        "main on an Event nothing will set",
        _daemon(False),
        "deadlocked",
        "nothing_can_wake",
        lambda v: None,
    ),
    (
        "server that parents its workers keeps its port",
        _server_parent_labelled_launcher,
        "idle",
        "waits_for_outside",
        lambda v: _assert(v.confidence >= 0.8 and not v.suspects),
    ),
    (
        "queue consumer of a SIGKILLed producer",
        _consumer_of_a_killed_producer,
        "deadlocked",
        "rank_died",
        lambda v: _assert([s.pid for s in v.suspects] == [1001]),
    ),
    (
        "spawned ranks: gloo ports are no door, the poller is the suspect",
        _spawned_ranks_one_polls,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [2]),
    ),
    (
        "training loop always sampled in all_reduce, data flowing",
        _training_sampled_in_all_reduce,
        "progressing",
        "output_moves",
        _no_check,
    ),
    (
        "stuck all_reduce with a few heartbeat bytes",
        _stuck_all_reduce_with_heartbeat_bytes,
        "deadlocked",
        "peers_wait",
        lambda v: None,
    ),
    (
        "forked workers block on an inherited lock while the parent polls",
        _forked_workers_on_inherited_lock,
        "deadlocked",
        "lock_without_door",
        lambda v: _assert(sorted(s.pid for s in v.suspects) == [991, 992]),
    ),
    (
        "rank C-call waits on a peer; the polling rank is the suspect",
        _store_wait_with_poller,
        "deadlocked",
        "peers_wait",
        lambda v: _assert(_suspect_ranks(v) == [0]),
    ),
    (
        "stopped rank",
        _stopped_rank,
        "deadlocked",
        "rank_stopped",
        # the wording is the feature: the command that resumes the stopped rank
        lambda v: _assert(_suspect_ranks(v) == [1] and "kill -CONT 101" in v.summary),
    ),
    (
        "pool parent waits for a lost task",
        _lost_pool_task,
        "deadlocked",
        "results_never_come",
        lambda v: _assert([s.pid for s in v.suspects] == [900]),
    ),
    ("pool workers compute", _busy_pool, "slow", "works_silently", lambda v: None),
    (
        "event loop with no timer, no port",
        _event_loop(False),
        "deadlocked",
        "nothing_can_wake",
        lambda v: None,
    ),
    (
        "event loop with a timer pending",
        _event_loop(True),
        "idle",
        "waits_for_outside",
        lambda v: None,
    ),
    (
        "event loop, timeout unknown (old bundle)",
        _event_loop(None),
        "idle",
        "waits_for_outside",
        lambda v: None,
    ),
    (
        "client waits for a reply",
        _client_waits_for_reply,
        "deadlocked",
        "nothing_can_wake",
        lambda v: None,
    ),
    (
        "TP server: rank 0 serves, ranks wait in broadcast",
        _tp_server_idle,
        "idle",
        "server_feeds_ranks",
        # the wording is the feature: the door named is the served port, not a TP port
        lambda v: _assert(":8000" in v.summary and ":45001" not in v.summary and not v.suspects),
    ),
    (
        "five waiters on one lock read as one line",
        _many_waiters_one_lock,
        "deadlocked",
        "lock_without_door",
        # the wording is the feature: five waiters read as one line
        lambda v: _assert(
            [s.pid for s in v.suspects] == [970]
            and "5 threads in `waiter` on 0xaa0" in v.summary
            and v.summary.count("`waiter`") == 1
            and "one lock nobody releases" in v.summary
        ),
    ),
    (
        "one snapshot of a lock wait",
        _one_sample_lock,
        "unknown",
        "lock_without_door",
        lambda v: None,
    ),
]


def _assert(ok: bool) -> None:
    assert ok


@pytest.mark.parametrize("name,make,state,rule,check", CASES, ids=[c[0] for c in CASES])
def test_verdict(
    name: str, make: Callable[[], Bundle], state: str, rule: Decider, check: CheckFn
) -> None:
    verdict = classify(make())
    assert (verdict.rule, verdict.state) == (rule, state), verdict.summary
    assert 0.0 <= verdict.confidence <= 1.0
    assert verdict.summary.startswith(state)  # the line leads with the state users act on
    check(verdict)


def test_one_tick_over_a_short_interval_is_not_a_busy_thread() -> None:
    """CPU ticks are charged whole: a rank charged one tick over 60 ms (1/6 of a core on
    paper) may have run a fraction of a millisecond; its peer is gone, so the job is stuck.
    The same rank charged 120 ticks per 2 s interval is busy (its peer finished: exit 0 - a
    peer that crashed would outrank the work, see test_verdict_causes)."""

    def job(cpu_pct: float, interval_s: float) -> Bundle:
        return build(
            [
                Proc(pid=99, role="launcher", python=False),
                Proc(
                    pid=100,
                    rank=0,
                    world_size=2,
                    ppid=99,
                    python=False,
                    cpu_pct=cpu_pct,
                    wchan="hrtimer_nanosleep",
                    syscall="clock_nanosleep",
                ),
                Proc(
                    pid=101,
                    rank=1,
                    world_size=2,
                    ppid=99,
                    python=False,
                    status=["alive", "zombie"],
                    exit_code=0,
                ),
            ],
            n=2,
            interval_s=interval_s,
        )

    assert classify(job(17.0, 0.06)).state == "deadlocked"  # 1 tick
    assert classify(job(60.0, 2.0)).state == "slow"  # 120 ticks


HOSTILE = "f" * 4096  # a 4 KiB function name the target chose


def test_a_hostile_frame_name_is_cut_in_the_verdict_line() -> None:
    """Names are cut at 80 characters with "…" in the sentence; the decision is taken on the
    full names, so two 4 KiB names that share their first 80 characters still differ."""
    caller = [("barrier", TORCH), (HOSTILE, "/job/train.py"), ("main", "/job/train.py")]
    other = [("barrier", TORCH), (HOSTILE[:-1] + "g", "/job/train.py"), ("main", "/job/train.py")]
    procs = ranks(4, stack=caller)
    procs[2] = Proc(pid=102, rank=2, world_size=4, ppid=99, stack=other)
    v = classify(build(procs))
    assert (v.rule, v.state, _suspect_ranks(v)) == ("peers_wait", "deadlocked", [2]), v.summary
    assert len(v.summary) < 600, len(v.summary)
    assert f"`{'f' * 79}…`" in v.summary
    assert all(len(s.reason) < 300 for s in v.suspects)


def test_a_hostile_hot_frame_name_is_cut() -> None:
    hot = [(HOSTILE, "/job/load.py"), ("main", "/job/load.py")]
    v = _one(
        pid=400,
        role="process",
        stack=hot,
        cpu_pct=99.0,
        state="R",
        wchan="0",
        syscall="running",
    )
    verdict = classify(v)
    assert len(verdict.summary) < 400 and "…" in verdict.summary, verdict.summary
    assert all(len(e.detail) < 400 for e in verdict.evidence)


def test_short_label() -> None:
    from diag.verdict.wording import short_label

    assert short_label("all_reduce") == "all_reduce"
    assert short_label("x" * 80) == "x" * 80
    assert short_label("x" * 81) == "x" * 79 + "…"
    assert len(short_label("x" * 4096)) == 80
