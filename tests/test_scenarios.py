"""Every scenario program under `diag capture` with default settings: state and suspects.

The table of scenarios (and what diag must say about each) is ``samples/run_scenarios.py``'s
``SCENARIOS``, the same one that produces the README table, so the two cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import REPO, SCENARIOS, run_diag, start_ready

from diag.bundle.io import load_bundle
from diag.verdict.classify import graph_state

_spec = importlib.util.spec_from_file_location(
    "run_scenarios", REPO / "samples" / "run_scenarios.py"
)
assert _spec is not None and _spec.loader is not None
run_scenarios = importlib.util.module_from_spec(_spec)
sys.modules["run_scenarios"] = run_scenarios
_spec.loader.exec_module(run_scenarios)

HAVE_TORCH = importlib.util.find_spec("torch") is not None  # a test extra


# Scenarios whose verdict is wrong today: still in SCENARIOS (they are the spec), expected to
# fail until the verdict learns the signal named here (#16). Remove an entry once it passes.
VERDICT_WRONG_TODAY: Dict[str, str] = {
    "grpc_handler_dead_loader": (
        "the server's handler waits untimed on an Event its model-loader thread died before "
        "setting, but client and server share the job's log and CPython's 'Exception in thread "
        "model-loader' names no process: waits_for_dead_thread takes a shared log's death only "
        "for the one writer running the job's files its traceback names (death_owner), and "
        "here the server re-executes the client's own script - both run it, as an idle "
        "service and its helper do (shared_log_stop_event) - so it reads idle "
        "(waits_for_outside). Telling needs whose thread died: a thread seen alive in an "
        "earlier sample, or the dead function's qualified name (the traceback prints only "
        "co_name, 'loader', not 'serve.<locals>.loader')"
    ),
    "lightning_ddp_dead_fetch": (
        "rank 1 waits untimed on an Event its fetch thread died before setting; the ranks "
        "share the job's log (as Lightning's launcher leaves them) and run one script, so the "
        "traceback's files are both ranks' (death_owner) - as grpc_handler_dead_loader, it "
        "reads idle (waits_for_outside)"
    ),
    "zmq_push_consumer_died": (
        "a PUSH socket's blocking send with no peer connected at all (its consumer was killed "
        "and reaped) reads flow_paused's 'slow: ... find why the receiving process stopped "
        "reading' as zmq_push_stalled (a live consumer not reading) does: the capture shows the "
        "bound port with no connection, but a producer waiting for its first consumer to "
        "connect looks the same, and a SIGKILLed reader leaves no TIME_WAIT (its unread data "
        "makes the kernel reset). The sentence says so (no process connected: its reader died "
        "or never came, with the CPU of the children it reaped) but the state stays slow. "
        "Telling needs the consumer's death (a reaped child's exit status, a death line) or a "
        "connection seen earlier (a watch's history)"
    ),
    "asyncio_flag_daemon": (
        "one asyncio task polling a flag file and logging 'alive tick=N' is, to the kernel and "
        "py-spy, asyncio_event_heartbeat (a task awaiting a dead setter's Event beside a "
        "heartbeat task): the awaiting coroutine is on no stack and 3.11 cannot list a loop's "
        "tasks from outside - wakes_only_itself reads it deadlocked"
    ),
}
# Scenarios where the wait-for graph alone reads another state than the rules, and why the
# rules are right there (see tests/test_classify_recorded.py's GRAPH_DISAGREES).
_SLEEPING_LAGGARD = (
    "the group waits for a rank that sleeps outside the collective (a poll loop): to the graph "
    "a timer ends that sleep; whether the rank then joins is the rules' judgment (diverged)"
)
_PROMPT_LAGGARD = (
    "the group waits for a rank at a prompt on stdin (pdb): to the graph input can still come "
    "(a door); that no one will type into it is the rules' judgment (deadlocked, answer it)"
)
_DEAD_LOADER = (
    "the server's handler thread waits untimed on an Event beside its completion-queue "
    "thread (a socket) and a listening port: to the graph those can set it (idle); that "
    "the thread meant to set it died ('Exception in thread model-loader') is the log's, "
    "read by the rules (waits_for_dead_thread)"
)
GRAPH_DISAGREES: Dict[str, str] = {
    "poll_loop_busy": (
        "requests are answered (the rules: progressing, answers_requests or output_moves); in a "
        "capture whose samples all catch the two ranks between batches, spinning in their "
        "broadcast poll, the graph ends their chains at a timer (idle): the zmq feed from the "
        "front that ends the poll is no edge of the graph. Intermittent - about 1 capture in 4 "
        "since this session's faster samples (the same bundles read the same under 2fc554f)"
    ),
    "grpc_server_log_dead_loader": _DEAD_LOADER,
    "grpc_client_shared_log_dead_loader": _DEAD_LOADER,
    "torchrun_pdb_rank": _PROMPT_LAGGARD,
    "gloo_backoff_503": (
        "rank 1 sleeps in a 45 s back-off while ranks 0, 2 wait in all_reduce: to the graph a "
        "timer ends it (idle); the rules read the group slow - it resumes, on a clock"
    ),
    "dataloader_fetch_hung": (
        "a DataLoader worker's request to a store outside the job has had no byte of answer for "
        "2 min: to the graph a socket to a live outside process is a door that may open (idle); "
        "the rules read the request's age from tcp_info - the fetch hangs"
    ),
    "gloo_link_slow_peer": (
        "rank 1 sleeps 60 s in its own code while rank 0 waits in all_reduce: to the graph a "
        "timer ends it (idle); the rules read the group slow - it resumes, on a clock"
    ),
    "gloo_retry_never_ready": (
        "rank 1 retries a server that answers 503 for good, a 1 s sleep each time: to the graph "
        "a timer ends each sleep (idle); the rules read the same retry again and again - stuck"
    ),
    "ray_idle": (
        "an idle ray::IDLE worker waits for tasks inside Ray's C++ core worker (Worker.main_loop, "
        "no Python wait the graph knows, no CPU): the graph reads it blocked or computing by "
        "the sample; the rules know Ray's idle workers and read idle"
    ),
    "threadpool_nested_submit": (
        "the pool's workers wait on chunk futures queued behind them, the main thread on "
        "theirs; a status thread sleeps between two log lines: to the graph that timer can end "
        "the wait (idle); that the thread only reprints frozen counts is the rules' judgment "
        "(its log is a heartbeat: results_never_come, deadlocked)"
    ),
    "gloo_diverge_sleep": _SLEEPING_LAGGARD,
    "torchrun_store_wait": _SLEEPING_LAGGARD,
    "mp_spawn_barrier": _SLEEPING_LAGGARD,
    "gloo_spin_on_collective": _SLEEPING_LAGGARD,
    "inductor_compile_quiet": (
        "inductor waits on its compile futures while short-lived g++/cc1plus come and go: to "
        "the graph the compilers that exited (0) are ends it waits on; that they were the "
        "work, and more follow, is the rules' judgment (slow, compiling)"
    ),
    "http_wedged_pileup": (
        "the clients' requests reach the server's main thread, asleep on a timer: to the graph a "
        "handler that sleeps (slow); the pile on the lock and its holder waiting for an event "
        "no live thread sets are the rules' judgment (requests_pile_up)"
    ),
    "batch_timeouts_lock": (
        "a watchdog thread sleeps 1 s between its timeout lines: to the graph a timer that can "
        "end the wait (idle); that it only reports failures while a thread blocks on a lock in "
        "every sample is the rules' judgment (deadlocked)"
    ),
    "pool_server_wedged": (
        "as http_wedged_pileup: the clients' requests reach the main thread asleep on a timer "
        "(slow to the graph); the full pool on the lock and its holder are the rules' judgment"
    ),
    "retry_until_answers": (
        "the job sleeps 1 s between tries: to the graph a timer ends it (idle); that its only "
        "output is failures of a service it keeps calling is the rules' judgment (slow)"
    ),
    "gloo_ckpt_retry_full_disk": (
        "rank 0 sleeps 3 s between tries of a save on a full disk: to the graph a timer ends it "
        "(idle); that it logs the same failed retry again and again is the rules' judgment "
        "(diverged)"
    ),
    "pool_rate_limited": (
        "the pool's workers sleep a 45 s Retry-After: to the graph a timer ends each sleep "
        "(idle); that the caller's results come when they wake is the rules' judgment (slow)"
    ),
    "ckpt_save_disk_full": (
        "the job sleeps 3 s between saves: to the graph a timer ends it (idle); that its only "
        "output is writes the kernel refuses (a full disk) is the rules' judgment (slow)"
    ),
    "startup_parked": (
        "a start-up parked between two steps: to the graph every wait ends at a door (a port, "
        "a timer); that the job has not finished starting is the readiness rule's judgment"
    ),
    "store_host_crashed": (
        "the ranks wait to join the store of rank 0, which died before diag looked: no process "
        "is left for the graph to end their chain at; its death is read from its traceback "
        "and its launcher (store_host_died)"
    ),
    "child_pipe_polled": (
        "the parent polls on a timer and never reads the full pipe its child blocks on: to the "
        "graph the timer ends its wait (idle); that it woke again and again and never read is "
        "the rules' judgment (timer_cannot_end)"
    ),
    "lock_held_polling_uploads": (
        "threads block on a lock while the only other thread polls on a timer: to the graph "
        "the timer may release it (idle); that it woke again and again, the same stack each "
        "time, and the lock never moved is the rules' judgment (timer_cannot_end)"
    ),
    "thread_put_holding_lock": (
        "a consumer blocks on a lock whose holder waits in a full queue's put, while the main "
        "thread polls on a timer: to the graph the timer may release it (idle); that it woke "
        "again and again and the lock never moved is the rules' judgment (timer_cannot_end)"
    ),
    "asyncio_event_heartbeat": (
        "the event loop wakes on its heartbeat's timer: to the graph a timer that can end the "
        "wait (idle); that nothing else can wake it (its epoll watches only its own wake-up "
        "pipe, no signal handler) and each wake only logs that it lives is the rules' judgment "
        "(wakes_only_itself)"
    ),
    "thread_event_heartbeat": (
        "the main thread waits on an Event beside a watchdog thread asleep on a timer: to the "
        "graph that timer may set it (idle); that nothing else can wake the process and each "
        "wake only logs that it lives is the rules' judgment (wakes_only_itself)"
    ),
    "manager_lock_orphaned": (
        "the workers wait on the manager, the manager's serving threads on a lock, and its "
        "connection to the parent ends at the parent polling on a timer: to the graph that "
        "timer may act (idle); that the parent only polls and no live client can release the "
        "lock is the rules' judgment (lock_behind_clients)"
    ),
    "spin_on_dead_loader": (
        "the main thread spins on one line: to the graph a process that computes (slow); that "
        "the thread that was to end the spin died is the rules' reading of its log "
        "(spins_for_dead_thread)"
    ),
    "subscriber_quiet_feed": (
        "a subscriber waits in recv on a live feed outside the job: to the graph the chain ends "
        "at a process whose own wait is not captured (deadlocked); that nothing is owed to the "
        "reader is the rules' reading of tcp_info (waits_on_quiet_peer)"
    ),
    "long_poll_waiting": (
        "requests held open by a long poll: to the graph clients wait on a server that does "
        "not answer (deadlocked); that every handler waits with a timeout ending soon is the "
        "rules' reading of the deadlines (requests_unanswered, idle)"
    ),
    "pool_full_health_answers": (
        "a pool full of slow calls: to the graph clients wait on a server that does not answer "
        "(deadlocked); that the pool workers its handlers wait on sleep on timers ending within "
        "10 min is the rules' reading of the deadlines (requests_unanswered, slow)"
    ),
}


def _missing(names: Any) -> Any:
    return [n for n in names if importlib.util.find_spec(n) is None]


def _params() -> Any:
    out = []
    for s in run_scenarios.SCENARIOS:
        marks = [pytest.mark.slow]
        if s.torch:
            marks += [
                pytest.mark.torch,
                pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed"),
            ]
        if _missing(s.needs):
            marks.append(pytest.mark.skip(reason=f"not installed: {', '.join(_missing(s.needs))}"))
        if s.name in VERDICT_WRONG_TODAY:
            marks.append(pytest.mark.xfail(strict=False, reason=VERDICT_WRONG_TODAY[s.name]))
        out.append(pytest.param(s, id=s.name, marks=marks))
    return out


@pytest.mark.parametrize("scenario", _params())
def test_scenario_verdict(scenario: Any, tmp_path: Path) -> None:
    started = start_ready(
        [sys.executable, str(SCENARIOS / f"{scenario.name}.py")],
        timeout_s=run_scenarios.READY_TIMEOUT_S,
    )
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    assert "verdict:" in done.stdout
    bundle: Dict[str, Any] = json.loads(out.read_text())
    verdict = bundle["verdict"]
    assert scenario.accepts(verdict["state"]), verdict["summary"]
    if scenario.rules:  # the rule of the table that decided, where a run confirmed which
        assert verdict["rule"] in scenario.rules, (verdict["rule"], verdict["summary"])
    assert done.stdout.strip().splitlines()[-1].startswith(f"verdict: {verdict['state']}")
    implied = graph_state(load_bundle(out).verdict.graph)  # type: ignore[union-attr]
    if implied is not None and scenario.name not in GRAPH_DISAGREES:
        assert verdict["state"] in implied, (
            f"the wait-for graph reads {implied}: {verdict.get('graph', {}).get('chains')}"
        )
    suspects = verdict.get("suspects", [])
    if scenario.suspects is None or verdict["state"] != scenario.expect.split("|")[0]:
        return  # the suspects are those of the first state the scenario accepts
    if not scenario.suspects:
        assert suspects == [], verdict["summary"]
    for expected in scenario.suspects:
        kind, _, value = expected.partition(":")
        if kind == "rank":
            assert int(value) in [s.get("rank") for s in suspects], verdict["summary"]
        else:
            assert started.pid in [s["pid"] for s in suspects], verdict["summary"]


@pytest.mark.slow
def test_fail_on_exits_with_documented_code(tmp_path: Path) -> None:
    started = start_ready([sys.executable, str(SCENARIOS / "lock_order.py")])
    try:
        out = tmp_path / "b.json"
        done = run_diag(
            ["capture", "--pid", str(started.pid), "-o", str(out), "--fail-on", "deadlocked,slow"]
        )
        passed = run_diag(
            ["capture", "--pid", str(started.pid), "-o", str(out), "--fail-on", "idle"]
        )
    finally:
        started.stop()
    assert done.returncode == 10, done.stderr
    assert "--fail-on" in done.stderr and out.exists()  # outputs written before the exit
    assert passed.returncode == 0, passed.stderr
    out_l = str(tmp_path / "l.json")
    launched = run_diag(
        ["capture", "--fail-on", "exited", "-o", out_l, "--", sys.executable, "-c", "pass"]
    )
    assert launched.returncode == 10, launched.stderr
    assert (tmp_path / "l.json").exists()
    bad = run_diag(["capture", "--pid", "1", "--fail-on", "stuck"])
    assert bad.returncode == 2 and "stuck" in bad.stderr
