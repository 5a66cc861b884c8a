"""Run every scenario under `diag capture` (default settings) and print the README table.

    python samples/run_scenarios.py                 # all scenarios, Markdown table on stdout
    python samples/run_scenarios.py http_idle       # some of them
    python samples/run_scenarios.py --record DIR    # also keep each bundle as DIR/<name>.json

Each scenario is a real program in samples/scenarios/ that prints READY once it is in the state
under test; this script starts it in its own process group, runs `diag capture --pid` against
it exactly as a user would, reads the verdict from the bundle, then kills the group.
``SCENARIOS`` is also the table tests/test_scenarios.py asserts against.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
SCENARIO_DIR = HERE / "scenarios"
READY_TIMEOUT_S = 240.0


class Scenario(NamedTuple):
    name: str
    expect: str  # the verdict state diag must give; "a|b": either is right
    suspects: Optional[Tuple[str, ...]]  # "rank:N" / "root" entries; None: not checked
    torch: bool
    what: str
    # Third-party packages (import names) the scenario runs for real, e.g. ("uvicorn",):
    # tests skip cleanly where one is missing. torch is the ``torch`` flag above.
    needs: Tuple[str, ...] = ()
    # The ids of the rules of the table (diag.vocab.RuleId) that may decide it, where a real run
    # or its recording (tests/golden/rule_table.txt) showed which: () when not yet confirmed.
    rules: Tuple[str, ...] = ()

    def accepts(self, state: object) -> bool:
        return state in self.expect.split("|")


SCENARIOS: Tuple[Scenario, ...] = (
    Scenario(
        "gloo_diverge_sleep",
        "deadlocked",
        ("rank:2",),
        True,
        "4 gloo ranks; rank 2 sleeps in `rebuild_cache`, ranks 0,1,3 wait in all_reduce",
        rules=("peers_wait",),
    ),
    Scenario(
        "gloo_backoff_503",
        "slow",
        ("rank:1",),
        True,
        "3 gloo ranks; rank 1 got HTTP 503 from its shard server and backs off (exponential, "
        "then the server's Retry-After: 45 s sleep), logging each retry; ranks 0,2 in all_reduce",
        rules=("peer_backs_off",),
    ),
    Scenario(
        "gloo_retry_never_ready",
        "deadlocked",
        ("rank:1",),
        True,
        "3 gloo ranks; rank 1 retries a shard server that answers 503 to every request, every "
        "second for ever, the same retry line each time; ranks 0,2 in all_reduce",
    ),
    Scenario(
        "gloo_mismatched_collective",
        "deadlocked",
        ("rank:2",),
        True,
        "3 gloo ranks; ranks 0,1 in all_reduce, rank 2 in barrier",
        rules=("peers_wait",),
    ),
    Scenario(
        "gloo_rank_dies",
        "deadlocked",
        ("rank:2",),
        True,
        "rank 2 exits with code 3 (zombie); ranks 0,1 wait in the rendezvous",
        rules=("rank_died",),
    ),
    Scenario(
        "gloo_load_dequant",
        "slow",
        ("rank:0",),
        True,
        "rank 0 dequantizes in pure Python (RSS growing, log silent); ranks 1-3 in barrier",
        rules=("works_silently",),
    ),
    Scenario(
        "gloo_train_logs",
        "progressing",
        (),
        True,
        "2 gloo ranks train with all_reduce; rank 0 logs to train.log",
        rules=("output_moves",),
    ),
    Scenario(
        "lock_order",
        "deadlocked",
        ("root",),
        False,
        "two threads take two locks in opposite order; main joins them",
        rules=("blocked_on_itself", "lock_cycle"),
    ),
    Scenario(
        "pipe_deadlock",
        "deadlocked",
        None,
        False,
        "parent and worker each wait in Pipe.recv for the other",
        rules=("chains_never_end",),
    ),
    Scenario(
        "pool_full_health_answers",
        "slow",
        ("root",),
        False,
        "a server's 2-thread pool is full: both workers sleep in a 5-min backend call, 6 "
        "/predict requests wait in Future.result; /health answered and logged every second",
        rules=("requests_unanswered",),
    ),
    Scenario(
        "pool_server_answering",
        "progressing",
        (),
        False,
        "the same server, prober and access log with a backend that answers in 50 ms",
        rules=("output_moves",),
    ),
    Scenario(
        "thread_put_holding_lock",
        "deadlocked",
        ("root",),
        False,
        "a producer thread waits in Queue.put on a full queue holding stats_lock; the consumer "
        "blocks on stats_lock; the main thread's status loop only sleeps",
        rules=("timer_cannot_end",),
    ),
    Scenario(
        "thread_put_after_lock",
        "progressing",
        (),
        False,
        "the same threads, the producer putting after releasing the lock: the consumer logs",
        rules=("output_moves",),
    ),
    Scenario(
        "flock_holder_sleeps",
        "idle",
        ("rank:0",),
        False,
        "a worker holds a cache's lock file (flock) and sleeps an hour holding it; its "
        "sibling blocks taking it",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "flock_holder_computes",
        "slow",
        ("rank:0",),
        False,
        "the same lock file, its holder building the cache in pure Python",
        rules=("works_silently",),
    ),
    Scenario(
        "tcp_handshake_both_recv",
        "deadlocked",
        ("root",),
        False,
        "a server and its forked worker over TCP both wait to read first (a protocol "
        "mismatch); the server keeps its listening socket, but no thread accepts on it",
        rules=("chains_never_end",),
    ),
    Scenario(
        "tcp_handshake_served",
        "idle",
        (),
        False,
        "the same server and worker, the handshake done: the worker waits for its next "
        "command, the server accepts the next worker",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "http_idle",
        "idle",
        (),
        False,
        "HTTP server in select, port listening; 3 worker processes on an empty queue",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "asyncio_idle",
        "idle",
        (),
        False,
        "asyncio server in epoll, port listening, a task on an empty asyncio.Queue",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "gil_regex",
        "slow",
        ("root",),
        False,
        "one catastrophic regex match: a single C call holding the GIL at 100% CPU",
        rules=("works_silently",),
    ),
    Scenario(
        "cpu_in_wait_named_fn4",
        "slow",
        ("root",),
        False,
        "one process, no peers: a pure-Python `all_reduce()` of its own at 100% CPU, its hot "
        "loop on one line (same frame and line in every sample)",
        rules=("works_silently",),
    ),
    Scenario(
        "sleep0_scheduler",
        "idle",
        (),
        False,
        "HTTP front end thread; the main thread busy-polls an empty deque with `time.sleep(0)` "
        "(no Python frame for it: one line in every sample), no traffic",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "shm_yield_engine_idle",
        "idle",
        (),
        False,
        "HTTP front end; an engine process spins on an empty shared-memory slot with "
        "`os.sched_yield()` (running, one line, ~100% CPU mostly in the kernel), no traffic",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "slow_read",
        "slow",
        ("root",),
        False,
        "reads a file at 8 MB/s from throttled storage, CPU low, no log",
        rules=("works_silently",),
    ),
    Scenario(
        "stdout_progress",
        "progressing",
        (),
        False,
        "pure-Python batches, one progress line per batch to stdout (a pipe)",
        rules=("output_moves",),
    ),
    Scenario(
        "exits_midway",
        "exited",
        (),
        False,
        "the job ends 3 s after READY, mid-capture",
        rules=("target_exited",),
    ),
    # Red-team additions: other launchers, other ways to hang, other ways to be slow.
    Scenario(
        "torchrun_allgather",
        "deadlocked",
        ("rank:2",),
        True,
        "real torchrun, 3 ranks; rank 2 alone calls all_gather, ranks 0,1 in all_reduce",
    ),
    Scenario(
        "torchrun_stopped_rank",
        "deadlocked",
        ("rank:1",),
        True,
        "real torchrun; rank 1 is SIGSTOPped (state T) mid-training, ranks 0,2 in all_reduce",
        rules=("rank_stopped",),
    ),
    Scenario(
        "torchrun_pdb_rank",
        "deadlocked",
        ("rank:1",),
        True,
        "real torchrun; a `breakpoint()` left in: rank 1 at the pdb prompt on a silent stdin, "
        "rank 0 in all_reduce",
        rules=("peers_wait",),
    ),
    Scenario(
        "torchrun_store_wait",
        "deadlocked",
        ("rank:0",),
        True,
        "real torchrun; ranks 1,2 in TCPStore `wait` (a C call), rank 0 polls for a file",
    ),
    Scenario(
        "torchrun_livelock",
        "slow",
        ("rank:1",),
        True,
        "real torchrun; rank 1 spins in a pure-Python loop, ranks 0,2 in barrier",
    ),
    Scenario(
        "torchrun_quiet_train",
        "progressing|slow",
        None,
        True,
        "real torchrun, 3 ranks training; prints only every 30 s (silent capture)",
    ),
    Scenario(
        "torchrun_tp_server_idle",
        "idle",
        (),
        True,
        "real torchrun TP server, no traffic: rank 0 serves HTTP, ranks 1,2 in broadcast",
    ),
    Scenario(
        "mp_spawn_barrier",
        "deadlocked",
        ("rank:2",),
        True,
        "torch.multiprocessing.spawn (no RANK env); rank 2 polls for a file, ranks 0,1 in barrier",
    ),
    Scenario(
        "pool_lost_task",
        "deadlocked",
        ("root",),
        False,
        "multiprocessing.Pool worker SIGKILLed mid-task; parent in `AsyncResult.get`",
        rules=("results_never_come",),
    ),
    Scenario(
        "pool_task_opens_fifo",
        "deadlocked",
        None,  # the suspect is the pool worker blocked in open(), then the root
        False,
        "ProcessPoolExecutor task opens a named pipe no process writes; parent in `Future.result`",
        rules=("results_never_come",),
    ),
    Scenario(
        "asyncio_result_on_loop",
        "deadlocked",
        ("root",),
        False,
        "an asyncio service's start-up coroutine calls run_coroutine_threadsafe(coro, "
        "loop).result() on the loop's own thread",
        rules=("results_never_come",),
    ),
    Scenario(
        "asyncio_result_from_pool",
        "slow",
        ("root",),
        False,
        "the same coroutine blocks the loop in .result() of a thread pool's future; the "
        "pool's thread computes",
        rules=("works_silently",),
    ),
    Scenario(
        "pool_rate_limited",
        "slow",
        None,  # the suspects are the sleeping workers
        False,
        "multiprocessing.Pool maps over a rate-limited API: each task sleeps a 45 s Retry-After; "
        "parent in `AsyncResult.get`",
        rules=("results_never_come",),
    ),
    Scenario(
        "process_pool_busy",
        "slow",
        None,
        False,
        "ProcessPoolExecutor workers CPU-bound; parent in `Future.result`",
    ),
    Scenario(
        "subprocess_gzip",
        "progressing|slow",
        None,
        False,
        "parent in `subprocess.run` of `head -c 64G /dev/urandom` piped to `gzip -9`",
    ),
    Scenario(
        "asyncio_deadlock",
        "deadlocked",
        ("root",),
        False,
        "two asyncio tasks await each other's futures; epoll with no timer, no port",
        rules=("nothing_can_wake",),
    ),
    Scenario(
        "asyncio_event_heartbeat",
        "deadlocked",
        ("root",),
        False,
        "main task awaits an asyncio.Event whose setter task died; a heartbeat task logs "
        "`alive beat=N`; the loop watches only its own wake-up pipe",
        rules=("wakes_only_itself",),
    ),
    Scenario(
        "thread_event_heartbeat",
        "deadlocked",
        ("root",),
        False,
        "main thread waits on an Event whose loader thread died; a watchdog thread logs "
        "`alive tick=N`; no port, no fd, no signal handler",
        rules=("wakes_only_itself",),
    ),
    Scenario(
        "flag_file_daemon",
        "idle",
        (),
        False,
        "a one-thread daemon checks for a flag file every second, logs `alive tick=N` and "
        "sleeps; no port, no fd, no signal handler: its own timer is the poll, nothing waits",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "flag_file_daemon_thread",
        "idle",
        (),
        False,
        "the same poll loop in a thread the main thread starts and joins: the join waits for "
        "the live thread that wakes",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "asyncio_flag_daemon",
        "idle",
        (),
        False,
        "the same poll loop as one asyncio task awaiting asyncio.sleep(1): to the kernel and "
        "py-spy the picture of asyncio_event_heartbeat (reads deadlocked today)",
    ),
    Scenario(
        "asyncio_event_set_late",
        "progressing",
        (),
        False,
        "the same wait and heartbeat, but the warm-up task sets the event and steps follow",
        rules=("output_moves",),
    ),
    Scenario(
        "asyncio_event_silent_timer",
        "idle",
        (),
        False,
        "the same dead setter, but the timer task logs nothing: idle (it might poll a file or "
        "a clock), with the evidence that would tell - only its own timers can wake it",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "asyncio_heartbeat_until_signal",
        "idle",
        (),
        False,
        "the same wait and heartbeat, the event set by a SIGTERM handler: a signal is its door",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "manager_lock_orphaned",
        "deadlocked",
        None,  # the manager's server process: neither the root nor a rank
        False,
        "a Manager().Lock() whose holder was SIGKILLed; two workers block in its acquire, the "
        "manager's threads on the lock; the parent polls the workers on a timer",
        rules=("lock_behind_clients",),
    ),
    Scenario(
        "manager_lock_shared",
        "progressing",
        (),
        False,
        "the same Manager().Lock() taken and released in turn by three workers logging records",
        rules=("output_moves",),
    ),
    Scenario(
        "manager_lock_holder_polls",
        "idle",
        ("rank:0",),  # the publisher holding the lock, polling
        False,
        "the same Manager().Lock() held by a live worker that checks for a marker file every "
        "second; a second worker blocks in its acquire, the parent joins both",
        rules=("lock_behind_clients",),
    ),
    Scenario(
        "pool_worker_holds_lock",
        "deadlocked",
        ("root",),
        False,
        "a ThreadPoolExecutor worker holds a lock while it waits for an Event whose setter died; "
        "the main thread blocks on the lock: the pool's worker is named as the holder",
        rules=("blocked_on_itself",),
    ),
    Scenario(
        "pool_worker_releases_lock",
        "progressing",
        (),
        False,
        "the same pool worker and lock, the Event set after a second: the lookups go on, logged",
        rules=("output_moves",),
    ),
    Scenario(
        "abandoned_lock",
        "deadlocked",
        ("root",),
        False,
        "a thread died holding a lock; the next one blocks, main joins it; idle pool threads",
        rules=("blocked_on_itself",),
    ),
    Scenario(
        "build_extension",
        "slow|progressing",  # a compiler seen writing its .s across samples is output too
        ("root",),
        False,
        "a start-up building a C extension: one short-lived `gcc` after another, parent in "
        "`subprocess.run`, no log",
    ),
    Scenario(
        "event_never_set",
        "deadlocked",
        ("root",),
        False,
        "main waits on an Event only the consumer sets; the consumer on a Queue whose "
        "producer died",
        rules=("blocked_on_itself",),
    ),
    Scenario(
        "zlib_thread",
        "slow",
        ("root",),
        False,
        "a thread in zlib.compress (GIL released) at 100% CPU; main in `Future.result`",
    ),
    Scenario(
        "dataloader_fork_lock",
        "deadlocked",
        None,
        True,
        "DataLoader workers forked while a thread held a lock: blocked forever; parent polls",
    ),
    Scenario(
        "memory_loader",
        "slow",
        ("root",),
        False,
        "fills an in-memory cache: RSS +~100 MB/s, low CPU, silent",
    ),
    Scenario(
        "checkpoint_writer",
        "progressing|slow",
        None,
        False,
        "writes a checkpoint shard with fsync, throttled: low CPU, bytes written rising",
    ),
    Scenario(
        "producer_killed",
        "deadlocked",
        None,
        False,
        "consumer in `Queue.get`; its producer process was SIGKILLed (zombie)",
        rules=("rank_died",),
    ),
    Scenario(
        "loader_stall_clock",
        "deadlocked",
        None,
        False,
        "consumer polls Queue.get(timeout=1) and logs 'no batch for N s' every 5 s; its "
        "producer process was SIGKILLed (zombie)",
        rules=("rank_died",),
    ),
    Scenario(
        "loader_steady_batches",
        "progressing",
        (),
        False,
        "the same consumer, its producer alive: 'got a batch after 2.0 s' for each batch",
        rules=("output_moves",),
    ),
    Scenario(
        "launcher_lost_rank",
        "deadlocked",
        ("rank:1",),
        False,
        "a launcher reaped SIGKILLed rank 1 and logged torchrun's `failed (exitcode: -9) "
        "local_rank: 1`; rank 0 busy-polls for it",
    ),
    Scenario(
        "store_host_crashed",
        "deadlocked",
        ("rank:0",),
        True,
        "a launcher tees 3 gloo ranks into one log as `[rankN]:`; rank 0, the store's host "
        "(loopback MASTER_ADDR), exits 1 with a traceback before init and is reaped; ranks 1-2 "
        "retry connecting to its store",
        rules=("store_host_died",),
    ),
    Scenario(
        "store_host_late",
        "progressing",
        None,  # rank 0 may be named the straggler it was
        True,
        "the same launcher; rank 0 is slow to start and reaches init during the capture: the "
        "store comes up, the ranks meet and train",
    ),
    Scenario(
        "threaded_server_short_requests",
        "progressing",
        (),
        False,
        "a ThreadingHTTPServer (a thread and a connection per request, no access log) answers a "
        "client process of the job every 50 ms, each answer a few ms of hashing",
    ),
    Scenario(
        "threaded_server_no_client",
        "idle",
        (),
        False,
        "the same thread-per-request server, no client",
    ),
    Scenario(
        "child_pipe_polled",
        "deadlocked",
        ("root",),
        False,
        "a driver runs an exporter child with stdout=PIPE and polls `proc.poll()` with 0.25 s "
        "sleeps, reading only at exit; the exporter blocks writing to the full pipe",
    ),
    Scenario(
        "child_pipe_drained",
        "progressing",
        None,
        False,
        "the same driver reads the exporter's output line by line as it comes",
    ),
    Scenario(
        "lock_held_polling_uploads",
        "deadlocked",
        ("root",),
        False,
        "a coordinator holds `state_lock` while it polls its upload threads' `is_alive()` with "
        "0.4 s sleeps; the 4 upload threads block on that lock to record their results",
    ),
    Scenario(
        "lock_released_polling_uploads",
        "progressing",
        None,
        False,
        "the same coordinator releases the lock before it polls: rounds finish",
    ),
    Scenario(
        "spin_on_dead_loader",
        "deadlocked",
        ("root",),
        False,
        "the main thread spins on `while not loader.ready: pass`; the loader thread died at "
        "start-up ('Exception in thread prefetch' in the log)",
    ),
    Scenario(
        "spin_until_loaded",
        "progressing|slow",
        None,
        False,
        "the same spin on a loader that is slow but alive: it ends during the capture",
    ),
    Scenario(
        "subscriber_quiet_feed",
        "idle",
        None,
        False,
        "a job subscribes to a TCP feed outside it, gets its snapshot, then waits in recv for "
        "updates that a quiet (alive) feed does not send",
    ),
    Scenario(
        "subscriber_request_unanswered",
        "deadlocked",
        None,
        False,
        "the same client sends a request the feed reads and never answers",
        rules=("reply_owed",),
    ),
    Scenario(
        "subscriber_request_computing",
        "slow",
        None,
        False,
        "the same request; the service outside the job burns a core computing the answer",
        rules=("reply_owed",),
    ),
    Scenario(
        "subscriber_busy_feed",
        "progressing",
        None,
        False,
        "a job subscribes to a TCP feed outside it streaming a JSON tick every 5 ms and parses "
        "each into a running average in memory: no log, no file, recv between ticks",
        rules=("consumes_feed",),
    ),
    Scenario(
        "subscriber_busy_feed_csv",
        "progressing",
        None,
        False,
        "the same consumer appends each tick's average to a CSV file",
        rules=("output_moves",),
    ),
    Scenario(
        "dataloader_fetch_hung",
        "deadlocked",
        None,
        True,
        "a DataLoader worker's fetch from a store outside the job that read the request and "
        "never answers; captured 2 min after the request, no byte of answer since",
        rules=("children_work",),
    ),
    Scenario(
        "download_trickles",
        "slow",
        None,
        False,
        "a job waits for its downloader child, which a store outside the job feeds at 4 KiB/s",
        rules=("works_silently",),
    ),
    Scenario(
        "gloo_link_cut",
        "deadlocked",
        ("rank:0",),
        True,
        "2 gloo ranks, rank 1 in its own network namespace over a veth pair; the link goes "
        "down mid-training: both wait in all_reduce, rank 0's chunk unacknowledged",
        rules=("peer_unreachable",),
    ),
    Scenario(
        "gloo_link_slow_peer",
        "slow",
        None,
        True,
        "the same two ranks over the same link, which stays up; rank 1 sleeps 60 s in its own "
        "code while rank 0 waits in all_reduce",
        rules=("peer_backs_off",),
    ),
    Scenario(
        "tcp_peer_unreachable",
        "deadlocked",
        ("root",),
        False,
        "a job sends a request to a service whose host went dark (a socket filter drops every "
        "packet: nothing is acknowledged) and blocks in recv for the answer",
        rules=("peer_unreachable",),
    ),
    Scenario(
        "tcp_peer_stopped",
        "deadlocked",
        None,
        False,
        "the same job's service is SIGSTOPped instead: its kernel acknowledges the request, "
        "nothing in flight - a stopped process, not a dead link",
        rules=("waits_on_stopped_outsider",),
    ),
    Scenario(
        "long_poll_waiting",
        "idle",
        None,
        False,
        "a ThreadingHTTPServer answers GET /events as a 30 s long poll; 3 watcher processes of "
        "the job each hold one open; no event comes during the capture",
    ),
    Scenario(
        "long_poll_answering",
        "progressing",
        None,
        False,
        "the same long poll with an event every 0.3 s: each answered and re-sent",
    ),
    Scenario(
        "daemon_heartbeat",
        "idle",
        (),
        False,
        "agent daemon, no port: main on a stop Event, heartbeat thread asleep, idle worker",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "subprocess_pipe_full",
        "deadlocked",
        None,
        False,
        "parent in `Popen.wait()`; the child blocks writing to a full stdout pipe nobody reads",
        rules=("pipe_full_in_dead_chain",),
    ),
    Scenario(
        "log_shipper_stalled",
        "deadlocked",
        ("root",),
        False,
        "the job writes records to a FIFO whose reader, a log shipper outside the job, sleeps",
        rules=("pipe_full",),
    ),
    Scenario(
        "http_request_cycle",
        "deadlocked",
        ("root",),
        False,
        "two single-threaded HTTP services of one job call each other (api -> tokenizer -> "
        "api /config) while a client of the job waits on /generate",
        rules=("requests_unanswered",),
    ),
    Scenario(
        "mp_queue_join_before_get",
        "deadlocked",
        None,
        False,
        "parent joins a child before reading the 4 MB it put on a multiprocessing.Queue; the "
        "child's queue feeder blocks on the full pipe",
        rules=("chains_never_end",),
    ),
    Scenario(
        "threadpool_nested_submit",
        "deadlocked",
        ("root",),
        False,
        "document tasks submit their chunks to the same 2-worker pool and wait on them; a "
        "status thread logs frozen counts with a new `elapsed=`",
        rules=("results_never_come",),
    ),
    Scenario(
        "heartbeat_pingpong",
        "deadlocked",
        None,  # the suspect is the worker child, not the supervisor (root)
        False,
        "worker's main and loader threads in a lock-order cycle; its heartbeat thread pings "
        "the supervisor, which logs `worker N alive (ping K)`",
        rules=("lock_cycle",),
    ),
    Scenario(
        "tqdm_advancing",
        "progressing",
        (),
        False,
        "a 100,000-item tqdm bar in the log at 0% while its n advances ~4 items/s, CPU ~0",
        ("tqdm",),
        rules=("output_moves",),
    ),
    Scenario(
        "stopped_sidecar",
        "progressing",
        (),
        False,
        "a trainer computes and logs steps; a metrics-uploader child it feeds through an "
        "unbounded queue is SIGSTOPped - nobody waits on it",
        rules=("output_moves",),
    ),
    Scenario(
        "lock_held_in_backoff",
        "idle|slow",
        None,
        False,
        "an uploader thread sleeps 20 s inside `with client_lock:` (a 429 backoff); three "
        "loaders and the main loop wait on the lock, untimed",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "thread_died_poll",
        "deadlocked",
        ("root",),
        False,
        "the prefetch thread died with an exception; the training loop, the only thread left, "
        "polls its queue with `get(timeout=1)` for ever",
        rules=("blocked_on_itself",),
    ),
    Scenario(
        "client_no_reply",
        "deadlocked",
        None,  # the server outside the job that owes the reply (reply_owed names it)
        False,
        "client in a socket read (no timeout) on a server outside the job that never replies",
        rules=("nothing_can_wake", "reply_owed"),
    ),
    # Second red-team round: non-Python children, named server processes, stdin, backoff.
    Scenario(
        "subprocess_fifo_child",
        "deadlocked",
        None,  # the suspect is the `cat` child, not the root
        False,
        "parent in `subprocess.run` of `cat` on a fifo nobody writes (child blocked in open)",
    ),
    Scenario(
        "stdin_prompt",
        "idle",
        (),
        False,
        "`input()` on a stdin pipe whose writer stays open and silent: no port, no timer",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "http_wedged_pileup",
        "deadlocked",
        ("root",),
        False,
        "threaded HTTP server: each handler holds a lock across a wait for an event its warm-up "
        "thread (dead at start-up, one logged traceback) was to set; request threads pile up on "
        "the lock while an in-job client logs timeouts",
        rules=("requests_pile_up",),
    ),
    Scenario(
        "pool_server_wedged",
        "deadlocked",
        ("root",),
        False,
        "HTTP server on a fixed pool of 4 worker threads, all wedged: one holds a lock across a "
        "wait for an event its dead refresher was to set, 3 queue on it (a full pool: no growth)",
        rules=("requests_pile_up",),
    ),
    Scenario(
        "http_some_fail",
        "progressing",
        (),
        False,
        "threaded HTTP server: every third request is slower than the in-job client's 1 s "
        "timeout and logged failed, the others complete: progressing, with the failure rate",
        rules=("output_moves",),
    ),
    Scenario(
        "batch_timeouts_lock",
        "deadlocked",
        ("root",),
        False,
        "main waits on a lock a loader holds across a wait for an event its dead downloader was "
        'to set; a watchdog logs "batch N timed out; retrying" every second: failures only',
        rules=("output_reports_failure",),
    ),
    Scenario(
        "gloo_ckpt_retry_full_disk",
        "deadlocked",
        ("rank:0",),
        True,
        "3 gloo ranks; rank 0 retries torch.save of a 4 MiB checkpoint to a 1 MiB tmpfs every "
        "3 s ('checkpoint save failed: ... unexpected pos ...; retrying'), ranks 1,2 in barrier",
        rules=("peers_wait",),
    ),
    Scenario(
        "gloo_ckpt_saved",
        "progressing",
        (),
        True,
        "the same ranks and save on a 64 MiB tmpfs: the save succeeds, the ranks train",
        rules=("output_moves",),
    ),
    Scenario(
        "gloo_store_port_wrong",
        "idle",
        (),
        True,
        "ranks 2,3 of 4 given a MASTER_PORT where an HTTP service outside the job answers: "
        "the store client's ping fails and is retried, logged with c10's native backtrace",
        rules=("waits_for_nodes_to_join",),
    ),
    Scenario(
        "ckpt_save_disk_full",
        "slow",
        (),
        False,
        "a trainer saves a 4 MiB checkpoint to a 1 MiB tmpfs every 3 s: 1 MiB written, then "
        "'No space left on device', logged and retried for ever",
        rules=("output_reports_failure",),
    ),
    Scenario(
        "ckpt_save_disk_room",
        "progressing",
        (),
        False,
        "the same trainer on a 64 MiB tmpfs: every save succeeds and is logged",
        rules=("output_moves",),
    ),
    Scenario(
        "retry_until_answers",
        "slow",
        (),
        False,
        "retries a local service outside the job that answers 503 for its first minute, logging "
        "each failure: its only output is failure, nothing is blocked",
        rules=("output_reports_failure",),
    ),
    Scenario(
        "retry_backoff",
        "idle",
        (),
        False,
        "connects to a refusing port, `time.sleep(5)` between attempts (waits on the outside)",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "pool_as_completed",
        "progressing|slow",
        None,
        False,
        "ProcessPoolExecutor of pure-Python units; parent prints each result from `as_completed`",
    ),
    Scenario(
        "sglang_idle",
        "idle",
        (),
        False,
        "SGLang-like: HTTP front-end on a port, 2 `sglang::sched_N` processes in `Pipe.recv`",
    ),
    Scenario(
        "sglang_sched_spin",
        "slow",
        ("rank:1",),
        False,
        "SGLang-like; scheduler 1 spins in pure Python, front-end waits on its reply",
    ),
    Scenario(
        "ranks_stdout_full",
        "deadlocked",
        ("rank:0", "rank:1", "rank:2"),
        False,
        "launcher starts 3 ranks with `stdout=PIPE`, never reads: all ranks blocked in write",
    ),
    # Real serving stacks (#16): uvicorn + FastAPI, gunicorn, Ray - the packages themselves, not
    # stdlib imitations. Their clients run outside the job's process tree, as real ones do.
    Scenario(
        "uvicorn_idle",
        "idle",
        (),
        False,
        "FastAPI under real uvicorn, access log off, no traffic: loop in epoll, port listening",
        ("uvicorn", "fastapi"),
    ),
    Scenario(
        "uvicorn_busy_no_log",
        "progressing|slow",
        (),
        False,
        "uvicorn serves 4 outside clients nonstop (20 ms awaited backend call each), no log",
        ("uvicorn", "fastapi"),
    ),
    Scenario(
        "uvicorn_handler_hangs",
        "deadlocked",
        ("root",),
        False,
        "uvicorn endpoint awaits an asyncio.Event never set; 4 outside clients wait on it",
        ("uvicorn", "fastapi"),
    ),
    Scenario(
        "uvicorn_async_blocking_sleep",
        "slow",
        ("root",),
        False,
        "an async uvicorn endpoint calls the blocking time.sleep: the loop's thread sleeps in the "
        "handler and every client waits until it returns (move it off the loop, don't restart)",
        ("uvicorn", "fastapi"),
    ),
    Scenario(
        "rank_waits_on_polling_helper",
        "idle",
        None,  # the suspect is rank 0's helper child, neither root nor a rank
        False,
        "ranks 1-2 wait in a multiprocessing Barrier for rank 0, which waits for a helper script "
        "polling on a timer: the chain ends at the helper, not 'nothing can wake it'",
    ),
    Scenario(
        "uvicorn_calls_itself",
        "deadlocked",
        ("root",),
        False,
        "uvicorn `async def` endpoint calls its own port with urllib: the loop waits for itself",
        ("uvicorn", "fastapi"),
        rules=("calls_itself",),
    ),
    Scenario(
        "uvicorn_sync_handler_hangs",
        "deadlocked",
        ("root",),
        False,
        "uvicorn `def` endpoint: 4 AnyIO threads in `Lock.acquire` of a lock a warm-up kept",
        ("uvicorn", "fastapi"),
    ),
    Scenario(
        "gunicorn_idle",
        "idle",
        (),
        False,
        "real gunicorn, 2 sync workers in select on the port, no traffic; arbiter ticks 1/s",
        ("gunicorn",),
    ),
    Scenario(
        "gunicorn_busy",
        "progressing|slow",
        None,
        False,
        "gunicorn, 2 sync workers at ~100% CPU on 3 outside clients' requests; no access log",
        ("gunicorn",),
    ),
    Scenario(
        "gunicorn_handler_hangs",
        "deadlocked",
        None,  # the suspects are the two workers, neither root nor rank
        False,
        "gunicorn, both sync workers in `Lock.acquire` of a lock forked held; 4 clients wait",
        ("gunicorn",),
    ),
    Scenario(
        "gunicorn_sync_handler_sleeps",
        "slow",
        None,  # the suspects are the two workers
        False,
        "gunicorn, both sync workers asleep 90 s in a handler's blocking wait; 4 clients wait "
        "(the advice is a sync worker's: a timeout, more workers - not the event loop's)",
        ("gunicorn",),
        rules=("requests_unanswered",),
    ),
    Scenario(
        "gunicorn_one_worker_stuck",
        "progressing",
        None,  # the stuck worker: a rank by start order, not checked here
        False,
        "gunicorn, one sync worker stuck on an untimed Event in its first request, the other "
        "answering 3 clients: the server serves, the stuck worker is named",
        ("gunicorn",),
        rules=("answers_requests",),
    ),
    Scenario(
        "ray_idle",
        "idle",
        (),
        False,
        "local Ray (gcs_server, raylet, agents, 2 `ray::IDLE`); driver sleeps to its next batch",
        ("ray",),
        rules=("waits_for_outside",),
    ),
    Scenario(
        "ray_tasks_busy",
        "progressing|slow",
        None,
        False,
        "local Ray; 2 `ray::crunch` workers at 100% CPU on pure-Python tasks; driver in ray.wait",
        ("ray",),
    ),
    Scenario(
        "ray_actor_hangs",
        "deadlocked",
        None,  # the suspect is the actor's worker process, neither root nor rank
        False,
        "local Ray; an actor method waits on an Event never set, the driver in ray.get",
        ("ray",),
    ),
    Scenario(
        "checkpoint_poller",
        "idle",
        None,
        False,
        "an eval job polls a checkpoint directory every second, logging 'waiting for a new "
        "checkpoint in DIR': no port, its own timer, one repeated line",
    ),
    Scenario(
        "ray_actor_cycle",
        "deadlocked",
        None,
        False,
        "local Ray; actor A's call waits on B's, which calls back into A - each runs one call "
        "at a time: nested calls wait on each other, nothing died",
        ("ray",),
        rules=("results_never_come",),
    ),
    Scenario(
        "ray_actor_calls_back",
        "progressing",
        None,
        False,
        "the same actors, A allowed two calls at once: round trips back to back, a line every 20",
        ("ray",),
    ),
    Scenario(
        "ray_task_never_fits",
        "deadlocked",
        None,  # the driver waits; the task never had a worker
        False,
        "local Ray (CPUs only); the driver waits in ray.get for a task asking num_gpus=1: "
        "Ray logs that no node can fulfil it",
        ("ray",),
    ),
    Scenario(
        "ray_task_fits",
        "slow|progressing",
        None,
        False,
        "the same task asks for 1 CPU: placed, its worker computes",
        ("ray",),
    ),
    # Useful work, not motion (#28): a poll loop's CPU and its ranks' exchange are no work.
    Scenario(
        "poll_loop_idle",
        "idle",
        (),
        True,
        "2 ranks busy-poll a ZeroMQ socket (NOBLOCK, `zmq.Again`), run `on_idle`, broadcast the "
        "empty batch via gloo every iteration; HTTP front end, no traffic",
        ("zmq",),
    ),
    Scenario(
        "poll_loop_busy",
        "progressing",
        (),
        True,
        "the same poll-loop server under load: 3 outside clients, each request a batch both "
        "ranks compute (20 ms)",
        ("zmq",),
    ),
    Scenario(
        "select_poll_idle",
        "idle",
        (),
        False,
        "a stdlib server busy-polls `selector.select(timeout=0)` on its listening socket at "
        "~100% CPU, no client",
    ),
    Scenario(
        "gloo_spin_on_collective",
        "deadlocked",
        ("rank:2",),
        True,
        "3 gloo ranks poll `fut.done()` of an async all_reduce at 100% CPU; rank 2 sleeps "
        "in `write_checkpoint` and never joins",
    ),
    Scenario(
        "stats_heartbeat_stuck",
        "deadlocked",
        ("rank:2",),
        True,
        "a front end logs its own stats line (`tput=0.0 tok/s`, `active=4`, `queued=11`) twice "
        "a second while its 3 gloo ranks are stuck in mismatched collectives",
    ),
    Scenario(
        "stats_log_moving",
        "progressing",
        (),
        False,
        "the same kind of stats line, its own wording, its `done=N` count rising (requests "
        "finish every 0.2 s, little CPU)",
    ),
    Scenario(
        "harness_calls_own_server",
        "progressing",
        (),
        False,
        "the job benchmarks its own HTTP server: a harness child sends request after request "
        "(20 ms backend wait each), no log, no client outside the job",
    ),
    Scenario(
        "harness_handler_stuck",
        "deadlocked",
        None,  # the suspect is the server child, neither root nor rank-declared
        False,
        "the job's harness waits on its own server, whose handler blocks on a lock the warm-up "
        "kept: a request in flight from inside the job",
    ),
    Scenario(
        "startup_parked",
        "slow",
        None,  # the suspect is the engine child
        False,
        "a server still starting, between two compile steps: port open (503), engine log ends "
        "in a 45% compile bar, every thread waits, no ready line",
    ),
    Scenario(
        "startup_ready_idle",
        "idle",
        (),
        False,
        "the same server after start-up: compile bar at 100%, 'ready to serve' logged, "
        "engine waits for work",
    ),
    Scenario(
        "inductor_compile_quiet",
        "slow",
        None,
        True,
        "torch.compile (inductor, CPU) of one new function after another, g++ children, "
        "generated code and cache written, no log",
    ),
    # Issue #28: the rank everyone waits for; a thread that waits on itself.
    Scenario(
        "gloo_straggler",
        "progressing",
        ("rank:2",),
        True,
        "4 gloo ranks train; rank 2 computes 4x longer per step, ranks 0,1,3 wait for it in "
        "every all_reduce",
        rules=("output_moves",),
    ),
    Scenario(
        "gloo_pipeline_unbalanced",
        "progressing",
        ("rank:0",),
        True,
        "two-stage gloo pipeline (send/recv), stage 0 holds 5x the layers of stage 1: rank 0 "
        "named the bottleneck stage (rebalance the split), rank 1 waits for it in `recv`",
        rules=("output_moves",),
    ),
    Scenario(
        "gloo_pipeline_balanced",
        "progressing",
        (),
        True,
        "two-stage gloo pipeline (send/recv) split evenly: no straggler",
        rules=("output_moves",),
    ),
    Scenario(
        "gloo_input_straggler",
        "progressing|slow",
        ("rank:1",),
        True,
        "3 gloo ranks train; rank 1 waits ~1.5 s per step on its input (`fetch_batch`), "
        "ranks 0,2 wait for it in every all_reduce",
        rules=("output_moves",),
    ),
    Scenario(
        "gloo_balanced_steps",
        "progressing",
        (),
        True,
        "the same 4 gloo ranks with equal work per step: no straggler",
        rules=("output_moves",),
    ),
    Scenario(
        "signal_handler_lock",
        "deadlocked",
        ("root",),
        False,
        "a SIGALRM handler logs through a handler whose plain Lock the interrupted emit holds; "
        "the timer keeps firing, the stack deepens",
        rules=("waits_on_itself",),
    ),
    Scenario(
        "finalizer_lock",
        "deadlocked",
        ("root",),
        False,
        "a connection's `__del__` takes the pool's plain Lock that the frame it ran on top of "
        "(`Pool.swap`) holds; one thread, no timer",
        rules=("waits_on_itself",),
    ),
    Scenario(
        "rlock_reentered",
        "progressing",
        (),
        False,
        "the same shipper with an RLock: the handler re-enters it by design, batches go on",
    ),
    Scenario(
        "deep_recursion",
        "slow",
        ("root",),
        False,
        "a recursive search 300+ frames deep at 100% CPU: recursion, not a self-wait",
    ),
    Scenario(
        "tokenizer_batch",
        "slow",
        ("root",),
        False,
        "one `encode_batch` of a huge shard with HF tokenizers: the Python thread waits in "
        "the call, the rayon pool computes",
        ("tokenizers",),
    ),
    Scenario(
        "fuse_stalled_read",
        "deadlocked",
        None,  # the suspect is the FUSE daemon outside the job (tests/test_fs_waits.py)
        True,
        "3 gloo ranks; rank 1 reads a file on a FUSE mount whose daemon never answers, ranks "
        "0,2 in all_reduce (needs root and /dev/fuse)",
        rules=("waits_on_filesystem",),
    ),
    Scenario(
        "gloo_load_slow_mount",
        "slow",
        None,
        True,
        "3 gloo ranks; rank 0 reads its 64 MiB shard from a FUSE mount answering 1 MiB/s, ranks "
        "1,2 in a barrier: its rate and ETA (needs root and /dev/fuse)",
        rules=("works_silently",),
    ),
    Scenario(
        "gloo_download_slow_mirror",
        "slow",
        ("rank:0",),
        True,
        "3 gloo ranks; rank 0 downloads 64 MiB from a local mirror sending 1 MiB/s, ranks 1,2 "
        "in a barrier: one rank's phase, not the job's progress",
        rules=("alone_in_phase",),
    ),
    Scenario(
        "gloo_compress_checkpoint",
        "slow",
        ("rank:0",),
        True,
        "3 gloo ranks; rank 0 compresses a checkpoint with zlib (native code) to a file, ranks "
        "1,2 in a barrier: one rank's phase, not the job's progress",
        rules=("alone_in_phase",),
    ),
    Scenario(
        "gloo_step_rhythm",
        "unknown|progressing",
        None,
        True,
        "3 gloo ranks, a step every 12 s (rank 2 reads each batch from a mount answering in 12 "
        "s); a capture between two log lines cannot call a hang (needs root and /dev/fuse)",
        rules=("silence_within_rhythm", "output_moves"),
    ),
    Scenario(
        "grpc_stream_stalled",
        "slow",
        ("root",),  # the client that stopped reading (the server is a suspect too)
        False,
        "a trainer reads 3 messages of its data server's gRPC stream, then sleeps: the "
        "server's stream writer waits in `_send_response` for it to read (flow control)",
        ("grpc",),
        rules=("flow_paused",),
    ),
    Scenario(
        "grpc_handler_dead_loader",
        "deadlocked",
        None,  # the suspect is the server child, neither root nor rank
        False,
        "a client's gRPC Predict (no deadline) waits on its server, whose handler waits on "
        "an Event the `model-loader` thread was to set; the thread died ('Exception in "
        "thread model-loader' in the log client and server share)",
        ("grpc",),
    ),
    Scenario(
        "grpc_server_log_dead_loader",
        "deadlocked",
        None,  # the suspect is the server child, neither root nor rank
        False,
        "grpc_handler_dead_loader with the server writing a log of its own, where its "
        "`model-loader` thread's death shows",
        ("grpc",),
        rules=("waits_for_dead_thread",),
    ),
    Scenario(
        "grpc_client_shared_log_dead_loader",
        "deadlocked",
        None,  # the suspect is the server child, neither root nor rank
        False,
        "grpc_handler_dead_loader with the client in a file of its own: the log both write "
        "says `model-loader` died, and only the server runs the file its traceback names",
        ("grpc",),
        rules=("waits_for_dead_thread",),
    ),
    Scenario(
        "shared_log_stop_event",
        "idle",
        (),
        False,
        "an HTTP service, its main thread untimed on a stop Event its SIGTERM handler sets; a "
        "helper child's `metrics` thread died ('Exception in thread metrics' in the shared log)",
        rules=("waits_for_outside",),
    ),
    Scenario(
        "lightning_ddp_dead_fetch",
        "deadlocked",
        ("rank:1",),
        True,
        "Lightning DDP (gloo, 2 ranks): rank 1's training_step waits on an Event its `fetch` "
        "thread died before setting; rank 0 waits in backward",
        ("lightning",),
    ),
    Scenario(
        "lightning_ddp_slow_rank",
        "slow",
        ("rank:1",),
        True,
        "Lightning DDP (gloo, 2 ranks): rank 1 computes for minutes in one training_step; "
        "rank 0 waits in backward",
        ("lightning",),
        rules=("works_silently",),
    ),
    Scenario(
        "native_spin_dead_peer",
        "deadlocked",
        ("root",),
        False,
        "a native busy-poll (C via ctypes, `pause` loop) on a shared-memory flag its peer "
        "process was to set; the peer crashed before posting and was reaped",
        ("numpy",),
        rules=("spins_with_no_party",),
    ),
    Scenario(
        "native_spin_live_peer",
        "slow",
        None,  # the computing peer (a child) is blamed, the spinner named as its waiter
        False,
        "the same native busy-poll; the peer lives and computes for minutes before it posts",
        ("numpy",),
        rules=("works_silently",),
    ),
    Scenario(
        "zmq_push_consumer_died",
        "deadlocked",
        ("root",),
        False,
        "a producer's blocking ZeroMQ PUSH send waits with no peer at all: its one PULL "
        "consumer (a child) was killed after 3 batches and reaped",
        ("zmq",),
    ),
    Scenario(
        "shared_log_long_call",
        "slow",
        ("root",),
        False,
        "one long np.linalg.svd after another on one line, busy; a helper child's `telemetry` "
        "thread died ('Exception in thread telemetry' in the log both share)",
        ("numpy",),
        rules=("works_silently",),
    ),
    Scenario(
        "dask_worker_paused",
        "slow",
        None,  # the suspect is the paused worker, not the root (tests/test_dask_real.py)
        False,
        "a Dask client waits on 10 tasks; the LocalCluster's only worker leaked 87% of its "
        "memory limit and paused itself ('Worker is at 87% memory usage. Pausing worker.')",
        ("dask", "distributed"),
        rules=("flow_paused",),
    ),
    Scenario(
        "zmq_push_stalled",
        "slow",
        ("root",),  # the sender; the receiver that stopped reading leads the suspects
        False,
        "a scheduler pushes batches to its detokenizer over ZeroMQ PUSH/PULL; the detokenizer "
        "reads 3 and sleeps: the scheduler's blocking `send` waits at the high-water mark",
        ("zmq",),
        rules=("flow_paused",),
    ),
)


def start(name: str) -> subprocess.Popen[str]:
    """Start a scenario in its own session and wait for READY."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(SCENARIO_DIR / f"{name}.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            stop(proc)
            raise RuntimeError(f"{name} exited before READY")
        if "READY" in line:
            return proc
    stop(proc)
    raise RuntimeError(f"{name} not READY within {READY_TIMEOUT_S:.0f} s")


def stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def capture(pid: int, out_dir: Path, name: str) -> Dict[str, Any]:
    """`diag capture --pid` with default settings; returns the bundle as plain JSON."""
    out = out_dir / f"{name}.json"
    done = subprocess.run(
        [sys.executable, "-m", "diag", "capture", "--pid", str(pid), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"diag capture failed ({done.returncode}): {done.stderr.strip()}")
    data: Dict[str, Any] = json.loads(out.read_text())
    return data


def run_one(scenario: Scenario, out_dir: Path) -> Tuple[Dict[str, Any], int]:
    """Start, capture, stop; returns (bundle JSON, root pid)."""
    proc = start(scenario.name)
    try:
        return capture(proc.pid, out_dir, scenario.name), proc.pid
    finally:
        stop(proc)


def suspects_text(verdict: Dict[str, Any], root_pid: int) -> str:
    out: List[str] = []
    for s in verdict.get("suspects", []) or []:
        rank = s.get("rank")
        out.append(
            f"rank {rank}"
            if rank is not None
            else ("root" if s["pid"] == root_pid else f"pid {s['pid']}")
        )
    return ", ".join(out) or "-"


def table_row(scenario: Scenario, bundle: Dict[str, Any], root_pid: int) -> str:
    verdict = bundle.get("verdict") or {}
    state = verdict.get("state", "?")
    ok = "yes" if scenario.accepts(state) else "**NO**"
    summary = str(verdict.get("summary", "")).replace("|", "\\|")
    summary = summary.replace(str(root_pid), "<pid>")
    return (
        f"| `{scenario.name}` | {scenario.what} | {scenario.expect.replace('|', ' or ')} "
        f"| **{state}** "
        f"({verdict.get('confidence', 0):.2f}) | {ok} | "
        f"{suspects_text(verdict, root_pid)} | {summary} |"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--record", type=Path, default=None, help="keep bundles here")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch scenarios")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.names or s.name in args.names]
    if args.no_torch:
        chosen = [s for s in chosen if not s.torch]
    mismatches = 0
    # Our own programs first, then the real third-party servers (uvicorn, gunicorn, Ray) as the
    # README's "Real servers" section; vLLM's captures are tests/test_vllm_real.py's.
    own = [s for s in chosen if not s.needs]
    real = [s for s in chosen if s.needs]
    with tempfile.TemporaryDirectory(prefix="diag-scenarios-") as tmp:
        out_dir = args.record or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for index, scenario in enumerate([*own, *real]):
            if index in (0, len(own)):
                if index:
                    print("\n#### Real servers\n", flush=True)
                print(
                    "| scenario | what it stands up | expected | diag says (confidence) | match "
                    "| suspects | summary |"
                )
                print("|---|---|---|---|---|---|---|", flush=True)
            try:
                bundle, root = run_one(scenario, out_dir)
            except RuntimeError as exc:
                print(
                    f"| `{scenario.name}` | {scenario.what} | "
                    f"{scenario.expect.replace('|', ' or ')} | error | "
                    f"**NO** | - | {exc} |",
                    flush=True,
                )
                mismatches += 1
                continue
            verdict = bundle.get("verdict") or {}
            mismatches += not scenario.accepts(verdict.get("state"))
            print(table_row(scenario, bundle, root), flush=True)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
