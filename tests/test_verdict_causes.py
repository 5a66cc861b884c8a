"""The verdict reasons from who can end each wait (#14/#16): table-driven, no processes.

Each case is the bundle shape a real program gave (vLLM, uvicorn, inductor's compile, a
ThreadPoolExecutor) reduced to what decides it, so the rule is pinned to its cause rather
than to one scenario's picture.
"""

from __future__ import annotations

import dataclasses

from series import SELECTORS, THREADING, TORCH, Proc, Thr, build

from diag.model import ServedConn
from diag.verdict.classify import classify, graph_state
from diag.verdict.progress import is_error_line, is_heartbeat, is_idle_stats

BARRIER = (("barrier", TORCH), ("main", "/job/train.py"))
EXECUTOR = "/usr/lib/python3.11/concurrent/futures/thread.py"
EVENT_LOOP = (("select", SELECTORS), ("_run_once", "/usr/lib/python3.11/asyncio/base_events.py"))
VLLM_STATS = (
    "INFO 12-01 15:30:01 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%"
)


def _executor_threads(n: int) -> list:  # type: ignore[type-arg]
    return [
        Thr(k + 1, stack=(("_worker", EXECUTOR), ("run", THREADING)), futex_addr=f"0x{k}0")
        for k in range(n)
    ]


def test_idle_executor_threads_are_not_a_lock_cycle() -> None:
    """vLLM's API server after one request: its ThreadPoolExecutor threads each wait untimed
    on their own queue's futex. Nobody holds a lock: the server is idle, not deadlocked."""
    server = Proc(
        100,
        role="process",
        stack=EVENT_LOOP,
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        ports=(8000,),
        threads=_executor_threads(3),
    )
    verdict = classify(build([server]))
    assert (verdict.rule, verdict.state) == ("waits_for_outside", "idle"), verdict.summary
    assert "lock_cycle" not in {m.rule for m in verdict.also_matched}


def test_zero_counter_stats_line_is_not_progress() -> None:
    busy = VLLM_STATS.replace("Running: 0", "Running: 3").replace("prompt throughput: 0.0", "9.1")
    assert is_idle_stats(VLLM_STATS) and is_heartbeat((VLLM_STATS,))
    assert not is_heartbeat((busy,))  # a stats line with work in it is progress
    assert not is_heartbeat(('INFO: 127.0.0.1:5000 - "GET / HTTP/1.1" 200 OK',) * 2)
    assert is_error_line("RuntimeError: Worker TP1 died unexpectedly")
    assert is_error_line('  File "/x/worker.py", line 3, in run')
    assert not is_error_line("step 10 loss 0.31 error_rate 0.02")


def test_a_stopped_engine_outranks_the_front_ends_stats_line() -> None:
    """EngineCore stopped with SIGSTOP: the API server keeps logging its stats (and answers
    /health), but nothing it forwards will be served."""
    api = Proc(100, role="process", stack=EVENT_LOOP, syscall="epoll_wait", ports=(8000,))
    engine = Proc(101, ppid=100, role="worker", state="T", cmdline=("VLLM::EngineCore",))
    log = {"/tmp/vllm.log": [(100, 1, ("a",)), (300, 2, ("a", VLLM_STATS)), (500, 3, ("b",))]}
    verdict = classify(build([api, engine], logs=log))
    assert (verdict.rule, verdict.state) == ("rank_stopped", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects][:1] == [101]
    assert "kill -CONT 101" in verdict.summary  # the wording is the feature: how to resume it


def test_a_crashed_rank_outranks_its_peers_error_lines() -> None:
    peers = [
        Proc(100 + r, rank=r, world_size=3, rank_source="env:RANK", stack=BARRIER) for r in (0, 1)
    ]
    dead = Proc(102, rank=2, world_size=3, rank_source="env:RANK", status=["alive", "zombie"])
    dead.exit_code = -9
    lines = ("ERROR rank 2 died unexpectedly", "Traceback (most recent call last):")
    log = {"/tmp/job.log": [(100, 1, ("start",)), (900, 3, ("start", *lines))]}
    verdict = classify(build([*peers, dead], n=2, logs=log))
    assert (verdict.rule, verdict.state) == ("rank_died", "deadlocked"), verdict.summary
    assert verdict.suspects[0].pid == 102


def test_a_log_that_reports_a_death_names_it() -> None:
    """A TP worker killed and reaped before the first sample: only its peers' ERROR lines
    are left, and nothing moves."""
    # the API process waits on its engine (another process): a multiprocessing queue
    mp_queue = "/usr/lib/python3.11/multiprocessing/queues.py"
    api = Proc(100, role="process", stack=(("get", mp_queue), ("main", "/job/serve.py")))
    line = "ERROR 12-01 [multiproc_executor.py:120] Worker proc VllmWorker-1 died unexpectedly"
    log = {
        "/tmp/vllm.log": [
            (100, 1, ("start",)),
            (400, 4, ("start", line)),
            (400, 4, ("start", line)),
        ]
    }
    verdict = classify(build([api], logs=log))
    assert (verdict.rule, verdict.state) == ("log_reports_death", "deadlocked"), verdict.summary
    assert [(s.pid, s.rank) for s in verdict.suspects] == [(0, 1)]  # gone before diag looked
    assert "died unexpectedly" in verdict.summary  # the wording is the feature: the log's line


def test_a_rank_waiting_on_compilers_is_slow_and_its_helpers_are_not_ranks() -> None:
    """Inductor's start-up compile: the rank waits in Popen.wait for g++ children that live a
    second each (reaped between samples), a helper that inherited RANK exits 0."""
    rank = Proc(
        100,
        rank=0,
        world_size=1,
        rank_source="env:RANK",
        stack=(("wait", "/usr/lib/python3.11/subprocess.py"), ("compile", "/job/c.py")),
        syscall="wait4",
        wchan="do_wait",
        children_pct=180.0,
    )
    cc1 = Proc(
        101,
        ppid=100,
        rank=0,
        rank_source="env:RANK",
        role="helper",
        cmdline=("cc1plus",),
        python=False,
        status=["alive", "exited", "exited"],
        exit_code=0,
    )
    verdict = classify(build([rank, cc1]))
    assert (verdict.rule, verdict.state) == ("children_work", "slow"), verdict.summary
    assert [(s.pid, s.rank) for s in verdict.suspects] == [(100, 0)]


def test_a_python_helper_computing_beside_a_rank_stuck_in_a_collective_is_no_work() -> None:
    """Rank 0's DataLoader worker prefetches (a Python child, computing) while rank 0 waits in
    a collective rank 1 never joins: its worker cannot end that wait - still deadlocked. The
    same worker under a rank that waits on its queue is the rank's work (real test)."""
    stuck = Proc(0 + 100, rank=0, world_size=2, rank_source="env:RANK", stack=BARRIER)
    elsewhere = Proc(
        200, rank=1, world_size=2, rank_source="env:RANK",
        stack=(("wait", THREADING), ("load", "/job/data.py"), ("main", "/job/train.py")),
    )  # fmt: skip
    worker = Proc(
        101, ppid=100, rank=0, rank_source="env:RANK", role="helper",
        cmdline=("pt_data_worker",), stack=(("__getitem__", "/job/data.py"),),
        cpu_pct=95.0, state="R", wchan=None, syscall=None,
    )  # fmt: skip
    verdict = classify(build([stuck, elsewhere, worker]))
    assert (verdict.rule, verdict.state) == ("peers_wait", "deadlocked"), verdict.summary
    assert "children_work" not in {m.rule for m in verdict.also_matched}
    assert [s.rank for s in verdict.suspects] == [1]


BATON = (("FileBaton.wait", "/venv/lib/python3.11/site-packages/torch/utils/file_baton.py"),
         ("_jit_compile", "/venv/lib/python3.11/site-packages/torch/utils/cpp_extension.py"),
         ("main", "/job/train.py"))  # fmt: skip


def test_ranks_polling_torchs_build_lock_with_nobody_building_are_deadlocked() -> None:
    ranks = [
        Proc(100 + r, rank=r, world_size=2, rank_source="env:RANK", stack=BATON,
             syscall="clock_nanosleep", wchan="hrtimer_nanosleep", wait_timed=True)
        for r in range(2)
    ]  # fmt: skip
    verdict = classify(build(ranks))
    assert (verdict.rule, verdict.state) == ("polls_for_stale_lock_file", "deadlocked")
    assert [s.rank for s in verdict.suspects] == [0, 1]
    # the wording is the feature: what to do (delete the file) and what would not help
    assert "delete that `lock` file" in verdict.summary and "would not help" in verdict.summary


def test_a_rank_whose_build_is_between_steps_is_no_stale_lock() -> None:
    """Rank 0 holds the lock and waits on its ninja (asleep between steps): the lock is no file
    left behind by a killed build - the stale-lock story must not be told."""
    builder = Proc(
        100, rank=0, world_size=2, rank_source="env:RANK",
        stack=(("wait", "/usr/lib/python3.11/subprocess.py"), ("_run_ninja_build", "/venv/lib/"
               "python3.11/site-packages/torch/utils/cpp_extension.py"), ("main", "/job/train.py")),
        syscall="wait4", wchan="do_wait",
    )  # fmt: skip
    ninja = Proc(102, ppid=100, rank=0, rank_source="env:RANK", role="helper",
                 cmdline=("ninja", "-v"), python=False)  # fmt: skip
    poller = Proc(101, rank=1, world_size=2, rank_source="env:RANK", stack=BATON,
                  syscall="clock_nanosleep", wchan="hrtimer_nanosleep")  # fmt: skip
    verdict = classify(build([builder, ninja, poller]))
    assert verdict.rule == "waits_for_outside", verdict.summary
    assert "polls_for_stale_lock_file" not in {m.rule for m in verdict.also_matched}


def _conn(inode: int, bytes_in: int, bytes_out: int, recv_ms: int, send_ms: int) -> ServedConn:
    return ServedConn(
        port=8000,
        remote=f"10.0.0.9:{40000 + inode}",
        inode=inode,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        recv_age_ms=recv_ms,
        send_age_ms=send_ms,
    )


def _server(served: list) -> Proc:  # type: ignore[type-arg]
    return Proc(
        100,
        role="process",
        stack=EVENT_LOOP,
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        ports=(8000,),
        wakeups_per_s=5.0,
        served=served,
    )


def test_a_server_answering_over_sockets_is_progressing_without_a_log() -> None:
    """uvicorn under load: the loop sits in epoll between requests, send() leaves wchar at 0;
    only the client connections' byte counters show the work."""
    served = [(_conn(1, 10_000 * i, 90_000 * i, 5, 4),) for i in range(1, 4)]
    verdict = classify(build([_server(served)]))
    assert (verdict.rule, verdict.state) == ("answers_requests", "progressing"), verdict.summary


def test_requests_never_answered_while_clients_wait_are_not_idle() -> None:
    """A handler awaits an Event nobody sets: the loop still accepts (epoll, a port), every
    thread is still - but four requests older than the capture have had no byte of answer."""
    pending = tuple(_conn(k, 200, 0, 10_000, 10_000) for k in range(4))
    verdict = classify(build([_server([pending] * 3)]))
    assert (verdict.rule, verdict.state) == ("requests_unanswered", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [100]


def test_keep_alive_connections_that_were_answered_leave_a_server_idle() -> None:
    """Answered keep-alive connections are no waiting clients; nor is a framework's own RPC
    channel (Ray's gRPC: a long poll held open on purpose) between the job's processes."""
    answered = tuple(_conn(k, 200, 900, 30_000, 29_000) for k in range(4))
    internal = (ServedConn(port=8000, inode=9, bytes_in=50, recv_age_ms=20_000, internal=True),)
    ray = dataclasses.replace(_server([answered + internal] * 3), cmdline=("ray::IDLE",))
    verdict = classify(build([ray]))
    assert (verdict.rule, verdict.state) == ("waits_for_outside", "idle"), verdict.summary
    again = classify(build([_server([answered] * 3)]))
    assert (again.rule, again.state) == ("waits_for_outside", "idle")


def test_a_request_from_inside_the_job_left_unanswered_is_a_wait() -> None:
    """A client inside the job (a benchmark harness, an RL loop querying its own server)
    waits on a stuck handler exactly like one outside (#28): not "idle, waiting for work"."""
    internal = (ServedConn(port=8000, inode=9, bytes_in=50, recv_age_ms=20_000, internal=True),)
    verdict = classify(build([_server([internal] * 3)]))
    assert (verdict.rule, verdict.state) == ("requests_unanswered", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [100]


SHM = "/venv/lib/python3.11/site-packages/vllm/distributed/device_communicators/shm_broadcast.py"
ZMQ_POLL = (("poll", "/venv/lib/python3.11/site-packages/zmq/sugar/poll.py"),)


def _vllm_tp(worker_stack: tuple, worker_cpu: float = 30.0) -> list:  # type: ignore[type-arg]
    api = Proc(100, role="process", stack=EVENT_LOOP, syscall="epoll_wait", ports=(8000,), ppid=1)
    engine = Proc(
        101,
        ppid=100,
        role="launcher",
        cmdline=("VLLM::EngineCore",),
        stack=(*ZMQ_POLL, ("run_busy_loop", "/venv/lib/python3.11/site-packages/vllm/core.py")),
        syscall="poll",
        wchan="do_sys_poll",
    )
    workers = [
        Proc(
            102 + r,
            ppid=101,
            rank=r,
            world_size=2,
            rank_source=f"title:VLLM::Worker_TP{r}",
            cmdline=(f"VLLM::Worker_TP{r}",),
            stack=worker_stack,
            cpu_pct=worker_cpu,
            state="R",
        )
        for r in (0, 1)
    ]
    return [api, engine, *workers]


def test_idle_tp_workers_waiting_for_the_engines_broadcast_are_idle() -> None:
    """vLLM TP=2 ready: both workers poll the shared-memory queue for the EngineCore's next
    step (spinning a little), the EngineCore waits for requests, the API server listens."""
    stack = (("dequeue", SHM), ("worker_busy_loop", "/venv/lib/python3.11/site-packages/vllm/w.py"))
    verdict = classify(build(_vllm_tp(stack)))
    assert (verdict.rule, verdict.state) == ("server_feeds_ranks", "idle"), verdict.summary
    assert not verdict.suspects


def test_a_tp_rank_stopped_while_its_peer_spins_in_the_shm_all_reduce() -> None:
    procs = _vllm_tp((("all_reduce", "/venv/lib/python3.11/site-packages/vllm/cpu_comm.py"),))
    procs[3].state = "T"
    procs[3].cpu_pct = 0.0
    procs[2].cpu_pct = 100.0
    verdict = classify(build(procs))
    assert (verdict.rule, verdict.state) == ("rank_stopped", "deadlocked"), verdict.summary
    assert [(s.pid, s.rank) for s in verdict.suspects] == [(103, 1)]


def test_a_rank_blocked_on_its_own_locks_is_deadlocked_whatever_its_peers_do() -> None:
    """Rank 1's main thread joins a worker thread, and both wait untimed on private futexes
    (a lock order bug inside the rank): only a thread of that process could free them. Its
    peer still computes - until the next collective."""
    lock = (("acquire", THREADING), ("step", "/job/train.py"))
    rank1 = Proc(
        101,
        rank=1,
        world_size=2,
        rank_source="env:RANK",
        stack=(("_wait_for_tstate_lock", THREADING), ("main", "/job/train.py")),
        futex_op=0x189,
        wait_timed=False,
        threads=[Thr(1, stack=lock, futex_addr="0x10", futex_op=0x189, wait_timed=False)],
    )
    rank0 = Proc(100, rank=0, world_size=2, rank_source="env:RANK", cpu_pct=100.0, state="R")
    verdict = classify(build([rank0, rank1]))
    assert (verdict.rule, verdict.state) == ("blocked_on_itself", "deadlocked"), verdict.summary
    assert [(s.pid, s.rank) for s in verdict.suspects] == [(101, 1)]


def test_a_timed_or_shared_wait_is_a_way_out() -> None:
    """The same process with one thread on a timed wait (a heartbeat) is not self-blocked."""
    lock = (("acquire", THREADING), ("step", "/job/train.py"))
    proc = Proc(
        101,
        rank=1,
        world_size=2,
        rank_source="env:RANK",
        futex_op=0x189,
        wait_timed=False,
        threads=[Thr(1, stack=lock, futex_op=0x189, wait_timed=True)],
    )
    rank0 = Proc(100, rank=0, world_size=2, rank_source="env:RANK", cpu_pct=100.0, state="R")
    verdict = classify(build([rank0, proc]))
    assert (verdict.rule, verdict.state) == ("works_silently", "slow"), verdict.summary
    assert "blocked_on_itself" not in {m.rule for m in verdict.also_matched}


def test_a_rank_killed_while_its_peer_shuts_down_is_the_cause() -> None:
    """vLLM TP=2, worker 1 SIGKILLed: rank 0 runs (it is shutting down, threads exiting) and
    writes a little; the dead rank is still the story, not 'slow'."""
    rank0 = Proc(100, rank=0, world_size=2, rank_source="title:VLLM::Worker_TP0", ppid=99)
    rank0.cpu_pct, rank0.state, rank0.wchar_per_s = 80.0, "R", 100.0
    dead = Proc(101, rank=None, role="worker", ppid=99, status=["zombie"] * 3, exit_code=-9)
    engine = Proc(99, role="launcher", cmdline=("VLLM::EngineCore",))
    verdict = classify(build([engine, rank0, dead]))
    assert (verdict.rule, verdict.state) == ("rank_died", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [101]


def test_gloo_listeners_of_a_worker_that_is_no_rank_do_not_hide_the_http_port() -> None:
    api = Proc(100, role="process", stack=EVENT_LOOP, syscall="epoll_wait", ports=(45603,))
    worker = Proc(
        101, ppid=100, role="worker", ports=(33583, 35705, 36395, 36509, 40111), stack=EVENT_LOOP
    )
    verdict = classify(build([api, worker]))
    assert (verdict.rule, verdict.state) == ("waits_for_outside", "idle"), verdict.summary
    # the wording is the feature: the port named is the one users send requests to
    assert ":45603 listening" in verdict.summary and ":33583" not in verdict.summary


def test_a_stopped_engine_core_behind_tp_ranks_is_the_cause() -> None:
    """TP=2: the ranks wait for the EngineCore's broadcast; the EngineCore itself is stopped.
    It is no rank, yet it is why nothing will come."""
    procs = _vllm_tp(
        (("dequeue", SHM), ("worker_busy_loop", "/venv/lib/python3.11/site-packages/vllm/w.py"))
    )
    procs[1].state = "T"
    verdict = classify(build(procs))
    assert (verdict.rule, verdict.state) == ("rank_stopped", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [101]


def test_an_exited_job_names_the_exception_its_log_ends_in() -> None:
    """`vllm serve --port <taken>`: the job exits 1; the traceback's last line says why."""
    tail = (
        "INFO 12-01 non-default args: {'port': 8000}",
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/uvicorn/server.py", line 161, in startup',
        "OSError: [Errno 98] Address already in use",
        "INFO 12-01 [launcher.py:12] Shutting down",
    )
    server = Proc(100, role="process", status=["alive", "exited", "exited"], exit_code=1)
    log = {"/tmp/serve.log": [(100, 1, tail[:1]), (900, 5, tail), (900, 5, tail)]}
    bundle = build([server], logs=log, target_exit=1)
    verdict = classify(bundle)
    assert (verdict.rule, verdict.state) == ("target_exited", "exited"), verdict.summary
    # the wording is the feature: the exception the log ends in says why it exited
    assert "OSError: [Errno 98] Address already in use" in verdict.summary


MPQ = "/usr/lib/python3.11/multiprocessing/queues.py"


def test_two_ranks_waiting_on_each_others_queue_behind_a_metrics_port() -> None:
    """Ranks 0 and 1 each wait untimed on a multiprocessing queue (a shared semaphore) only the
    other fills; the
    launcher serves a metrics port. That port is on nobody's chain of waits: every chain ends
    in the cycle, so the job is deadlocked, not "idle, :9100 listening"."""
    launcher = Proc(
        10,
        role="launcher",
        cmdline=("torchrun", "train.py"),
        stack=EVENT_LOOP,
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        ports=(9100,),
        wait_timed=False,
    )
    wait_q = (("get", MPQ), ("main", "/job/train.py"))
    r0 = Proc(11, rank=0, world_size=2, ppid=10, stack=wait_q, futex_op=0, wait_timed=False)
    r1 = Proc(12, rank=1, world_size=2, ppid=11, stack=wait_q, futex_op=0, wait_timed=False)
    verdict = classify(build([launcher, r0, r1]))
    assert (verdict.rule, verdict.state) == ("chains_never_end", "deadlocked"), verdict.summary
    assert verdict.graph is not None and set(verdict.graph.reasons) == {"cycle"}
    assert {s.pid for s in verdict.suspects} >= {11, 12}, verdict.suspects
    assert all(s.chain for s in verdict.suspects if s.pid in (11, 12)), verdict.suspects


def test_a_rank_reading_its_shards_is_where_the_barrier_chain_ends() -> None:
    """Rank 0 reads weights at 0% CPU (I/O-bound) while ranks 1-2 wait in the barrier: the
    graph's chain ends at a reader - work, so "slow", with the peers' wait as the why."""
    reader = Proc(
        20,
        rank=0,
        world_size=3,
        stack=(("readinto", "/job/load.py"), ("main", "/job/train.py")),
        syscall="read",
        wchan="folio_wait_bit",
        rchar_per_s=50 * 2**20,
    )
    peers = [Proc(21 + k, rank=1 + k, world_size=3, stack=BARRIER) for k in range(2)]
    verdict = classify(build([reader, *peers]))
    assert (verdict.rule, verdict.state) == ("works_silently", "slow"), verdict.summary
    assert verdict.graph is not None and "computing" in verdict.graph.reasons
    lead = next(s for s in verdict.suspects if s.pid == 20)
    assert "→ (peer) → rank 0: reading in" in lead.chain, lead


def _event_waiter(**kw: object) -> Proc:
    return Proc(
        30,
        role="process",
        stack=(("wait", THREADING), ("main", "/job/d.py")),
        futex_op=0x80,
        wait_timed=False,
        **kw,  # type: ignore[arg-type]
    )


def _heartbeat_thread(offset: int) -> Thr:
    """A Python thread asleep on a timer: it runs again by itself."""
    return Thr(
        offset,
        stack=(("beat", "/job/d.py"), ("run", THREADING)),
        syscall="clock_nanosleep",
        wchan="hrtimer_nanosleep",
        wait_timed=True,
    )


def test_an_event_its_own_heartbeat_thread_can_set_waits_on_a_timer() -> None:
    """The main thread waits untimed on an Event; another of its threads sleeps on a timer
    and will run again, so it can set it: the chain ends at the timer (idle), not at "only its
    own threads can release it"."""
    beat = _heartbeat_thread(1)
    verdict = classify(build([_event_waiter(threads=[beat])]))
    assert (verdict.rule, verdict.state) == ("waits_for_outside", "idle"), verdict.summary
    assert graph_state(verdict.graph) == {"idle"}
    assert verdict.graph is not None
    (edge,) = [e for e in verdict.graph.edges if e.src == "/30"]
    assert edge.dst == "outside:timer" and "can release or set it" in edge.evidence


def test_threads_in_a_lock_cycle_are_not_fed_by_a_sleeping_thread() -> None:
    """Two worker threads blocked on two locks in every sample (a lock-order cycle): a third
    thread sleeping on a timer cannot release what they hold against each other."""
    waiters = [
        Thr(k + 1, stack=(("worker", "/job/d.py"), ("run", THREADING)), futex_addr=f"0x{k}0")
        for k in range(2)
    ]
    beat = _heartbeat_thread(3)
    verdict = classify(build([_event_waiter(threads=[*waiters, beat])]))
    assert (verdict.rule, verdict.state) == ("lock_cycle", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [30]
    assert graph_state(verdict.graph) == {"deadlocked"}
    assert verdict.graph is not None and verdict.graph.reasons == ("lock",)
